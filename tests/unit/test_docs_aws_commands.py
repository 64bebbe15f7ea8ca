"""Every `aws` command the documents show, checked against botocore's model of its operation (the model the AWS CLI
is generated from): the operation exists, each flag is one of its parameters (or one of the CLI's own options), and
every required parameter is given. A mention without flags (`aws events start-replay`) names an operation: it must
exist. `aws eks update-kubeconfig` is the CLI's own command (not in botocore): its flags are checked against the
CLI's documented ones."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name

REPO = Path(__file__).parents[2]
DOCS = [
    "README.md",
    "infra/README.md",
    "events/README.md",
    *sorted(str(p.relative_to(REPO)) for p in REPO.glob("docs/*.md")),
]
GLOBAL = {
    "--region",
    "--profile",
    "--output",
    "--query",
    "--endpoint-url",
    "--no-paginate",
    "--no-cli-pager",
    "--debug",
}
PAGING = {"--max-items", "--starting-token", "--page-size"}
# the AWS CLI's customizations (awscli/customizations), not operations of a service model: flag -> required
CUSTOM = {("eks", "update-kubeconfig"): {"--name": True, "--role-arn": False, "--alias": False, "--kubeconfig": False}}
SESSION = botocore.session.get_session()


def aws_commands() -> list[tuple[str, str]]:
    """(document, command) for every `aws …` line of a code block and every inline `aws …` span."""
    found = []
    for doc in DOCS:
        text = (REPO / doc).read_text()
        for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S):
            found += [(doc, line.strip()) for line in block.splitlines() if line.strip().startswith("aws ")]
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        found += [(doc, " ".join(span.split())) for span in re.findall(r"`(aws [^`]+)`", prose)]
    return found


def words(command: str) -> list[str]:
    command = re.split(r"\s(?:>|\||#)\s", command)[0]
    return shlex.split(re.sub(r"<[^>]*>", "PLACEHOLDER", command))


def flags(argv: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        assert argv[i].startswith("--"), f"not a flag: {argv[i]!r} in {argv}"
        value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
        out[argv[i]] = value
        i += 2 if value is not None else 1
    return out


def test_the_documents_show_aws_commands_and_the_replay_one() -> None:
    commands = [c for _, c in aws_commands()]
    assert len(commands) >= 5
    assert any(words(c)[1:3] == ["events", "start-replay"] and "--replay-name" in c for c in commands)


@pytest.mark.parametrize(("doc", "command"), aws_commands(), ids=lambda v: v if v.endswith(".md") else v[:60])
def test_every_aws_command_matches_its_operations_model(doc: str, command: str) -> None:
    _, service, operation, *rest = words(command)
    given = flags(rest)
    if (service, operation) in CUSTOM:
        known = CUSTOM[(service, operation)]
        assert set(given) - GLOBAL <= set(known), f"{doc}: {command}"
        assert {f for f, required in known.items() if required} <= set(given), f"{doc}: {command}"
        return
    model = SESSION.get_service_model(service)
    by_cli_name = {xform_name(name, "-"): name for name in model.operation_names}
    assert operation in by_cli_name, f"{doc}: {command}: {service} has no operation {operation}"
    if not given:
        return  # a mention of the operation, not a command to run
    shape = model.operation_model(by_cli_name[operation]).input_shape
    members = {f"--{xform_name(m, '-')}": m for m in (shape.members if shape else {})}
    unknown = set(given) - set(members) - GLOBAL - PAGING
    assert not unknown, (
        f"{doc}: {command}: {sorted(unknown)} not parameters of {model.service_name}.{by_cli_name[operation]}"
    )
    missing = {f"--{xform_name(m, '-')}" for m in (shape.required_members if shape else [])} - set(given)
    assert not missing, f"{doc}: {command}: required {sorted(missing)} missing"


def test_the_replay_reads_the_archive_into_the_bus() -> None:
    # StartReplay's source is the ARCHIVE (its ARN), its destination the bus; a replay needs a name and a window
    shape = SESSION.get_service_model("events").operation_model("StartReplay").input_shape
    assert set(shape.required_members) == {
        "ReplayName",
        "EventSourceArn",
        "EventStartTime",
        "EventEndTime",
        "Destination",
    }
    replays = [c for _, c in aws_commands() if words(c)[1:3] == ["events", "start-replay"] and "--" in c]
    assert replays
    for command in replays:
        raw = dict(re.findall(r"(--[a-z-]+) (\S+)", command))
        assert "archive" in raw["--event-source-arn"].lower(), command
        assert raw["--destination"].startswith("Arn=") and "bus" in raw["--destination"].lower(), command
