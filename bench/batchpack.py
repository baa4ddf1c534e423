"""A 20,000-row pack of the overnight lane beside live marking (docs/overnight.md: "bounded").

One fresh database with 20,000 batch-lane rows and live rows. A child process
marks live rows at in-flight 1 (claim, then complete, as fast as it can) and
notes when each dispatch was claimed. Meanwhile this process runs the app's
lane steps (`aiqueue.queue.overnight.run`, each bounded to LANE_SECONDS) against
the OpenAI batch emulator and the reference function on loopback, until every
batch-lane row is packed.

Figures: each lane step's wall time, the steps the pack took, and the live
dispatch gap (time between two claims) p99 while a lane step runs and while none
does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import asyncpg

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from aiqueue.queue.overnight import LANE_SECONDS, lane_config, run
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import DEFAULT_POOL
from bench.batchlane import ANSWER, PAYLOAD
from bench.common import percentile, spawn
from tests.batchapi.common import Clock
from tests.integration.batch_kit import lane_settings, served
from tests.plans import plan_of

BATCH_ROWS, LIVE_ROWS = 20_000, 40_000
ENQUEUE_ROWS = 2000
QUIET_SECONDS = 3.0  # live marking alone, before and after the pack


@dataclass(frozen=True)
class PackRun:
    steps: int
    packed: int
    step_seconds: list[float]
    gap_p99_during_ms: float
    gap_p99_quiet_ms: float
    live_marked: int


async def _seed(conn: asyncpg.Connection, n: int, assignment: str) -> list[UUID]:
    rows = await conn.fetch(
        "INSERT INTO submissions (id, assignment_id, content) "
        "SELECT gen_random_uuid(), $3, $2 || g FROM generate_series(1, $1) g "
        "RETURNING id", n, ANSWER, assignment)
    return [r["id"] for r in rows]


async def run_pack(dsn: str, rows: int = BATCH_ROWS, chunk: int | None = None) -> PackRun:
    """`chunk`: rows packing takes at a time (None: the lane's own)."""
    conn = await asyncpg.connect(dsn)
    with served("openai", Clock(), {}) as (emu, emu_url, fn_url):
        settings = lane_settings("openai", dsn, emu, emu_url, fn_url, max_in_flight=1,
                                 dispatch_timeout_seconds=30.0)
        rt = await Runtime.create(settings, dsn)
        due = datetime.now(UTC) + timedelta(hours=24)
        night, live = await _seed(conn, rows, "hw-night"), await _seed(conn, LIVE_ROWS, "hw-live")
        for at in range(0, max(rows, LIVE_ROWS), ENQUEUE_ROWS):  # as a client would, in parts
            if at < rows:
                await rt.store.enqueue(night[at:at + ENQUEUE_ROWS], "hw-night", 0, PAYLOAD,
                                       batch=(due, due - timedelta(hours=1)))
            await rt.store.enqueue(live[at:at + ENQUEUE_ROWS], "hw-live", 0, PAYLOAD)
        config = lane_config(rt, settings.queue.pools[DEFAULT_POOL])
        if chunk is not None:
            config = dataclasses.replace(config, render_rows=chunk)
        with tempfile.TemporaryDirectory() as tmp:
            out, stop = Path(tmp) / "claims.json", Path(tmp) / "stop"
            child = spawn(["-m", "bench.batchpack", dsn, str(out), str(stop)])
            windows: list[tuple[float, float]] = []
            packed = 0
            try:
                await asyncio.sleep(QUIET_SECONDS)
                while packed < rows and len(windows) < 20:
                    start = time.time()
                    report = await run(rt, config, until=time.monotonic() + LANE_SECONDS)
                    windows.append((start, time.time()))
                    packed += report.packed
                await asyncio.sleep(QUIET_SECONDS)
            finally:
                stop.touch()
                child.wait(timeout=60)
                await rt.close()
                await conn.close()
            claims: list[float] = json.loads(out.read_text())
    during, quiet = _gaps(claims, windows)
    return PackRun(steps=len(windows), packed=packed,
                   step_seconds=[b - a for a, b in windows],
                   gap_p99_during_ms=percentile(during, 0.99) * 1000,
                   gap_p99_quiet_ms=percentile(quiet, 0.99) * 1000, live_marked=len(claims))


def _gaps(claims: list[float], windows: list[tuple[float, float]]
          ) -> tuple[list[float], list[float]]:
    """The gaps between two claims that overlap a lane step, and the others."""
    during: list[float] = []
    quiet: list[float] = []
    for a, b in zip(claims, claims[1:], strict=False):
        overlaps = any(a < end and b > start for start, end in windows)
        (during if overlaps else quiet).append(b - a)
    return during, quiet


async def _mark_live(dsn: str, out: Path, stop: Path) -> None:
    """The child: claim and complete live rows at in-flight 1 until told to stop."""
    store = Store(await connect_pool(dsn, max_size=2))
    claims: list[float] = []
    try:
        while not stop.exists():
            job = await store.claim(plan_of(1, 5))
            if job is None:
                await asyncio.sleep(0.001)
                continue
            claims.append(time.time())
            await store.complete(Completed(job.queue_id, job.dispatch_seq,
                                           {"score": 5, "max_score": 10},
                                           {"prompt_tokens": 300, "completion_tokens": 40}),
                                 plan_of(1, 5))
    finally:
        out.write_text(json.dumps(claims))
        await store.close()


if __name__ == "__main__":
    asyncio.run(_mark_live(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])))
