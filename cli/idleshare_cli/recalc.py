"""`idleshare recalc --cluster C [--wait [SECONDS]] [--reason TEXT]`: ask the deployed stack to recompute a
cluster's pool now (the API publishes ``Recalculation Requested``), and optionally wait for the receipt
the recompute writes. Exit 0 when requested (or, with ``--wait``, Done); 1 on Failed or when the wait ran out.
"""

from __future__ import annotations

import argparse
from typing import Any

from idleshare.parse.requests import REASON_MAX as MAX_REASON
from idleshare_cli import remote
from idleshare_cli.main import CommandError, UsageError

DEFAULT_WAIT = 300.0
MAX_WAIT = 3600.0
FINAL = ("Done", "Failed")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = remote.cluster_command(sub, "recalc", "recompute a cluster's pool now", recalc)
    p.add_argument(
        "--wait",
        nargs="?",
        const=DEFAULT_WAIT,
        type=_wait,
        metavar="SECONDS",
        help=f"wait for the result (default {DEFAULT_WAIT:g}s when given without a value)",
    )
    p.add_argument("--reason", metavar="TEXT", help=f"recorded with the request (at most {MAX_REASON} characters)")


def _wait(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= MAX_WAIT:
        raise argparse.ArgumentTypeError(f"must be > 0 and <= {MAX_WAIT:g} (got {text})")
    return value


def reason_body(args: argparse.Namespace) -> dict[str, str] | None:
    """The body carrying ``--reason`` (None: none given), ``--cluster`` and ``--reason`` checked (UsageError)."""
    if not args.cluster.strip():
        raise UsageError("--cluster: must not be empty")
    if args.reason is not None:
        from idleshare.parse.requests import Reason
        from idleshare.parse.schema import problem

        why = problem(args.reason, Reason)  # the API's rule: a Description's characters, at most 1024
        if why is not None:
            raise UsageError(f"--reason: {why}")
    return {"reason": args.reason} if args.reason else None


def recalc(args: argparse.Namespace) -> int:
    body = reason_body(args)
    api = remote.connect(args)
    _, accepted = api.post(["clusters", args.cluster, "recalculate"], body)
    request_id = accepted.get("requestId") if isinstance(accepted, dict) else None
    if not isinstance(request_id, str) or not request_id:
        raise CommandError("POST recalculate: the API answered without a requestId")
    status = accepted.get("status")
    if args.wait is None or status in FINAL:
        remote.emit(args, accepted, _requested_text if status not in FINAL else _receipt_text)
        return 1 if status == "Failed" else 0
    receipt = _poll(api, args.cluster, request_id, args.wait)
    remote.emit(args, receipt, _receipt_text)
    if receipt.get("status") != "Done":
        raise CommandError(f"recalculation {request_id} of cluster {args.cluster} failed: {_why(receipt)}")
    return 0


def _poll(api: remote.ApiClient, cluster: str, request_id: str, wait: float) -> dict[str, Any]:
    """GET the receipt until it is final or ``wait`` seconds have passed (404 = not yet)."""
    start = remote.monotonic()
    interval = 1.0
    try:
        while True:
            elapsed = remote.monotonic() - start
            remote.progress(f"recalculation {request_id} of {cluster}: waiting ({elapsed:.0f}s of {wait:g}s)")
            try:
                receipt = api.get(["clusters", cluster, "recalculations", request_id])
            except remote.ApiError as exc:
                if exc.status != 404:
                    raise
                receipt = None
            if isinstance(receipt, dict) and receipt.get("status") in FINAL:
                return receipt
            remaining = wait - (remote.monotonic() - start)
            if remaining <= 0:
                raise CommandError(
                    f"recalculation {request_id} of cluster {cluster}: no result after {wait:g}s; "
                    f"it may still run: check `idleshare pool show --cluster {cluster}`"
                )
            remote.sleep(min(interval, remaining))
            interval = min(interval * 1.5, 5.0)
    finally:
        remote.end_progress()


def _why(receipt: dict[str, Any]) -> str:
    for key in ("message", "error", "reason", "applyMessage"):
        if receipt.get(key):
            return str(receipt[key])
    return f"status {receipt.get('status')!r}"


def _requested_text(accepted: dict[str, Any]) -> str:
    return (
        f"Recalculation of cluster {accepted.get('cluster')} requested: request id {accepted.get('requestId')} "
        f"({accepted.get('status')}). Follow it with --wait, or `idleshare pool show --cluster {accepted.get('cluster')}`."
    )


def _receipt_text(receipt: dict[str, Any]) -> str:
    status = receipt.get("status")
    line = f"Recalculation {receipt.get('requestId')} of cluster {receipt.get('cluster')}: {status}"
    if receipt.get("generation") is not None:
        line += f", generation {receipt['generation']}"
    if "changed" in receipt:
        line += " (the pool changed)" if receipt["changed"] else " (no change)"
    if status != "Done":
        line += f": {_why(receipt)}"
    return line
