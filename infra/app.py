"""CDK entry point (cdk.json: `python3 infra/launch.py`, which runs `uv run --no-sync python -m infra.app`).

Loads and validates the config before building anything: an invalid config prints the offending
fields and exits 2, without a traceback. cdk-nag's AwsSolutions pack runs on every synth.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as `python infra/app.py`: import infra.* from the repo root
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from idleshare import names
from infra.bundling import lambda_code
from infra.config import CONTEXT_STUB_ASSET, ConfigError, IdleshareConfig, load_config
from infra.stack import IdleshareStack


def _truthy(value: object) -> bool:
    return str(value).lower() in {"1", "true", "yes"}


def build_app(app: App | None = None, *, config: IdleshareConfig | None = None, nag: bool = True) -> IdleshareStack:
    """Build the idleshare stack into `app` (tests pass their own App and config)."""
    app = app or App()
    config = config or load_config(app.node.try_get_context)
    stack = IdleshareStack(
        app,
        names.STACK_NAME,
        config=config,
        code=lambda_code(stub=_truthy(app.node.try_get_context(CONTEXT_STUB_ASSET))),
        # Env-agnostic unless the CLI knows the account; nothing in the stack needs lookups.
        env=Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")),
    )
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stack


def main() -> int:
    app = App()
    try:
        stack = build_app(app)
    except ConfigError as exc:
        print(f"idleshare: {exc}", file=sys.stderr)
        return 2
    stack.node.root.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
