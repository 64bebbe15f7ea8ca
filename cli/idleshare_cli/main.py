"""The `idleshare` command."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.domain.model import DEFAULT_TOLERATED_TAINT_KEYS, BorrowLimitBasis, Headroom
from idleshare.parse.errors import InputError

EXIT_INPUT = 2
AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


class UsageError(Exception):
    """A bad argument or an unreadable file: exit 2 with one line naming it."""


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as file:  # not pathlib: `idleshare plan` imports as little as it can
            return file.read()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None


def _cmd_plan(args: argparse.Namespace) -> int:
    from idleshare.domain.cluster_settings import SettingError, engine_settings
    from idleshare.domain.naming import is_label_key, show
    from idleshare_cli.plan import plan
    from idleshare_cli.present import result_json, result_tables

    try:  # the cluster's settings a flag gives (the rest: their defaults), checked as the registry checks them
        cluster = ClusterSettings(
            cohort_name=args.cohort_name,
            namespace_prefix=args.namespace_prefix,
            borrow_limit_basis=BorrowLimitBasis(args.borrow_limit_basis.capitalize()),
            headroom=Headroom(args.headroom),
        )
    except SettingError as exc:
        flag = "--" + exc.setting.replace("_", "-")
        raise UsageError(f"{flag} {show(str(getattr(args, exc.setting)))}: {exc.problem}") from None
    for name in args.extra_resource or ():
        if not is_label_key(name):
            raise UsageError(f"--extra-resource {show(name)}: not a valid resource name (a label key: [prefix/]name)")

    settings = engine_settings(
        cluster,
        tolerated_taint_keys=frozenset(args.tolerate) if args.tolerate else DEFAULT_TOLERATED_TAINT_KEYS,
        extra_resources=frozenset(args.extra_resource or ()),
    )
    result, manifests = plan(
        _read(args.nodes, "--nodes"),
        [(path, _read(path, "--quotas")) for path in args.quotas] if args.quotas else None,
        _read(args.scheduler_config, "--scheduler-config") if args.scheduler_config else None,
        settings=settings,
        sources=(args.nodes, "quotas", args.scheduler_config or "scheduler-config"),
        kueue_api=args.kueue_api,
        daemonsets=_read(args.daemonsets, "--daemonsets") if args.daemonsets else None,
        pods=_read(args.pods, "--pods") if args.pods else None,
        workloads=_read(args.workloads, "--workloads") if args.workloads else None,
        workload_sources=(args.daemonsets or "daemonsets", args.pods or "pods", args.workloads or "workloads"),
    )
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    if fmt == "html":  # the report page offline: the pool, the limits and why; usage needs a deployed cluster
        from idleshare_cli.report_html import OFFLINE_NOTE, render

        sys.stdout.write(render(result_json(result), usage_note=OFFLINE_NOTE))
        return 0
    if fmt == "json":
        from idleshare_cli.plan import json_bytes

        data = json_bytes(result_json(result, manifests)) + b"\n"  # = json.dump(..., indent=2), with msgspec
        if hasattr(sys.stdout, "buffer"):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        else:  # a redirected text stream (tests)
            sys.stdout.write(data.decode())
    else:
        from idleshare.domain.kueue_versions import GROUP

        print(result_tables(result))
        kinds = [str(m.get("kind")) for m in manifests if not str(m.get("apiVersion")).startswith(f"{GROUP}/")]
        versions = sorted({str(m.get("apiVersion")) for m in manifests if str(m.get("apiVersion")).startswith(GROUP)})
        parts = [f"{len(manifests) - len(kinds)} {', '.join(versions)} objects"]
        parts += [f"{kinds.count(k)} {k}{'s' if kinds.count(k) != 1 else ''}" for k in sorted(set(kinds))]
        listed = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
        print(f"\n{listed} (see --format json)")
    return 0


# Command modules besides `plan`: each has ``register(subparsers)`` adding its sub-commands, whose
# ``func(args) -> int`` raises InputError/UsageError (exit 2) or idleshare_cli.main.CommandError (exit 1).
COMMAND_MODULES = ("quota", "scheduler_config", "pool", "recalc", "pause", "replay", "report", "usage", "uninstall")


class CommandError(Exception):
    """The command ran but failed (remote error, mismatch): exit 1 with this message."""


class _Help(argparse.HelpFormatter):
    """argparse's help, sized as argparse sizes it (``$COLUMNS``, else the terminal, less 2) without importing
    ``shutil`` (and with it bz2 and lzma): argparse builds a formatter on every ``add_argument``, so that import
    was a twentieth of `idleshare plan`'s start, for help it never prints."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        if width is None:
            try:
                width = int(os.environ["COLUMNS"])
            except (KeyError, ValueError):
                try:
                    width = os.get_terminal_size(1).columns  # standard output's terminal
                except OSError:
                    width = 80
            width -= 2
        super().__init__(prog, indent_increment, max_help_position, width)


class _Version(argparse.Action):
    """``--version``: idleshare's version, written once (``idleshare.__version__``, which the package metadata and
    the CDK stack's description read too)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from idleshare import __version__

        print(f"idleshare {__version__}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command="plan"`` only `plan`'s part: `idleshare plan` imports none of
    the remote commands' modules (HTTP, SigV4, botocore), so it starts as fast as the engine can."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="idleshare", description="Share idle GPU capacity through Kueue.", formatter_class=_Help
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("plan", help="compute the lendable pool and the Kueue objects from files", formatter_class=_Help)
    p.add_argument("--nodes", required=True, metavar="NODES.json", help="`kubectl get nodes -o json` output")
    p.add_argument(
        "--quotas",
        metavar="QUOTAS.json",
        action="append",
        help="SageMaker compute quotas: `aws sagemaker list-compute-quotas` output, a JSON array of quotas or one "
        "quota (CreateComputeQuota's shape, a file written by hand); repeatable: one file a team; without it, no team has a quota (the capacity alone: all of it is the lendable pool)",
    )
    p.add_argument("--scheduler-config", metavar="SC.json", help="SageMaker SchedulerConfig")
    p.add_argument(
        "--format",
        choices=["json", "table", "html"],
        help="default: table on a terminal, else json; html: the report page (self-contained)",
    )
    p.add_argument("--tolerate", action="append", metavar="TAINT_KEY", help="tolerated taint key (repeatable)")
    p.add_argument(
        "--extra-resource",
        action="append",
        metavar="RESOURCE",
        help="another allocatable resource to track (repeatable; amd.com/gpu, say): capacity, the pool, Count; and "
        "what Accelerators counts on a flavor whose nodes expose no GPU or Neuron device",
    )
    p.add_argument("--cohort-name", default=ClusterSettings().cohort_name)
    p.add_argument("--namespace-prefix", default=ClusterSettings().namespace_prefix)
    p.add_argument(
        "--borrow-limit-basis",
        choices=[b.lower() for b in BorrowLimitBasis],
        default=str(ClusterSettings().borrow_limit_basis).lower(),
        help="what BorrowLimit is a percentage of: quota (HyperPod's: the team's own quota, default) or pool "
        "(the lendable pool the team sees)",
    )
    p.add_argument(
        "--headroom",
        choices=list(Headroom),
        default=str(ClusterSettings().headroom),
        help="which pods that are not Kueue's reduce a node's allocatable: off, daemonsets (those that will run on "
        "it; the default) or all (also the bound pods neither a DaemonSet's nor Kueue's: Kueue's are those an "
        "admitted Workload given owns); read from --daemonsets, --pods, --workloads, or a "
        "`kubectl get nodes,daemonsets,pods,workloads -A -o json` given as --nodes",
    )
    p.add_argument("--daemonsets", metavar="DS.json", help="`kubectl get daemonsets -A -o json` (headroom)")
    p.add_argument("--pods", metavar="PODS.json", help="`kubectl get pods -A -o json` (headroom on `all`)")
    p.add_argument(
        "--workloads", metavar="WL.json", help="`kubectl get workloads -A -o json` (headroom on `all`: Kueue's pods)"
    )
    p.add_argument(
        "--kueue-api",
        choices=["v1beta2", "v1beta1", "v1alpha1"],
        default="v1beta2",
        help="the kueue.x-k8s.io version to write the objects in: v1beta2 (Kueue v0.15+, default), v1beta1 (v0.13-"
        "v0.14), v1alpha1 (v0.12: the Cohort in v1alpha1, the rest v1beta1); a cluster's own version is discovered",
    )
    p.set_defaults(func=_cmd_plan)
    for name in () if command == "plan" else COMMAND_MODULES:
        try:
            module = importlib.import_module(f"idleshare_cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"idleshare_cli.{name}":
                raise
            continue  # not built yet
        module.register(sub)
    return parser


def _flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each argument's destination -> how the user spelled it (``start`` -> ``--from``), every verb's."""
    out: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out.update(_flags(sub))
        elif action.option_strings:
            out[action.dest] = action.option_strings[0]
    return out


def check_arguments(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """What no verb can use, refused before any runs (each was a traceback where it was first used): a lone
    surrogate (no UTF-8 carries it: a path, a header, a body), a NUL (no path or header holds one), a region that is
    no AWS region's name (it goes into the signature's scope and the Host header)."""
    flags = _flags(parser)
    for dest, value in vars(args).items():
        flag = flags.get(dest, dest)
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str):
                continue
            if re.search("[\ud800-\udfff]", text):
                raise UsageError(f"{flag}: not Unicode text (it holds a lone surrogate)")
            if "\x00" in text:
                raise UsageError(f"{flag}: holds a NUL character")
    region = getattr(args, "region", None)
    if region is not None and not AWS_REGION.fullmatch(region):
        raise UsageError(f"--region: {region[:64]!r} is not an AWS region name (like us-west-2)")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser("plan" if argv[:1] == ["plan"] else None)
    args = parser.parse_args(argv)
    try:
        check_arguments(args, parser)
        code: int = args.func(args)
    except (InputError, UsageError) as exc:
        print(f"idleshare {args.command}: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except CommandError as exc:
        print(f"idleshare {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":
    # `python -m idleshare_cli.main`: run the imported module's main, whose UsageError/CommandError are the
    # classes the command modules raise (this __main__ copy has its own, which would escape as tracebacks).
    from idleshare_cli.main import main as _main

    sys.exit(_main())
