"""The admin API's contract in memory (quotas, pool, excluded nodes, grants, history, recalculations), paged as the
real API pages, enough to drive the CLI through the API Gateway emulator (``tests/apigw_local.py``). The pool is the
engine's for the example cluster (events/examples)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from idleshare.service.admin import DEFAULT_SCHEDULER_CONFIG
from idleshare_cli.plan import plan
from idleshare_cli.present import result_json

EXAMPLES = Path(__file__).parents[1] / "events" / "examples"


def example_pool() -> dict[str, Any]:
    result, _ = plan((EXAMPLES / "nodes.json").read_bytes(), (EXAMPLES / "quotas.json").read_bytes())
    return result_json(result)


class FakeAdminApi:
    """The admin API (its routes: docs/operations.md) in memory, enough to drive the CLI."""

    PAGE = 2
    POOL_SAMPLE = 100  # excluded nodes GET pool shows (as the real API)
    TEAMS_SAMPLE = 100  # teams GET pool shows (as the real API)

    def __init__(self) -> None:
        self.repeat_token = ""  # a server bug: the same NextToken on every page
        self.quotas: dict[str, dict[str, Any]] = {}
        self.scheduler: dict[str, Any] | None = None  # the stored scheduler config (None: the defaults, version 0)
        self.pool = example_pool()
        self.receipt_after = 2  # GETs of a receipt answered 404 before it exists
        self.receipt_status = "Done"
        self.receipt_polls: dict[str, int] = {}
        self.fail_next: list[int] = []  # statuses to answer before serving normally
        self.grant_generations: list[int] = []  # the generation of each page of GET grants in turn (then 7)
        self.pause: dict[str, Any] = {"paused": False}  # the pause switch as GET pool's ``pause`` shows it
        self.pauses: list[dict[str, Any]] = []  # the pause / resume entries, newest first (GET history's first page)

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if self.fail_next:
            return self.reply(self.fail_next.pop(0), {"message": "try again"})
        method, parts = event["httpMethod"], event["path"].strip("/").split("/")
        query = event["queryStringParameters"] or {}
        body = json.loads(event["body"]) if event["body"] else None
        if parts[0] != "clusters" or len(parts) < 3:
            return self.reply(404, {"message": "no route"})
        cluster, what, rest = parts[1], parts[2], parts[3:]
        if cluster != "demo":
            return self.reply(404, {"message": f"unknown cluster {cluster!r}", "errors": []})
        if what == "compute-quotas":
            return self.quota(method, cluster, rest[0] if rest else None, query, body)
        if what == "scheduler-config":
            return self.scheduler_config(method, cluster, body)
        if (method, what) == ("GET", "pool"):
            head = {"cluster": cluster, "generation": 7, "computedAt": "2026-12-01T10:00:00Z"}
            status = {"applyStatus": "Failed", "applyMessage": "kube API timeout", "readFailure": ""}
            excluded = self.pool["excludedNodes"]
            shown = sorted(excluded)[: self.POOL_SAMPLE]
            summary = {"total": len(excluded), "byReason": dict(Counter(excluded.values())), "shown": len(shown)}
            summary["route"] = f"/clusters/{cluster}/excluded-nodes"
            bounded = {"excludedNodes": {n: excluded[n] for n in shown}, "excludedSummary": summary}
            teams = sorted(self.pool["teams"])[: self.TEAMS_SAMPLE]
            bounded["teams"] = {t: self.pool["teams"][t] for t in teams}
            route = f"/clusters/{cluster}/grants"
            bounded["teamsSummary"] = {"total": len(self.pool["teams"]), "shown": len(teams), "route": route}
            return self.reply(
                200, {**head, **status, **self.pool, **bounded, "pause": {"cluster": cluster, **self.pause}}
            )
        if (method, what) == ("GET", "excluded-nodes"):
            names_ = sorted(self.pool["excludedNodes"])
            token = query.get("NextToken", "0")
            start = 0 if token == self.repeat_token else int(token)
            limit = min(int(query.get("limit", "1000")), self.PAGE)
            chunk = {n: self.pool["excludedNodes"][n] for n in names_[start : start + limit]}
            next_token = self.repeat_token or str(start + limit) if start + limit < len(names_) else None
            page = {"cluster": cluster, "generation": 7, "total": len(names_), "excludedNodes": chunk}
            return self.page(page, next_token)
        if (method, what) == ("GET", "grants") and rest and rest[0] not in self.pool["teams"]:
            return self.reply(404, {"message": f"unknown team {rest[0]!r}", "errors": []})
        if (method, what) == ("GET", "grants") and rest:
            return self.reply(
                200, {"cluster": cluster, "generation": 7, "team": rest[0], **self.pool["teams"][rest[0]]}
            )
        if (method, what) == ("GET", "grants"):
            teams, start = sorted(self.pool["teams"]), int(query.get("NextToken", "0"))
            limit = min(int(query.get("limit", "100")), self.PAGE)
            chunk = {t: self.pool["teams"][t] for t in teams[start : start + limit]}
            generation = self.grant_generations.pop(0) if self.grant_generations else 7
            page = {"cluster": cluster, "generation": generation, "total": len(teams), "teams": chunk}
            return self.page(page, str(start + limit) if start + limit < len(teams) else None)
        if (method, what) == ("GET", "history"):
            start = int(query.get("NextToken", "10"))
            limit = min(int(query.get("limit", "20")), self.PAGE)
            gens = [{"generation": g, "computedAt": f"t{g}", "summary": f"gen {g}"} for g in range(start, 0, -1)]
            page = {"generations": gens[:limit]} | ({} if "NextToken" in query else {"pauses": self.pauses})
            return self.page(page, str(start - limit) if len(gens) > limit else None)
        if method == "POST" and what in ("pause", "resume"):
            return self.switch(cluster, what == "pause", (body or {}).get("reason") or "")
        if (method, what) == ("POST", "recalculate"):
            request_id = f"req-{len(self.receipt_polls) + 1}"
            self.receipt_polls[request_id] = 0
            self.reasons = (body or {}).get("reason")
            return self.reply(202, {"requestId": request_id, "cluster": cluster, "status": "Requested"})
        if (method, what) == ("GET", "recalculations") and rest[0] in self.receipt_polls:
            self.receipt_polls[rest[0]] += 1
            if self.receipt_polls[rest[0]] <= self.receipt_after:
                return self.reply(404, {"message": "no receipt yet", "errors": []})
            receipt = {"requestId": rest[0], "cluster": cluster, "status": self.receipt_status, "generation": 8}
            receipt.update({"changed": True} if self.receipt_status == "Done" else {"message": "kube API down"})
            return self.reply(200, receipt)
        return self.reply(404, {"message": "no route"})

    def switch(self, cluster: str, pause: bool, reason: str) -> dict[str, Any]:
        """POST pause / resume as the real API answers: the state; unchanged when it already was (no entry)."""
        if self.pause["paused"] == pause:
            return self.reply(200, {"cluster": cluster, **self.pause, "changed": False})
        at = f"2026-12-01T1{len(self.pauses)}:00:00+00:00"
        self.pause = {"paused": pause, "since": at, "by": "arn:aws:iam::111122223333:user/admin", "reason": reason}
        if pause:
            self.pause.update(skippedRecomputes=0, lastSkippedAt=None)
        self.pauses.insert(0, {"action": "Paused" if pause else "Resumed", "at": at, "by": self.pause["by"]})
        self.pauses[0]["reason"] = reason
        answer = {"cluster": cluster, **self.pause, "changed": True} | ({} if pause else {"requestId": "req-resume"})
        return self.reply(200, answer)

    def quota(self, method: str, cluster: str, name: str | None, query: dict[str, str], body: Any) -> dict[str, Any]:
        if name is None and method == "POST":
            if body.get("Description") == "server says no":
                errors = [{"field": "Description", "message": "refused by the server"}]
                return self.reply(422, {"message": "Validation failed", "errors": errors})
            if body["Name"] in self.quotas:
                return self.reply(409, {"message": f"quota {body['Name']} exists", "errors": []})
            self.quotas[body["Name"]] = {**body, "ComputeQuotaVersion": 1, "Status": "Created", "ClusterId": cluster}
            return self.reply(201, self.quotas[body["Name"]])
        if name is None:
            names_ = sorted(n for n in self.quotas if query.get("NameContains", "") in n)
            start = int(query.get("NextToken", "0"))
            summaries = [self.quotas[n] for n in names_[start : start + self.PAGE]]
            more = start + self.PAGE < len(names_)
            return self.page({"ComputeQuotaSummaries": summaries}, str(start + self.PAGE) if more else None)
        if name not in self.quotas:
            return self.reply(404, {"message": f"no compute quota {name!r} in cluster {cluster!r}", "errors": []})
        current = self.quotas[name]["ComputeQuotaVersion"]
        if method == "GET":
            return self.reply(200, self.quotas[name])
        target = body.get("TargetVersion") if method == "PUT" else query.get("TargetVersion")
        if target is not None and int(target) != current:
            message = f"TargetVersion {target} is stale: the current version is {current}"
            return self.reply(409, {"message": message, "errors": [], "CurrentVersion": current})
        if method == "DELETE":
            del self.quotas[name]
            return {"statusCode": 204, "headers": {}, "body": ""}
        patch = {k: v for k, v in body.items() if k != "TargetVersion"}
        self.quotas[name] = {**self.quotas[name], **patch, "ComputeQuotaVersion": current + 1}
        return self.reply(200, self.quotas[name])

    def scheduler_config(self, method: str, cluster: str, body: Any) -> dict[str, Any]:
        """GET / PUT as the real API (service/admin.py): no TargetVersion creates, a stale one is a 409."""
        current = self.scheduler["SchedulerConfigVersion"] if self.scheduler else 0
        if method == "PUT":
            target = body.get("TargetVersion")
            if (target is None and current) or (target is not None and target != current):
                message = f"TargetVersion {target} is stale: the current version is {current}"
                return self.reply(409, {"message": message, "errors": [], "CurrentVersion": current})
            config = body["SchedulerConfig"]
            self.scheduler = {"SchedulerConfig": config, "SchedulerConfigVersion": current + 1, "Status": "Created"}
        elif method != "GET":
            return self.reply(404, {"message": "no route"})
        default = {"SchedulerConfig": dict(DEFAULT_SCHEDULER_CONFIG), "SchedulerConfigVersion": 0, "Status": "Default"}
        stored = self.scheduler or default
        return self.reply(200, {"ClusterId": cluster, **stored})

    def page(self, body: dict[str, Any], next_token: str | None) -> dict[str, Any]:
        return self.reply(200, body | ({"NextToken": next_token} if next_token else {}))

    @staticmethod
    def reply(status: int, payload: Any) -> dict[str, Any]:
        return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(payload)}
