# idleshare — everything a newcomer needs starts here: `make demo`, `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.local/bin:$(PATH)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export AWS_ACCOUNT_ID_ENDPOINT_MODE := disabled
UV ?= uv
RUN := $(UV) run --frozen
PYTEST_WORKERS ?= 2

.PHONY: help bootstrap sync npm kube-stack browser demo test compat coverage lint unit kube integration deploy-check infra synth docs \
	bench cost bench-scale release clean

# `make help` lists every target a user runs: each target's line carries its `## ` text (tests/unit/test_makefile.py
# holds every .PHONY target to it).
help: ## this list
	@awk -F ':[^#]*## ' '/^[a-zA-Z0-9_-]+:[^=]*## / {printf "make %-13s %s\n", $$1, $$2}' $(firstword $(MAKEFILE_LIST))

# uv from PyPI when the machine has none (installs in seconds).
bootstrap: ## install uv from PyPI when the machine has none
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv

sync: bootstrap ## the locked Python packages into .venv (uv sync --frozen)
	@$(UV) sync --frozen --quiet

# The real Kubernetes + Kueue stack (etcd, kube-apiserver, kubectl, the Kueue manager) from the versions pinned
# in devkit/kube/go.mod, built once into ~/.cache/idleshare/kube (about 10 min cold on 2 cores; then skipped).
kube-stack: ## build the real Kubernetes + Kueue stack once into ~/.cache/idleshare/kube (~10 min cold)
	@bash devkit/kube/build.sh >/dev/null

# Debian's chromium for the HTML report's test (tests/unit/test_report_html.py drives it with Playwright):
# installed once through apt (as root), never a browser download (`playwright install` cannot work here).
browser: ## Debian's chromium for the HTML report's test (apt, as root)
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@command -v chromium >/dev/null 2>&1 || { echo "make browser: chromium is not installed (apt-get install chromium, as root)" >&2; exit 1; }

npm: ## the pinned CDK CLI and DynamoDB Local into node_modules (npm ci)
	@if [ -f package-lock.json ] && { [ ! -f node_modules/amplify-dynamodb-simulator/emulator/DynamoDBLocal.jar ] || [ ! -x node_modules/.bin/cdk ]; }; then npm ci --no-audit --no-fund --loglevel=error; fi

# A day in the life of a HyperPod cluster through the real handlers on embedded services (no AWS account).
demo: sync kube-stack ## the main job, local, no AWS account: a day in the life of a HyperPod-like cluster
	$(RUN) python -m devkit.demo

lint: sync ## ruff, ruff format, mypy, the import contracts
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	$(RUN) lint-imports

unit: sync browser ## the unit tests and the bench tests
	$(RUN) pytest -n $(PYTEST_WORKERS) tests/unit tests/bench

# The compatibility suite (tests/compat, and the adapter's discovery and version round trip: tests/kube/
# test_kueue_versions.py) once per Kueue version of devkit/kube/kueue_versions.py, the default first:
# each version's Kueue built once into ~/.cache/idleshare/kube (bash devkit/kube/build.sh --kueue V), each run's
# outcomes written to docs/compat.json, then docs/getting-started.md's support table regenerated from it. Fails when a run fails.
compat: sync npm kube-stack ## the compatibility suite on every Kueue version; regenerates docs/getting-started.md's support table
	@status=0; for v in $$($(RUN) python -m devkit.kube.kueue_versions); do \
		bash devkit/kube/build.sh --kueue $$v >/dev/null || exit 1; \
		echo "make compat: Kueue $$v"; \
		IDLESHARE_KUEUE_VERSION=$$v IDLESHARE_COMPAT_RESULTS=docs/compat.json \
			$(RUN) pytest -n $(PYTEST_WORKERS) tests/compat tests/kube/test_kueue_versions.py || status=1; \
	done; \
	$(RUN) python -m tests.compat.results readme || status=1; \
	exit $$status

# Everything that runs against the real kube-apiserver + Kueue (the adapter, Kueue admission end to end).
kube: sync npm kube-stack ## the suites against the real kube-apiserver + Kueue (tests/kube, tests/e2e, tests/compat)
	$(RUN) pytest -n $(PYTEST_WORKERS) tests/kube tests/e2e tests/compat

integration: sync npm kube-stack ## the integration suite (DynamoDB Local, the real stack)
	$(RUN) pytest -n $(PYTEST_WORKERS) tests/integration

# One pytest run for every suite (one closing line for CI to read).
test: lint npm kube-stack browser deploy-check ## lint + every test suite (what CI runs)
	$(RUN) pytest -n $(PYTEST_WORKERS) tests/unit tests/kube tests/e2e tests/compat tests/bench tests/integration tests/infra

# Branch coverage of the deployed code (functions/idleshare) and of the CLI (cli/idleshare_cli) over the same run as
# `make test` (xdist workers and the Python subprocesses the tests start combined; settings in pyproject.toml
# [tool.coverage]): the total, then per package.
# Hypothesis draws from a fixed seed here, so that two runs of the same tests measure the same lines.
COVERAGE_PACKAGES := domain parse adapters service runtime handlers api
coverage: sync npm kube-stack browser ## branch coverage of functions/idleshare and the CLI (cli/idleshare_cli) over every suite
	rm -f .coverage .coverage.*
	$(RUN) pytest -n $(PYTEST_WORKERS) --cov --cov-report= --hypothesis-seed=0 tests/unit tests/kube tests/e2e tests/compat tests/bench tests/integration tests/infra
	@$(RUN) coverage report --skip-covered | tail -n 4
	@for pkg in $(COVERAGE_PACKAGES); do \
		printf 'idleshare.%-9s %s%%\n' "$$pkg" "$$($(RUN) coverage report --include="functions/idleshare/$$pkg/*" --format=total)"; \
	done
	@printf 'idleshare (top)    %s%%\n' "$$($(RUN) coverage report --include='functions/idleshare/*.py' --format=total)"
	@printf 'idleshare_cli      %s%%\n' "$$($(RUN) coverage report --include='cli/idleshare_cli/*' --format=total)"

# Rehearse `cdk deploy` (infra/deploy_check.py): synth as a new shell would run it, check what a first
# deploy needs (access entry vs rbac.yaml, each function's variables, alarm actions), import every
# handler from the asset on Python 3.12 (the Lambda runtime's; pyenv's on this machine kind).
deploy-check: sync npm ## rehearse `cdk deploy` without an account (infra/deploy_check.py)
	$(RUN) python -m infra.deploy_check

infra: sync npm ## the CDK app's tests (tests/infra)
	$(RUN) pytest -n $(PYTEST_WORKERS) tests/infra

synth: sync npm ## npx cdk synth, offline, on the config cdk.json names
	npx cdk synth --quiet

# The documents' generated sections from their one source (devkit/docgen.py): infra/README.md's stack from the
# synthesized template and infra/k8s/rbac.yaml, docs/architecture.md's item kinds from idleshare.table.ITEMS.
# tests/infra/test_stack_doc.py and tests/unit/test_items_doc.py fail until they are regenerated.
docs: sync ## regenerate the documents' generated sections (the deployed stack, the table's items)
	$(RUN) python -m devkit.docgen

bench: sync npm kube-stack ## benchmarks (ratios against floors measured in the same run; `make cost` included)
	$(RUN) python tests/bench/bench_all.py

# A simulated day per cluster through the real handlers, counted at the AWS boundaries, priced by
# tests/bench/prices.json (tests/bench/bench_cost.py; docs/benchmarks.md, "What it costs").
cost: sync npm ## the bill per cluster-month at 5,000 nodes / 200 teams, line by line (also in `make bench`)
	$(RUN) python tests/bench/bench_cost.py

# Not CI: 20k, 50k and 100k real-shaped nodes on the real apiserver (tests/bench/bench_scale.py; docs/benchmarks.md).
bench-scale: sync npm kube-stack ## not CI: 20k, 50k and 100k real-shaped nodes on the real apiserver
	$(RUN) python tests/bench/bench_scale.py

# Cut a release (devkit/release.py): refuses a working tree with changes, a CHANGELOG.md without a dated section for
# the version (functions/idleshare/__init__.py) or without its upgrade notes, an existing tag; else tags v<version>.
# RELEASE_FLAGS=--check only says whether it could.
release: sync ## tag v<version> once CHANGELOG.md has its dated section (docs/operations.md#cutting-a-release)
	@$(RUN) python -m devkit.release $(RELEASE_FLAGS)

clean: ## remove build outputs and caches (.build, cdk.out, the tools' caches)
	rm -rf .build cdk.out .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.*
