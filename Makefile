# convtap: every target sets up .venv itself (Python >= 3.11 and make are all it needs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The official SDKs the end-to-end tests drive as real clients live in a virtualenv of their own:
# openai 3 needs h11 >= 0.16, which mitmproxy 11 does not allow beside it.
CLIENTS ?= .venv-clients
CLIENTS_STAMP := $(CLIENTS)/.installed
CODEX_VERSION := 0.171.0
# Datasette, with convtap's plugin (convtap installed without its dependencies), in a virtualenv of
# its own for the same reason: its httpx needs an h11 that mitmproxy 11 refuses. zstandard beside
# it: the plugin's `convtap_event` reads raw events stored as zstd frames.
DATASETTE ?= .venv-datasette
DATASETTE_STAMP := $(DATASETTE)/.installed
# Datasette 1.0 (alpha) the same way: the plugin is tested on both.
DATASETTE1 ?= .venv-datasette1
DATASETTE1_STAMP := $(DATASETTE1)/.installed
# Arize Phoenix, a real OpenTelemetry receiver for the trace tests, in a virtualenv of its own
# (its dependencies are many, and pinned apart).
PHOENIX ?= .venv-phoenix
PHOENIX_STAMP := $(PHOENIX)/.installed
UV_VERSION := 0.13.9
UV_VENV ?= .venv-uv
UV_BIN := $(UV_VENV)/bin/uv
UV := UV_PYTHON_DOWNLOADS=never $(UV_BIN)
UV_INSTALL := -q --compile-bytecode

.PHONY: demo test check lint dist bench goldens schemas docs clean

# uv makes the virtualenvs (pip's resolver and installer take several times its CPU: a fresh
# clone's `make test` waits on them before its first test); pip itself installs uv.
$(UV_BIN):
	$(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install -q uv==$(UV_VERSION)

# Each virtualenv: made by uv, its packages compiled to bytecode as they are installed (where
# PYTHONDONTWRITEBYTECODE is set, nothing else would, and each process would compile again).
$(STAMP): pyproject.toml constraints.txt | $(UV_BIN)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "convtap needs Python >= 3.11 (set PYTHON=...)"; exit 1; }
	$(UV) venv -q --seed --allow-existing -p $(PYTHON) $(VENV)
	$(UV) pip install $(UV_INSTALL) --python $(BIN)/python -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

$(CLIENTS_STAMP): constraints-clients.txt | $(UV_BIN)
	$(UV) venv -q --allow-existing -p $(PYTHON) $(CLIENTS)
	$(UV) pip install $(UV_INSTALL) --python $(CLIENTS)/bin/python -c constraints-clients.txt \
		openai openai-agents
	@# The Codex CLI too, where npm is (its test says so when it is not).
	-command -v npm >/dev/null && npm install -s --no-audit --no-fund --prefix $(CLIENTS)/codex \
		@openai/codex@$(CODEX_VERSION)
	@touch $(CLIENTS_STAMP)

$(DATASETTE_STAMP): constraints-datasette.txt pyproject.toml | $(UV_BIN)
	$(UV) venv -q --allow-existing -p $(PYTHON) $(DATASETTE)
	$(UV) pip install $(UV_INSTALL) --python $(DATASETTE)/bin/python -c constraints-datasette.txt \
		datasette zstandard
	$(UV) pip install $(UV_INSTALL) --python $(DATASETTE)/bin/python --no-deps -e .
	@touch $(DATASETTE_STAMP)

$(DATASETTE1_STAMP): constraints-datasette1.txt pyproject.toml | $(UV_BIN)
	$(UV) venv -q --allow-existing -p $(PYTHON) $(DATASETTE1)
	$(UV) pip install $(UV_INSTALL) --python $(DATASETTE1)/bin/python \
		-c constraints-datasette1.txt datasette zstandard
	$(UV) pip install $(UV_INSTALL) --python $(DATASETTE1)/bin/python --no-deps -e .
	@touch $(DATASETTE1_STAMP)

$(PHOENIX_STAMP): constraints-phoenix.txt | $(UV_BIN)
	$(UV) venv -q --allow-existing -p $(PYTHON) $(PHOENIX)
	$(UV) pip install $(UV_INSTALL) --python $(PHOENIX)/bin/python -c constraints-phoenix.txt \
		arize-phoenix
	@touch $(PHOENIX_STAMP)

demo: $(STAMP)
	$(BIN)/convtap demo --db captures/demo.db

VENVS := $(STAMP) $(CLIENTS_STAMP) $(DATASETTE_STAMP) $(DATASETTE1_STAMP) $(PHOENIX_STAMP)

# The virtualenvs are made side by side (installing waits on files more than on the CPU): a fresh
# clone's `make test` spends less before its first test. convtap's own modules (installed
# editable) are compiled first: the suite starts hundreds of processes that import them.
test:
	@$(MAKE) --no-print-directory -j5 $(VENVS)
	@$(BIN)/python -m compileall -q -j0 addon tests bench > /dev/null
	CONVTAP_CLIENTS_PYTHON=$(abspath $(CLIENTS))/bin/python \
		CONVTAP_DATASETTE=$(abspath $(DATASETTE))/bin/datasette \
		CONVTAP_DATASETTE1=$(abspath $(DATASETTE1))/bin/datasette \
		CONVTAP_PHOENIX=$(abspath $(PHOENIX))/bin/phoenix $(BIN)/python -m pytest -q -m "not release"

# Every test that starts no process, the quick loop (a test that starts one unmarked fails here:
# tests that do are marked `process`, and `make test` runs them too). Each Hypothesis property
# tries a quarter of its examples here (tests/conftest.py), all of them under `make test`.
check: $(STAMP)
	CONVTAP_NO_PROCESSES=1 $(BIN)/python -m pytest -q -m "not process"

lint: $(STAMP)
	$(BIN)/ruff check addon tests bench captures
	$(BIN)/ruff format --check addon tests bench captures
	$(BIN)/mypy
	$(BIN)/lint-imports

# The sdist and the wheel (the wheel is built from the sdist alone), then checked; then the
# release checks: the wheel installed outside the checkout, and every install line of README.md
# run as written in fresh virtualenvs (pip from PyPI: minutes, so not in `make test`).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*
	$(BIN)/python -m pytest -q -m release

# Each prints its figures as ratios to a floor measured in the same run. Where valgrind is
# installed, the recorder and `convtap decode` are also counted in instructions (callgrind: the
# same from run to run on a shared machine); without it, those lines say so and are skipped.
bench: $(STAMP)
	$(BIN)/python bench/decode_bench.py --instructions 30000
	$(BIN)/python bench/decode_memory_bench.py
	$(BIN)/python bench/import_memory_bench.py
	$(BIN)/python bench/proxy_bench.py
	$(BIN)/python bench/recorder_bench.py --instructions 3
	$(BIN)/python bench/redaction_bench.py
	$(BIN)/python bench/burst_bench.py
	$(BIN)/python bench/audit_bench.py
	$(BIN)/python bench/diff_bench.py
	$(BIN)/python bench/report_bench.py
	$(BIN)/python bench/live_bench.py

goldens: $(STAMP)
	$(BIN)/python -m tests.goldens --write

schemas: $(STAMP)
	$(BIN)/convtap schemas

# docs/rules.md is generated from the rule registry (a test fails when it is out of date).
docs: $(STAMP)
	$(BIN)/python -m convtap.contract.ruledoc > docs/rules.md.tmp
	mv docs/rules.md.tmp docs/rules.md

clean:
	rm -rf $(VENV) $(UV_VENV) $(CLIENTS) $(DATASETTE) $(DATASETTE1) $(PHOENIX) .pytest_cache .mypy_cache .ruff_cache .hypothesis dist build
