"""A real PgBouncer in transaction mode in front of the test PostgreSQL (Debian `pgbouncer`).

Missing locally → the test is skipped with the reason; with
AIQUEUE_REQUIRE_PGBOUNCER=1 (CI) a missing PgBouncer fails instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

import pytest

from tests.e2e.servers import free_port


def pgbouncer_binary() -> str:
    """The pgbouncer executable, or skip (fail under AIQUEUE_REQUIRE_PGBOUNCER=1)."""
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None)
    if found:
        return found
    reason = "pgbouncer is not installed (apt-get install -y pgbouncer)"
    if os.environ.get("AIQUEUE_REQUIRE_PGBOUNCER") == "1":
        pytest.fail(f"{reason}, and AIQUEUE_REQUIRE_PGBOUNCER=1")
    pytest.skip(reason)


class PgBouncer:
    """Started on a free loopback port; `dsn(db)` goes through it."""

    def __init__(self, server_dsn: str, *, address: str = "127.0.0.1", port: int | None = None,
                 settings: str = "") -> None:
        """`address` and `port`: where it listens (default: a free loopback port);
        `settings`: more lines for its [pgbouncer] section."""
        parts = urlsplit(server_dsn)
        host = parse_qs(parts.query).get("host", [parts.hostname or "127.0.0.1"])[0]
        self.user = parts.username or "postgres"
        self.address = address
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="aiqueue-pgbouncer-"))
        self.log = self.dir / "pgbouncer.log"
        (self.dir / "userlist.txt").write_text(f'"{self.user}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(f"""\
[databases]
* = host={host} port={parts.port or 5432} user={self.user}

[pgbouncer]
listen_addr = {address}
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir}/userlist.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 10
logfile = {self.log}
{settings}""")
        self.args = [pgbouncer_binary(), str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root; run it as the owner of the server's
            # socket directory (pgserver's user), who can also reach the socket.
            owner = Path(host).stat().st_uid if host.startswith("/") else 65534
            shutil.chown(self.dir, user=owner)
            for f in self.dir.iterdir():
                shutil.chown(f, user=owner)
            self.args[1:1] = ["-u", str(_user_name(owner))]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self.log_text()[-2000:]}")
            try:
                socket.create_connection((self.address, self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("pgbouncer did not start listening")

    def dsn(self, database: str) -> str:
        return urlunsplit(("postgresql", f"{self.user}@{self.address}:{self.port}", f"/{database}",
                           "", ""))

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def _user_name(uid: int) -> str:
    import pwd

    return pwd.getpwuid(uid).pw_name
