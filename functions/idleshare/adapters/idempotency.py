"""Explicit recalculation requests run once: the :class:`~idleshare.adapters.ports.RequestLedger` on
Powertools idempotency records in the idempotency table (docs/spec.md §5).

EventBridge delivers at least once and SQS forgets its deduplication after 5 minutes: a redelivery within
the hour is answered with the first run's answer (``requestId``, ``generation``, ``changed``) instead of a
new recompute. A run that raised leaves no record, so SQS's retry runs it again. Without the table (local
runs) every delivery runs. Powertools' idempotency module is imported on the first request that needs it
(the recompute's cold start does not pay for it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from idleshare import timings
from idleshare.adapters.ports import RequestAnswer, RequestLedger

RECORD_KEY_PREFIX = "recalculate"
"""The records' key after the function's name (``<function>.recalculate#<hash>``), fixed rather than Powertools'
default (the decorated function's module and qualified name), so that a record stays valid across a deploy that
moves the code writing it."""


class PassThroughLedger:
    """No idempotency table: every delivery runs."""

    def once(self, cluster_id: str, request_id: str, run: Callable[[], RequestAnswer]) -> RequestAnswer:
        return run()


class PowertoolsLedger:
    """The ledger on one idempotency table. Its persistence layer (and DynamoDB client), configuration and
    idempotent function are built once and reused by the container's invocations; :meth:`serving` tells it
    the invocation an in-progress record expires with."""

    def __init__(self, table_name: str, boto_config: Any = None) -> None:
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )

        self.config = IdempotencyConfig(
            event_key_jmespath="[cluster, requestId]",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=timings.RECALC_IDEMPOTENCY_SECONDS,
            use_local_cache=False,  # a warm container must not answer from memory what the table no longer holds
        )
        prefix = f"{os.getenv('AWS_LAMBDA_FUNCTION_NAME', 'test-func')}.{RECORD_KEY_PREFIX}"

        @idempotent_function(  # type: ignore[untyped-decorator]
            data_keyword_argument="request",  # only the request is hashed: `run` is this delivery's recompute
            config=self.config,
            persistence_store=DynamoDBPersistenceLayer(table_name=table_name, boto_config=boto_config),
            key_prefix=prefix,
        )
        def recalculate(request: dict[str, str], run: Callable[[], RequestAnswer]) -> dict[str, Any]:
            answer = run()
            return {"requestId": answer.request_id, "generation": answer.generation, "changed": answer.changed}

        self._recalculate = recalculate

    def serving(self, context: Any) -> PowertoolsLedger:
        """This ledger for the invocation ``context`` (an in-progress record expires with it)."""
        if callable(getattr(context, "get_remaining_time_in_millis", None)):
            self.config.register_lambda_context(context)
        else:
            self.config.lambda_context = None
        return self

    def once(self, cluster_id: str, request_id: str, run: Callable[[], RequestAnswer]) -> RequestAnswer:
        kept = self._recalculate(request={"cluster": cluster_id, "requestId": request_id}, run=run)
        return RequestAnswer(str(kept["requestId"]), int(kept["generation"]), bool(kept["changed"]))


class RequestLedgers:
    """The ledger of each invocation: one :class:`PowertoolsLedger` per idempotency table, built on first use
    and reused while the container is warm; no table -> a pass-through. ``boto_config``: what its DynamoDB client
    is built with (the function's timeouts and retries)."""

    def __init__(self, boto_config: Any = None) -> None:
        self._ledgers: dict[str, PowertoolsLedger] = {}
        self.boto_config = boto_config

    def ledger(self, table_name: str | None, context: Any = None) -> RequestLedger:
        if not table_name:
            return PassThroughLedger()
        if table_name not in self._ledgers:
            self._ledgers[table_name] = PowertoolsLedger(table_name, self.boto_config)
        return self._ledgers[table_name].serving(context)
