"""`idleshare pause --cluster C [--reason TEXT]` and `idleshare resume --cluster C [--reason TEXT]`: stop governing a
cluster now, leaving its Kueue objects as they are, and govern it again (a recompute is requested at once); both are
recorded with the caller and the reason (`idleshare pool history`). Exit 0 whether or not the switch moved (a paused
cluster stays paused: the answer says since when and by whom).
"""

from __future__ import annotations

import argparse
from typing import Any

from idleshare.parse.requests import REASON_MAX as MAX_REASON
from idleshare_cli import remote
from idleshare_cli.main import CommandError
from idleshare_cli.present import paused_text
from idleshare_cli.recalc import reason_body


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, help_, func in (
        ("pause", "stop governing a cluster now, leave its Kueue objects as they are", pause),
        ("resume", "govern a paused cluster again (a recompute runs at once)", resume),
    ):
        p = remote.cluster_command(sub, name, help_, func)
        p.add_argument("--reason", metavar="TEXT", help=f"recorded with it (at most {MAX_REASON} characters)")


def pause(args: argparse.Namespace) -> int:
    return _switch(args, "pause")


def resume(args: argparse.Namespace) -> int:
    return _switch(args, "resume")


def _switch(args: argparse.Namespace, action: str) -> int:
    body = reason_body(args)
    api = remote.connect(args)
    _, answer = api.post(["clusters", args.cluster, action], body)
    if not isinstance(answer, dict) or not isinstance(answer.get("paused"), bool):
        raise CommandError(f"POST {action}: the API answered without the cluster's state")
    remote.emit(args, answer, switch_text)
    return 0


def switch_text(answer: dict[str, Any]) -> str:
    cluster = answer.get("cluster")
    paused = paused_text(answer)
    if paused is not None:
        lead = f"Cluster {cluster} " + ("is now " if answer.get("changed") else "was already ")
        return (
            f"{lead}{paused}: idleshare writes nothing to it, its Kueue objects stay as they are. "
            f"`idleshare resume --cluster {cluster}` governs it again."
        )
    if not answer.get("changed"):
        return f"Cluster {cluster} is not paused: idleshare governs it (nothing changed)."
    return (
        f"Cluster {cluster} resumed at {answer.get('since')} by {answer.get('by')}: a recompute was requested "
        f"(request id {answer.get('requestId')}; `idleshare pool show --cluster {cluster}`)."
    )
