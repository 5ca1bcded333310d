# The two commands of the README: `make demo` (the main job) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STORE := sqlite:///mlruns.db
ARTIFACTS := mlartifacts
EXPERIMENT ?= mlflow-recsys-demo

.PHONY: install demo demo-server test docs-test lint validate ui-check browser-test postgres-test ray-test docs clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: the CPU wheel; a bare `torch` could pull a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[test]"
	# The recbole wheel ships MovieLens-100k; --no-deps keeps its own heavy requirements out.
	$(PY) -m pip install --quiet --no-deps recbole==1.2.1
	touch $@

install: $(VENV)/.installed

demo: install
	@# The experiment keeps its artifacts under ./$(ARTIFACTS) beside the SQLite store.
	@MLFLOW_TRACKING_URI=$(STORE) $(PY) -c "import mlflow, pathlib; \
	mlflow.get_experiment_by_name('$(EXPERIMENT)') or mlflow.create_experiment('$(EXPERIMENT)', \
	artifact_location=pathlib.Path('$(ARTIFACTS)').resolve().as_uri())"
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" MLFLOW_TRACKING_URI=$(STORE) \
		$(VENV)/bin/mlflow run . --env-manager local --experiment-name $(EXPERIMENT)

# The demo's store served with the recsys pages (`make demo` first): tick its runs and compare them in the browser.
demo-server: install
	@echo "open http://127.0.0.1:5000/recsys/ (Ctrl-C stops the server)"
	@# The pages' forms are signed with MLFLOW_FLASK_SERVER_SECRET_KEY (required, as for basic-auth): yours if set, else a fresh one.
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" \
		MLFLOW_FLASK_SERVER_SECRET_KEY="$${MLFLOW_FLASK_SERVER_SECRET_KEY:-$$($(PY) -c 'import secrets; print(secrets.token_hex(32))')}" \
		$(VENV)/bin/mlflow server --app-name recsys --backend-store-uri $(STORE) --host 127.0.0.1 --port 5000

test: install
	$(PY) -m pytest

# ruff (lint, and the format check) over the repository, mypy over the package. The lint extra pins both tools, so
# a new release of either cannot turn CI red on unchanged code.
$(VENV)/.lint-installed: pyproject.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[lint]"
	touch $@

lint: $(VENV)/.lint-installed
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(VENV)/bin/mypy

# Every documentation page and example script run whole, as a reader would (tests marked walkthrough, about 5
# minutes): the shown output must still be what the code prints.
docs-test: install
	$(PY) -m pytest -m walkthrough -q

validate: install
	$(PY) -m pytest -m validation -s -q

# The docs extra (mkdocs, mkdocstrings, the material theme) goes into the same .venv, once.
$(VENV)/.docs-installed: pyproject.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $@

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Opens the demo's comparison run (so `make demo` first) in the MLflow UI at 1280 px and refreshes the README's
# screenshot. Debian's chromium renders it headless, driven by Playwright (the `ui` extra; no browser download).
ui-check: install
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(PY) -c "import playwright" 2>/dev/null || $(PY) -m pip install --quiet -e ".[ui]"
	$(PY) scripts/ui_check.py --store "$(STORE)" --experiment "$(EXPERIMENT)"

# The recsys server pages in a real browser (tests/test_server_browser.py, about a minute): `mlflow server --app-name
# recsys` on 127.0.0.1, driven through Debian's chromium by Playwright (the `ui` extra; no browser download).
browser-test: install
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(PY) -c "import playwright" 2>/dev/null || $(PY) -m pip install --quiet -e ".[ui]"
	timeout 180 $(PY) -m pytest -m browser -q
	@# The same pages on real servers without a browser (compare jobs, recsys-auth, the how-to page), and a tracking
	@# server killed or silenced mid-command: about 4 minutes.
	$(PY) -m pytest -m "server_pages or server_faults" -q

# The tracking server in its production shape (tests/test_postgres_server.py, about 4 minutes): `mlflow server` on
# PostgreSQL and on SQLite with proxied artifacts, the selection, comparison and refusal tests once per backend.
# Debian's PostgreSQL (installed with apt when missing) runs from a temporary folder, as the postgres user under root.
postgres-test: install
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql)
	timeout 600 $(PY) -m pytest -m postgres -q

# A study fanned out on a local Ray beside the same study run sequentially (tests/test_study_executors.py, about
# 3.5 minutes): the same metrics per seed, a failed training that leaves the others, and resume. Installs the ray extra
# when it is missing; -s prints the two studies' wall times.
ray-test: install
	$(PY) -c "import ray" 2>/dev/null || $(PY) -m pip install --quiet -e ".[ray]"
	timeout 600 $(PY) -m pytest -m ray -q -s

# Only what `make demo` and `make docs` (site/) made. The README points users at the demo's store for their own
# runs, so scripts/clean_demo.py removes from it only the demo's study runs and their steps (with their artifacts),
# and the store and ./$(ARTIFACTS) only when nothing else is in them. Never ./mlruns: an experiment created from
# the command line keeps its artifacts there. Without .venv, the store is left as it is.
clean:
	rm -rf site
	@if [ -x "$(PY)" ]; then \
		$(PY) scripts/clean_demo.py --store "$(STORE)" --experiment "$(EXPERIMENT)" --artifacts "$(ARTIFACTS)"; \
	elif [ -e "$(patsubst sqlite:///%,%,$(STORE))" ]; then \
		echo "make clean: no $(PY), so the demo's runs in $(STORE) were left"; fi
