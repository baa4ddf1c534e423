"""Run aiqueue locally: venv, embedded PostgreSQL, demo data, app, function, ticker."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _venv import exec_in_venv  # noqa: E402

exec_in_venv(["-m", "aiqueue", "dev", *sys.argv[1:]])
