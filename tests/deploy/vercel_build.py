"""Vercel's own tools here: the pinned CLI, `vercel build`, the built functions served."""

from __future__ import annotations

import ctypes
import fcntl
import functools
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache"
CLI_VERSION = "60.1.3"  # 63 and 64 do not resolve from the registry here
CLI_DIR = CACHE / "vercel-cli"
UV_DIR = CACHE / "uv"
# Made up: `vercel build` reads them from .vercel/project.json and never asks Vercel.
PROJECT = {"projectId": "prj_aiqueue_ci", "orgId": "team_aiqueue_ci",
           "settings": {"framework": None}}
# Imports the runtime `vercel dev` serves with, from nothing but the function's own files:
# -I -S keep out the environment, user and system site-packages (and so any dev venv).
BOOT = """\
import site, sys
func, vendor = sys.argv[1], sys.argv[1] + "/_vendor"
sys.path.insert(0, func)
site.addsitedir(vendor)  # runs the bundle's .pth files, as the built handler does
sys.path.remove(vendor)
sys.path.insert(1, vendor)
import vercel_runtime.dev
vercel_runtime.dev.main()
"""


@functools.cache
def python312() -> str | None:
    """An installed CPython 3.12, the version Vercel runs (uv cannot download one here)."""
    home = Path.home()
    candidates = [*sorted(glob.glob(str(home / ".pyenv/versions/3.12*/bin/python3.12"))),
                  "/usr/bin/python3.12", "/usr/local/bin/python3.12", shutil.which("python3.12")]
    for path in candidates:
        found = _is_python312(path)
        if found:
            return found
    return None


def uv_python312() -> str | None:
    """A 3.12 from uv (where it may download one: CI elsewhere), or None."""
    uv = str(uv_bin() / "uv")
    subprocess.run([uv, "python", "install", "3.12"], capture_output=True, timeout=600)
    probe = subprocess.run([uv, "python", "find", "--system", "3.12"], capture_output=True,
                           text=True, timeout=60)
    return _is_python312(probe.stdout.strip()) if probe.returncode == 0 else None


def _is_python312(path: str | None) -> str | None:
    """The interpreter behind `path` (not a shim that picks one by configuration) if 3.12."""
    if not path or not os.access(path, os.X_OK):
        return None
    code = "import sys; print(sys.version_info[:2] == (3, 12), sys.executable)"
    probe = subprocess.run([path, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    ok, _, executable = probe.stdout.strip().partition(" ")
    return executable if probe.returncode == 0 and ok == "True" else None


@contextmanager
def _locked(name: str) -> Iterator[None]:
    """One installer at a time across concurrent test runs on this machine."""
    CACHE.mkdir(exist_ok=True)
    with (CACHE / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def vercel_cli() -> Path:
    """The pinned Vercel CLI, installed from npm into .cache/ once per machine."""
    binary = CLI_DIR / "node_modules" / ".bin" / "vercel"
    manifest = CLI_DIR / "node_modules" / "vercel" / "package.json"
    with _locked("vercel-cli"):
        if not manifest.exists() or json.loads(manifest.read_text())["version"] != CLI_VERSION:
            subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
                 "--prefix", str(CLI_DIR), f"vercel@{CLI_VERSION}"],
                check=True, capture_output=True, timeout=600)
    return binary


def uv_bin() -> Path:
    """A `uv` from PyPI in .cache/uv (the builder installs the bundle's packages with it)."""
    binary = UV_DIR / "bin" / "uv"
    with _locked("uv"):
        if not binary.exists():
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target",
                            str(UV_DIR), "uv>=0.5"], check=True, capture_output=True, timeout=600)
    return binary.parent


def copy_checkout(dest: Path) -> None:
    """The files a git deploy would upload: tracked and untracked-but-not-ignored."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def build(project: Path, python: str) -> Path:
    """`vercel build` in a copy of the checkout, offline from Vercel; returns the output dir."""
    copy_checkout(project)
    (project / ".vercel").mkdir()
    (project / ".vercel" / "project.json").write_text(json.dumps(PROJECT))
    env = {**os.environ, "VERCEL_TELEMETRY_DISABLED": "1", "UV_PYTHON_DOWNLOADS": "never",
           "PATH": os.pathsep.join([str(uv_bin()), str(Path(python).parent),
                                    os.environ.get("PATH", "")])}
    for name in ("VERCEL", "VERCEL_TOKEN", "VERCEL_ORG_ID", "VERCEL_PROJECT_ID"):
        env.pop(name, None)
    done = subprocess.run([str(vercel_cli()), "build", "--yes"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"vercel build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return project / ".vercel" / "output"


def functions(output: Path) -> dict[str, Path]:
    """Entry file (`api/enqueue.py`) → its built `.func` directory."""
    found = {}
    for func in (output / "functions").rglob("*.func"):
        entry = str(func.relative_to(output / "functions"))[: -len(".func")] + ".py"
        found[entry] = func
    return found


def materialize(func: Path, project: Path, dest: Path) -> Path:
    """The function as Vercel ships it: exactly the files its filePathMap lists, nothing else."""
    config = json.loads((func / ".vc-config.json").read_text())
    for inside, source in config["filePathMap"].items():
        target = dest / inside
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(project / source, target)  # a hard link: __file__ stays inside dest
        except OSError:
            shutil.copy2(project / source, target)
    shutil.copy2(func / "vc__handler__python.py", dest / "vc__handler__python.py")
    return dest


def _die_with_parent() -> None:
    """In the child: SIGTERM when the test process dies, even killed before its teardown."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG (Linux)


class FunctionServer:
    """One built function served by its bundled `vercel_runtime.dev`, as `vercel dev` does."""

    def __init__(self, python: str, func_dir: Path, entry: str, port: int,
                 env: dict[str, str], log: Path) -> None:
        self.python, self.func_dir, self.entry, self.port = python, func_dir, entry, port
        self.env, self.log = env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        module = self.entry[: -len(".py")].replace("/", ".")
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.func_dir), "LANG": "C.UTF-8",
               "NO_COLOR": "1", "PORT": str(self.port), "VERCEL_DEV_MODULE_NAME": module,
               "VERCEL_DEV_ENTRY_ABS": str(self.func_dir / self.entry),
               "VERCEL_DEV_FRAMEWORK": "asgi", "VERCEL_DEV_VARIABLE_NAME": "app", **self.env}
        self.proc = subprocess.Popen(
            [self.python, "-I", "-S", "-c", BOOT, str(self.func_dir)], cwd=self.func_dir,
            env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent)

    def wait_listening(self, timeout: float = 90) -> None:
        """Until the port answers HTTP (any status), or the process has died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.entry} exited:\n{self.output()[-3000:]}")
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/_vercel/ping", timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(f"{self.entry} did not listen:\n{self.output()[-3000:]}")

    def pids(self) -> list[int]:
        """This server and its children (uvicorn's reloader runs the app in a child)."""
        assert self.proc is not None
        group = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid:  # the process group id
                group.append(int(stat.split("/")[2]))
        return group

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
