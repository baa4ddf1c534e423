"""Run every test (unit, integration, e2e, browser) in the project's venv."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _venv import exec_in_venv  # noqa: E402

# Two worker processes (pytest-xdist); a group of tests (xdist_group) stays on one.
# Given after these, `-n 0` runs in one process.
PARALLEL = ["-n", "2", "--dist", "loadgroup"]
exec_in_venv(["-m", "pytest", *PARALLEL, *(sys.argv[1:] or ["-q"])])
