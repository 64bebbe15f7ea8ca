"""The README's screenshot (docs/report.png) from a real, clean example: the demo's cluster on the real
kube-apiserver + Kueue, replayed up to a step, its stored pool and the usage the node watcher reads back rendered
as `idleshare report` renders them, opened in Debian's Chromium and screenshotted.

    uv run --frozen python -m devkit.screenshot [--out docs/report.png] [--step 3]

``--out`` is where it writes (the docs' screenshot by default): a ``.html`` path gets the page itself (no browser
needed), any other the screenshot (Chromium). To see the report locally without touching the docs:
``--out /tmp/report.html``.

Step 3 of events/scenarios/day-in-the-life.yaml ("08:20 ml-research queues a second sweep"): ml-research borrows
8 GPUs (its absolute cap) and its second sweep waits with p5 GPUs idle; infra borrows 32 trn1 devices (50% of its
quota) and waits for 16 more, and its p5 Job waits at a limit of 0 (p5 is not in its quota).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
SCENARIO = ROOT / "events" / "scenarios" / "day-in-the-life.yaml"
DEFAULT_OUT = ROOT / "docs" / "report.png"
"""The README's screenshot: what ``--out`` writes unless told otherwise."""


def page_of(step: int) -> str:
    """The report page of the demo's cluster after ``step`` (1-based)."""
    from devkit import scenario
    from idleshare_cli.report_html import render

    sc = scenario.load(SCENARIO)
    sc = scenario.dataclasses.replace(sc, steps=sc.steps[:step])
    reports = scenario.run(sc)
    last = reports[-1]
    if last.failures or last.mismatches:
        raise SystemExit(f"step {step} did not replay cleanly: {last.failures or last.mismatches}")
    pool: dict[str, Any] = {**last.pool, "cluster": sc.cluster.cluster_id}
    at = str(last.usage.get("sampledAt") or "")
    return render(pool, usage=last.usage, generated_at=at)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devkit.screenshot", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", nargs="?", help=argparse.SUPPRESS)  # the earlier positional form of --out
    parser.add_argument(
        "--out",
        metavar="PATH",
        help=f"where to write: a .html path gets the page, any other the screenshot (default {DEFAULT_OUT.relative_to(ROOT)})",
    )
    parser.add_argument("--step", type=int, default=3, help="the day-in-the-life step to show (default 3)")
    parser.add_argument("--width", type=int, default=1240)
    args = parser.parse_args(argv)
    if args.out and args.target:
        parser.error("give the path once: --out PATH")
    target = Path(args.out or args.target or DEFAULT_OUT).resolve()
    if target.suffix.lower() in (".html", ".htm"):
        target.write_text(page_of(args.step), encoding="utf-8")
        print(f"wrote {target}")
        return 0
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: `make browser` installs Debian's", file=sys.stderr)
        return 2
    html = target.with_suffix(".html")
    html.write_text(page_of(args.step), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_context(viewport={"width": args.width, "height": 900}).new_page()
        page.goto(html.as_uri(), wait_until="load")
        page.screenshot(path=str(target), full_page=True)
        browser.close()
    html.unlink()
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
