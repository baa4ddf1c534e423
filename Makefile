# The targets the README and CI run.
PY ?= python3

.PHONY: dev test lint bench
dev:
	$(PY) scripts/dev.py
test:
	$(PY) scripts/test.py -q
lint:
	.venv/bin/ruff check . && .venv/bin/mypy
bench:
	.venv/bin/python -m bench
