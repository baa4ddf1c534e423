"""`python -m aiqueue doctor` run as a user runs it, its report by check name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.e2e.servers import ROOT


def doctor(env: dict[str, str], probe_timeout: float = 20) -> tuple[int, dict[str, Any], str]:
    """Run the CLI twice over (JSON and text); (exit code, report, text)."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "AI_MARKING_", "DO_FUNCTIONS_", "VERCEL"))}
    full.update(env)
    args = [sys.executable, "-m", "aiqueue", "doctor", "--probe-timeout", str(probe_timeout)]
    as_json = subprocess.run([*args, "--json"], cwd=ROOT, env=full, capture_output=True,
                             text=True, timeout=120)
    as_text = subprocess.run(args, cwd=ROOT, env=full, capture_output=True, text=True,
                             timeout=120)
    assert as_json.returncode == as_text.returncode, as_text.stdout + as_text.stderr
    return as_json.returncode, json.loads(as_json.stdout), as_text.stdout


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"]}
