# The targets the README and CI run.
PY ?= python3

.PHONY: dev test lint bench
dev:
	$(PY) scripts/dev.py
test:
	$(PY) scripts/test.py -q
lint:
	$(PY) scripts/lint.py
bench:
	.venv/bin/python -m bench
