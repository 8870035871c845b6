# The two commands from the README: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
PYTHON ?= python3

# Services the test suite talks to over real connections (see the README's "The two commands").
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/tessera
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

.PHONY: venv demo test lint lock clean kube-control-plane

# Dependencies (README, "Adding a dependency"): requirements/*.in are written by hand, the locks
# requirements/*.txt are generated from them by `make lock` (pinned, with hashes). The image
# installs runtime.txt only; `make demo` needs the runtime, `make test` and `make lint` the dev lock.
# uv installs from its own cache (a re-install takes seconds) and falls back to that cache alone
# when the package index cannot be reached.
UV_INSTALL := $(UV) pip install --python $(PY) --require-hashes --quiet

$(UV):
	$(PYTHON) -m venv $(VENV)
	awk '/^uv==/{p=1} p&&/^ *#/{exit} p' requirements/dev.txt > $(VENV)/uv-lock.txt
	$(PY) -m pip install --quiet --require-hashes --no-deps -r $(VENV)/uv-lock.txt

$(VENV)/.runtime: requirements/runtime.txt | $(UV)
	$(UV_INSTALL) -r requirements/runtime.txt || $(UV_INSTALL) --offline -r requirements/runtime.txt
	touch $@

$(VENV)/.dev: requirements/dev.txt | $(UV)
	$(UV_INSTALL) -r requirements/dev.txt || $(UV_INSTALL) --offline -r requirements/dev.txt
	touch $@

venv: $(VENV)/.dev

# Re-pin both locks after editing a requirements/*.in file. Existing pins are kept unless asked:
# `make lock ARGS="--upgrade-package django"` (one package) or `make lock ARGS=--upgrade` (all).
LOCK := $(UV) pip compile --quiet --generate-hashes --python-version 3.11 --custom-compile-command "make lock"
lock: | $(UV)
	$(LOCK) $(ARGS) requirements/runtime.in -o requirements/runtime.txt
	$(LOCK) $(ARGS) requirements/dev.in -o requirements/dev.txt

demo: $(VENV)/.runtime
	DEBUG=1 CELERY_TASK_ALWAYS_EAGER=1 $(PY) manage.py demo

# The real Kubernetes control plane the tests in tests/kube/ start (docs/reference/kube-control-plane.md):
# built once into $(TESSERA_KUBE_CACHE), outside the work tree; instant when already there.
TESSERA_KUBE_CACHE ?= /var/cache/tessera/kube
export TESSERA_KUBE_CACHE
kube-control-plane:
	tools/kube-control-plane/build.sh

# Two xdist workers: most tests wait on browsers, Celery workers and the control plane, so two cores
# run two suites' worth (each worker gets its own test database and Redis key prefix; tests/conftest.py
# keeps tests/kube on one worker).
test: $(VENV)/.dev kube-control-plane
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) \
	SECRET_KEY=test-secret-key-not-for-production-0123456789 DEBUG=0 \
	$(PY) -m pytest -n 2 --dist loadgroup

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy  # the engine (scheduling/engine); settings in pyproject.toml

clean:
	rm -rf $(VENV) var/demo.sqlite3
