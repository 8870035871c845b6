# The two commands from the README: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

# Services the test suite talks to over real connections (see DEVELOPERS.md).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/tessera
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

.PHONY: demo test lint bench clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

venv: $(VENV)/.installed

demo: $(VENV)/.installed
	DEBUG=1 CELERY_TASK_ALWAYS_EAGER=1 $(PY) manage.py demo

test: $(VENV)/.installed
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) \
	SECRET_KEY=test-secret-key-not-for-production-0123456789 DEBUG=0 \
	$(PY) -m pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) var/demo.sqlite3
