"""Create .venv and install the project's requirements into it (stdlib only)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def ensure_venv(requirements: str = "requirements-dev.txt") -> Path:
    """A venv with the requirements installed; re-installs only when they change."""
    if sys.version_info < (3, 11):  # noqa: UP036 - run by any python3, before the venv exists
        sys.exit("aiqueue needs Python 3.11 or newer")
    if not PYTHON.exists():
        print("creating .venv ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    req = ROOT / requirements
    digest = hashlib.sha256(req.read_bytes() + (ROOT / "requirements.txt").read_bytes()).hexdigest()
    stamp = VENV / f".installed-{req.stem}"
    if not stamp.exists() or stamp.read_text() != digest:
        print(f"installing {requirements} ...", flush=True)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "-q", "-r", str(req)], check=True)
        stamp.write_text(digest)
    return PYTHON


def exec_in_venv(args: list[str]) -> None:
    """Replace this process with the venv's Python running `args`."""
    python = ensure_venv()
    os.chdir(ROOT)
    os.execv(str(python), [str(python), *args])
