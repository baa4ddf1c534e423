"""Lint in the project's venv: ruff, mypy (strict) and the import-linter layer contracts."""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _venv import BIN, ROOT, ensure_venv  # noqa: E402

ensure_venv()
failed = False
for tool in (["ruff", "check", "."], ["mypy"], ["lint-imports"]):
    print(f"$ {' '.join(tool)}", flush=True)
    failed |= subprocess.run([str(BIN / tool[0]), *tool[1:]], cwd=ROOT).returncode != 0
sys.exit(1 if failed else 0)
