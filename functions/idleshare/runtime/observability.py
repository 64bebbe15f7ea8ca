"""Logger, tracer and metrics: one place, one service name.

The Powertools ``Tracer`` imports the X-Ray SDK (and, in Lambda, patches botocore and the HTTP
libraries) when it is built: that alone costs about as much as ``import boto3``. ``tracer`` here is
the same Tracer, built the first time a handler runs (or anything touches it), so importing a
handler module stays cheap; the first invocation pays for it (``make bench`` reports that cost).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics

from idleshare import names

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

E = TypeVar("E")
R = TypeVar("R")

# Libraries that log credentials at DEBUG: botocore prints each signed request's headers
# (Authorization, X-Amz-Security-Token) and, when presigning the EKS token, the canonical query
# string (the session token) and the signature — together the bearer token. hpack prints HTTP/2
# headers (Authorization: Bearer ...). Lambda sets the root logger to DEBUG when an operator turns
# the application log level to DEBUG; these stay at INFO, whatever the root level.
SECRET_LOGGING_LIBRARIES = ("botocore", "boto3", "hpack")
for _name in SECRET_LOGGING_LIBRARIES:
    if logging.getLogger(_name).level < logging.INFO:
        logging.getLogger(_name).setLevel(logging.INFO)


class LazyTracer:
    """``Tracer(service=...)`` on first use; ``capture_lambda_handler`` wraps a handler without building it."""

    def __init__(self, service: str) -> None:
        self._service = service
        self._tracer: Tracer | None = None

    @property
    def built(self) -> bool:
        return self._tracer is not None

    def get(self) -> Tracer:
        if self._tracer is None:
            from aws_lambda_powertools import Tracer

            self._tracer = Tracer(service=self._service)
        return self._tracer

    def capture_lambda_handler(self, handler: Callable[[E, Any], R]) -> Callable[[E, Any], R]:
        traced: list[Callable[[E, Any], R]] = []

        @functools.wraps(handler)
        def wrapper(event: E, context: Any) -> R:
            if not traced:
                traced.append(self.get().capture_lambda_handler(handler))
            return traced[0](event, context)

        return wrapper

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


logger = Logger(service=names.SERVICE)
tracer = LazyTracer(service=names.SERVICE)
metrics = Metrics(namespace=names.METRICS_NAMESPACE, service=names.SERVICE)
