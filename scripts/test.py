"""Run every test (unit, integration, e2e, browser) in the project's venv."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _venv import exec_in_venv  # noqa: E402

exec_in_venv(["-m", "pytest", *(sys.argv[1:] or ["-q"])])
