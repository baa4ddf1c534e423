"""Shared benchmark plumbing: an embedded server, fresh databases, child processes, tables."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx

from aiqueue.db.embedded import recreate_database, start_embedded
from aiqueue.db.migrate import migrate

ROOT = Path(__file__).resolve().parent.parent
_server: Any = None


def admin_dsn() -> str:
    global _server
    url = os.environ.get("BENCH_DATABASE_URL")
    if url:
        return url
    dsn, _server = start_embedded(Path(f"/tmp/aiqueue-bench-pg-{os.getuid()}"))
    return str(dsn)


# shared_buffers of a district's server (docs/performance.md#a-year-of-a-district): a
# quarter (PostgreSQL's usual start) of the 8 GB of a plan with two dedicated cores like
# this VM's (Supabase's Large compute; Neon at 2 CU); it holds the claim's working set at
# 1,000,000 pending rows (about 0.6 GB) and leaves room for the pages' reads.
DISTRICT_SHARED_BUFFERS = "2GB"


def _others_use(server: Any) -> bool:
    """Whether a live process other than this one holds a handle on the embedded server
    (pgserver keeps their pids beside its data; a killed one stays listed)."""
    listed = server.pgdata / ".handle_pids.json"
    pids = json.loads(listed.read_text()) if listed.exists() else []
    return any(pid != os.getpid() and Path(f"/proc/{pid}").exists() for pid in pids)


async def district_buffers(admin: str, size: str = DISTRICT_SHARED_BUFFERS) -> str:
    """The shared_buffers of the server at `admin`, first made `size` when it is smaller and
    the server is this process's embedded one with nobody else on it: ALTER SYSTEM, a
    restart, and the setting reset at once (in force until the server's next start, which
    is back to the default for every other bench).  Otherwise the server is left alone."""
    import asyncpg

    conn = await asyncpg.connect(admin)
    try:
        small = await conn.fetchval("SELECT pg_size_bytes(current_setting('shared_buffers')) "
                                    "< pg_size_bytes($1)", size)
        busy = await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                                   "'client backend' AND pid <> pg_backend_pid()")
        own = _server is not None and str(_server.get_uri()) == admin
        if not small or not own or busy or _others_use(_server):
            return str(await conn.fetchval("SELECT current_setting('shared_buffers')"))
        await conn.execute(f"ALTER SYSTEM SET shared_buffers = '{size}'")
    finally:
        await conn.close()
    from pgserver._commands import POSTGRES_BIN_PATH

    try:
        subprocess.run([str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(_server.pgdata), "-w",
                        "-m", "fast", "-l", str(_server.log), "restart"],
                       user=_server.system_user, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True, timeout=120)
    finally:
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute("ALTER SYSTEM RESET shared_buffers")
            size = str(await conn.fetchval("SELECT current_setting('shared_buffers')"))
        finally:
            await conn.close()
    return size


async def fresh_database(name: str) -> str:
    dsn = await recreate_database(admin_dsn(), name)
    await migrate(dsn, "up")
    return dsn


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free loopback port, never one this process handed out before: the kernel may
    offer a port again before the server it was meant for has bound it, and two servers
    of one run on one port answer each other's requests."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def spawn(args: Sequence[str], env: dict[str, str] | None = None,
          log: Path | None = None) -> subprocess.Popen[bytes]:
    out = log.open("wb") if log else subprocess.DEVNULL
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=out, stderr=subprocess.STDOUT)


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU time every process of the machine has used (user, nice, system, interrupts,
    steal), from /proc/stat: on a machine that runs nothing else, the whole cost of a run
    (the app, the database, the function, the bench's own polls)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def middle(values: Iterable[float]) -> float:
    """The bench's base figure of repeated runs: their median, as the tables print it (of
    an even count, the mean of the two middle ones), so that "vs base" divides a median
    by a median."""
    return statistics.median(values)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def summarize(samples: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(samples), min(samples), max(samples)


Row = tuple[str, str, Sequence[float], float | None, str]
_HEADER = f"{'metric':<52} {'median':>10} {'min':>10} {'max':>10} {'vs base':>9}  target"


def _line(row: Row) -> str:
    name, unit, samples, base, target = row
    med, lo, hi = summarize(samples)
    ratio = f"{med / base:8.2f}x" if base else "        -"
    label = f"{name} ({unit})"
    return f"{label:<52} {med:>10.3f} {lo:>10.3f} {hi:>10.3f} {ratio}  {target}"


class Table(list[Row]):
    """Rows of (metric, unit, samples, baseline or None, target), each printed as it arrives."""

    def append(self, row: Row) -> None:
        if not self:
            print(_HEADER, flush=True)
            print("-" * len(_HEADER), flush=True)
        print(_line(row), flush=True)
        super().append(row)


def print_table(rows: Sequence[Row]) -> None:
    """The whole table again, once everything is measured."""
    print(_HEADER)
    print("-" * len(_HEADER))
    for row in rows:
        print(_line(row))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# A seed that loads the record with its triggers off (fast, and the rows are made
# consistent by hand) gives its pending rows their ready rows as the record's
# insert trigger would (aiqueue/db/sql/functions/35_ready.sql).  The upgrade
# bench seeds a schema from before the ready table (0067): nothing to do there.
READY_ROWS = """
DO $$ BEGIN
IF to_regclass('ai_marking_ready') IS NOT NULL THEN
    INSERT INTO ai_marking_ready (queue_id, pool, priority, grp, kind, turn, seq, run_after,
                                  lane, not_before, expires_at, leader_id, run_kind)
    SELECT queue_id, pool, priority, coalesce(group_key, assignment_id), kind, turn, seq,
           run_after, lane, not_before, expires_at, leader_id, run_kind
    FROM ai_marking_queue WHERE status = 'pending'
    ON CONFLICT (queue_id) DO NOTHING;
END IF;
END $$
"""
