"""A throwaway PostgreSQL cluster the test owns, so it can stop and restart it mid-run.

Uses the binaries the pgserver wheel ships (initdb, pg_ctl).  Listens on a
loopback TCP port that stays the same across restarts, so the app's
DATABASE_URL keeps working.  As root, PostgreSQL runs as the `pgserver` user,
as pgserver itself does.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

from tests.e2e.servers import free_port


def _bin_dir() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


class PgCluster:
    """initdb once, then start / stop (crash-like) / restart at will."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="aiqueue-chaos-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.user: str | None = None
        self.restarts = 0
        self._initdb()

    @property
    def admin_dsn(self) -> str:
        return self.dsn("postgres")

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        kwargs: dict[str, Any] = {"user": self.user} if self.user else {}
        subprocess.run(
            [str(_bin_dir() / args[0]), *args[1:]], check=True, timeout=timeout,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs,
        )

    def _initdb(self) -> None:
        if os.geteuid() == 0:
            # PostgreSQL refuses to run as root; pgserver uses this user too.
            from pgserver.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

            self.user = "pgserver"
            entry = ensure_user_exists(self.user)
            assert entry is not None
            ensure_prefix_permissions(_bin_dir())
            read = stat.S_IRGRP | stat.S_IROTH
            ensure_folder_permissions(_bin_dir(), read | stat.S_IXGRP | stat.S_IXOTH)
            ensure_folder_permissions(_bin_dir().parent / "lib", read)
            ensure_prefix_permissions(self.dir)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--encoding=utf8")

    def start(self) -> None:
        # fsync off: a crash here is a process crash, never an OS crash, so the
        # page cache keeps every write; the test is about the app, not the disk.
        opts = (f"-h 127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
                "-c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-o", opts,
                  "-l", str(self.log), "start")

    def stop(self, mode: str = "immediate") -> None:
        """`immediate` is a crash: no checkpoint, every session cut, recovery on start."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-m", mode, "stop")

    def restart(self, down_seconds: float = 1.0) -> None:
        self.stop("immediate")
        time.sleep(down_seconds)
        self.start()
        self.restarts += 1

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.SubprocessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    async def create_database(self, name: str) -> str:
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            await conn.execute(f"CREATE DATABASE {name}")
        finally:
            await conn.close()
        return self.dsn(name)
