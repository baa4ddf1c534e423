"""Chaos: three `serve` instances, one PostgreSQL the test crashes, a function that misbehaves.

Size knob: AIQUEUE_CHAOS_JOBS (default 150; CI runs the default, a large run
is e.g. AIQUEUE_CHAOS_JOBS=2000).  AIQUEUE_CHAOS_SEED picks the fault dice.

Faults: random 5xx, 429 + Retry-After, dispatch timeouts, slow acks, refused
connections (the function down for a while), `failed` callbacks, duplicated,
late, dropped, forged and wrong-row callbacks, heartbeating long jobs, lost
chain requests (one instance's APP_BASE_URL points at a dead port for most of
the run), `kill -9` of instances mid-run, a crash-restart of PostgreSQL, an
assignment cancelled mid-run and enqueues repeated across instances.
Callbacks go to the dispatching instance; when it refuses the connection the
function retries on another one, as behind the load balancer of a deployment.

Invariants at the end: every row `completed`, `failed` or `cancelled`; none
`processing`; every submission has one row; no result applied twice (a
trigger in this test database counts every write of `submissions.ai_result`,
and the attempt history counts completions); attempts <= QUEUE_MAX_ATTEMPTS;
the function never held more than the cap, nor did the database show more
rows `processing`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.db.migrate import migrate
from tests.conftest import SECRET, add_submissions
from tests.e2e.audit import AUDIT_SQL
from tests.e2e.cluster import PgCluster
from tests.e2e.servers import ROOT, AppProcess, Faults, FunctionHost, MarkingFunction, free_port

# Timed end to end: one after another on one worker, never two of them at once.
pytestmark = [pytest.mark.e2e, pytest.mark.chaos, pytest.mark.xdist_group("timed")]

JOBS = int(os.environ.get("AIQUEUE_CHAOS_JOBS", "150"))
SEED = int(os.environ.get("AIQUEUE_CHAOS_SEED", "20261122"))
CAP = 3
MAX_ATTEMPTS = 3
STUCK_AFTER = 3.0
DISPATCH_TIMEOUT = 1.0
AUTH = {"authorization": f"Bearer {SECRET}"}

FAULTS = Faults(
    http_500=0.05,
    busy_429=0.03,
    busy_retry_after="1",
    timeout=0.02,
    hang_seconds=DISPATCH_TIMEOUT + 0.5,
    slow_ack=0.10,
    slow_ack_seconds=(0.05, 0.4),
    failed_callback=0.06,
    duplicate_callback=0.08,
    late_callback=0.02,
    late_seconds=(STUCK_AFTER + 0.5, STUCK_AFTER + 2.5),
    drop_callback=0.02,
    forged_callback=0.05,
    wrong_row_callback=0.05,
    long_work=0.01,
    long_work_seconds=STUCK_AFTER + 2.0,
    heartbeat_seconds=0.5,
    work_seconds=(0.005, 0.05),
    callback_tries=8,
    # Each kind at least once, spread over the first ~40% of the dispatches.
    at_least_once={name: 3 + int(JOBS * 0.4 * k / 11) for k, name in enumerate([
        "http_500", "busy_429", "timeout", "slow_ack", "long_work", "failed_callback",
        "drop_callback", "late_callback", "forged_callback", "wrong_row_callback",
        "duplicate_callback"])},
)


@dataclass
class Tally:
    """What the run did to the system, for the summary."""

    injected: Counter[str] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    max_db_processing: int = 0
    max_db_slots: int = 0
    enqueued: int = 0
    skipped: int = 0
    enqueue_retries: int = 0
    repeated_batches: int = 0
    started: float = field(default_factory=time.monotonic)

    def note(self, what: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.started:7.2f}s {what}")


class Chaos:
    """The system under test and the faults it suffers."""

    def __init__(self, cluster: PgCluster, dsn: str, host: FunctionHost) -> None:
        self.cluster, self.dsn, self.host = cluster, dsn, host
        self.tally = Tally()
        self.rng = random.Random(SEED)
        env = {
            "DATABASE_URL": dsn,
            "MARKING_QUEUE_SECRET": SECRET,
            "AI_MARKING_FUNCTION_URL": host.url,
            "QUEUE_MAX_IN_FLIGHT": str(CAP),
            "QUEUE_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
            "QUEUE_RETRY_BASE_SECONDS": "0.2",
            "QUEUE_RETRY_MAX_SECONDS": "2",
            "QUEUE_STUCK_AFTER_SECONDS": str(STUCK_AFTER),
            "QUEUE_DISPATCH_TIMEOUT_SECONDS": str(DISPATCH_TIMEOUT),
            "QUEUE_BREAKER_THRESHOLD": "5",
            "QUEUE_BREAKER_COOLDOWN_SECONDS": "1",
            "QUEUE_TICK_SECONDS": "0.5",
        }
        ports = [free_port() for _ in range(3)]
        self.dead_url = f"http://127.0.0.1:{free_port()}"
        self.apps = [
            AppProcess(env, ports[0]),
            # Every chain request of this instance is lost until `fix_chain`.
            AppProcess({**env, "AI_MARKING_CALLBACK_URL":
                        f"http://127.0.0.1:{ports[1]}/webhooks/ai-mark"},
                       ports[1], base_url=self.dead_url),
            AppProcess(env, ports[2]),
        ]

    # -- faults -----------------------------------------------------------

    def kill9(self, k: int) -> None:
        app = self.apps[k]
        app.kill()
        self.tally.crashes.append(f"kill -9 of instance {k} (port {app.port})")
        self.tally.injected["kill_9"] += 1
        self.tally.note(f"kill -9 instance {k}")
        time.sleep(0.5)
        app.start()
        self.tally.note(f"instance {k} back")

    def restart_postgres(self) -> None:
        self.tally.note("PostgreSQL crash (pg_ctl stop -m immediate)")
        self.cluster.restart(down_seconds=1.0)
        self.tally.crashes.append("PostgreSQL immediate stop + restart")
        self.tally.injected["postgres_restart"] += 1
        self.tally.note("PostgreSQL back")

    def function_outage(self) -> None:
        # Longer than the lease, so slots free up and dispatches meet the closed port.
        self.tally.note("function down (connections refused)")
        self.host.outage(4.0)
        self.tally.injected["function_outage_4s"] += 1
        self.tally.note("function back")

    def fix_chain(self) -> None:
        app = self.apps[1]
        app.stop()
        app.base_url = None
        app.start()
        self.tally.injected["graceful_restart"] += 1
        self.tally.note("instance 1 restarted with a live APP_BASE_URL")

    # -- driving ------------------------------------------------------------

    async def enqueue(self, client: httpx.AsyncClient, ids: list[Any], assignment: str) -> None:
        """Enqueue in batches to random instances, some batches twice; retry 5xx like a client.

        Every batch carries its Idempotency-Key, on its retries and its repeat
        alike, as a real client's would: a repeat that arrives after the
        batch's rows finished must not enqueue them again.
        """
        batches = [ids[i:i + 50] for i in range(0, len(ids), 50)]
        repeats = self.rng.sample(batches, k=max(1, len(batches) // 4))
        batches += repeats
        self.tally.repeated_batches += len(repeats)
        for batch in batches:
            # The key names the batch (its first submission), not its place in this call.
            headers = {**AUTH, "idempotency-key": f"chaos-{assignment}-{batch[0]}"}
            for _ in range(60):
                app = self.rng.choice(self.apps)
                try:
                    r = await client.post(f"{app.url}/api/marking/enqueue", headers=headers, json={
                        "assignment_id": assignment, "submission_ids": [str(i) for i in batch],
                        "payload": {"rubric": "chaos", "max_score": 10}})
                except httpx.HTTPError as exc:
                    r, last = None, type(exc).__name__
                else:
                    assert r is not None
                    last = f"{r.status_code} {r.text[:200]}"
                if r is not None and r.status_code == 202:
                    if assignment == "hw-chaos" and "idempotent-replayed" not in r.headers:
                        self.tally.enqueued += r.json()["enqueued"]
                        self.tally.skipped += r.json()["skipped"]
                    break
                self.tally.enqueue_retries += 1
                await asyncio.sleep(0.5)
            else:
                raise AssertionError(f"enqueue kept failing, last answer: {last}")

    async def cancel(self, client: httpx.AsyncClient, assignment: str) -> int:
        """Cancel the assignment's pending rows through the API (retried across restarts)."""
        url = f"{self.apps[0].url}/api/marking/assignments/{assignment}/cancel"
        for _ in range(20):
            try:
                r = await client.post(url, headers=AUTH)
            except httpx.HTTPError:
                await asyncio.sleep(0.5)
                continue
            if r.status_code == 200:
                return int(r.json()["cancelled"])
            await asyncio.sleep(0.5)
        raise AssertionError("cancel kept failing")


async def sample(dsn: str) -> tuple[int, int, int, int] | None:
    """(processing, live, finished, slots held) or None while the database is down."""
    try:
        conn = await asyncpg.connect(dsn, timeout=2)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        return None
    try:
        row = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE status = 'processing') AS processing,"
            " count(*) FILTER (WHERE status IN ('pending', 'processing')) AS live,"
            " count(*) FILTER (WHERE status IN ('completed', 'failed', 'cancelled')"
            "                  AND assignment_id = 'hw-chaos') AS done,"
            " (SELECT count(*) FROM ai_marking_claimed) AS slots"
            " FROM ai_marking_queue")
        assert row is not None
        return int(row["processing"]), int(row["live"]), int(row["done"]), int(row["slots"])
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return None
    finally:
        await conn.close()


async def drive(chaos: Chaos, schedule: list[tuple[float, Callable[[], None]]],
                total: int, timeout: float) -> bool:
    """Fire each fault once progress passes its mark; True once drained and quiet."""
    pending = list(schedule)
    running: asyncio.Task[None] | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Sample a few times a second; each sample is a fresh connection so a
        # database restart costs nothing but a gap.
        s = await sample(chaos.dsn)
        if s is not None:
            processing, live, done, slots = s
            chaos.tally.max_db_processing = max(chaos.tally.max_db_processing, processing)
            chaos.tally.max_db_slots = max(chaos.tally.max_db_slots, slots)
            if running is None or running.done():
                if running is not None:
                    running.result()
                    running = None
                if pending and done >= pending[0][0] * total:
                    _, fault = pending.pop(0)
                    running = asyncio.ensure_future(asyncio.to_thread(fault))
            if live == 0 and done >= total and not pending and running is None \
                    and chaos.host.function.idle:
                return True
        await asyncio.sleep(0.05)
    return False


def log_lines(apps: list[AppProcess]) -> tuple[list[dict[str, Any]], list[str]]:
    events, other = [], []
    for app in apps:
        for line in app.output().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                other.append(line)
    return events, other


async def check(conn: asyncpg.Connection, chaos: Chaos, fn: MarkingFunction,
                ids: list[Any]) -> dict[str, tuple[bool, str]]:
    """Every invariant as (held?, figures)."""
    out: dict[str, tuple[bool, str]] = {}
    statuses = dict(await conn.fetch(
        "SELECT status, count(*) FROM ai_marking_queue GROUP BY status"))
    out["every row completed, failed or cancelled"] = (
        set(statuses) <= {"completed", "failed", "cancelled"}, str(statuses))
    out["no row left processing"] = (statuses.get("processing", 0) == 0,
                                     f"processing={statuses.get('processing', 0)}")
    rows_per_sub = await conn.fetchval(
        "SELECT count(*) FROM (SELECT submission_id FROM ai_marking_queue"
        " WHERE assignment_id = 'hw-chaos' GROUP BY submission_id HAVING count(*) <> 1) x")
    chaos_rows = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE assignment_id = 'hw-chaos'")
    out["every submission enqueued exactly once"] = (
        rows_per_sub == 0 and chaos_rows == len(ids),
        f"rows={chaos_rows} enqueued={chaos.tally.enqueued} skipped={chaos.tally.skipped}")
    twice = await conn.fetch(
        "SELECT submission_id, count(*) AS n FROM chaos_applied GROUP BY submission_id"
        " HAVING count(*) > 1")
    out["no result applied twice (ai_result writes)"] = (
        not twice, f"submissions written >1 times: {len(twice)}")
    mismatched = await conn.fetchval("""
        SELECT count(*) FROM ai_marking_queue q
        LEFT JOIN (SELECT submission_id, count(*) AS n FROM chaos_applied
                   GROUP BY submission_id) a USING (submission_id)
        WHERE coalesce(a.n, 0) <> CASE WHEN q.status = 'completed' THEN 1 ELSE 0 END""")
    out["completed rows applied exactly once, others never"] = (
        mismatched == 0, f"rows whose writes do not match their status: {mismatched}")
    history = await conn.fetchval("""
        SELECT count(*) FROM ai_marking_queue q
        WHERE (SELECT count(*) FROM ai_marking_attempts a WHERE a.queue_id = q.queue_id
               AND a.outcome IN ('completed', 'completed_late'))
              <> CASE WHEN q.status = 'completed' THEN 1 ELSE 0 END""")
    late = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_attempts WHERE outcome = 'completed_late'")
    out["one completion in each row's history"] = (
        history == 0, f"rows with a wrong count: {history}; completed_late={late}")
    # Review records and the never-decreasing counters: once per applied result.
    completed, records, counted = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM ai_marking_queue WHERE status = 'completed'),"
        " (SELECT count(*) FROM ai_marking_results),"
        " (SELECT coalesce(sum(n), 0) FROM ai_marking_tally WHERE job = 'completed')")
    out["one review record and one counted completion per completed row"] = (
        completed == records == counted,
        f"completed={completed} records={records} counted={counted}")
    max_attempts = await conn.fetchval("SELECT max(attempts) FROM ai_marking_queue")
    out[f"attempts <= QUEUE_MAX_ATTEMPTS ({MAX_ATTEMPTS})"] = (
        max_attempts <= MAX_ATTEMPTS, f"max attempts={max_attempts}")
    out[f"function never held more than the cap ({CAP})"] = (
        fn.record.max_in_flight <= CAP and not fn.record.over_cap,
        f"max seen={fn.record.max_in_flight}; over cap: {fn.record.over_cap[:3]}")
    out["database never showed more than the cap processing (or slots held)"] = (
        chaos.tally.max_db_processing <= CAP and chaos.tally.max_db_slots <= CAP,
        f"max sampled: processing={chaos.tally.max_db_processing},"
        f" slots={chaos.tally.max_db_slots}")
    unmarked = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue q JOIN submissions s ON s.id = q.submission_id"
        " WHERE q.status = 'completed' AND s.ai_result IS NULL")
    out["every completed row has its result"] = (unmarked == 0, f"missing={unmarked}")
    alive = [a.proc is not None and a.proc.poll() is None for a in chaos.apps]
    out["no instance died on its own"] = (all(alive), f"alive={alive}")
    return out


async def test_chaos_nothing_lost_nothing_twice_never_over_the_cap(
        capsys: pytest.CaptureFixture[str]) -> None:
    cluster = await asyncio.to_thread(PgCluster)
    await asyncio.to_thread(cluster.start)
    fn = MarkingFunction(FAULTS, seed=SEED, cap=CAP)
    host = FunctionHost(fn, free_port())
    chaos: Chaos | None = None
    try:
        dsn = await cluster.create_database("chaos")
        await migrate(dsn, "up")
        conn = await asyncpg.connect(dsn)
        await conn.execute(AUDIT_SQL)
        ids = await add_submissions(conn, JOBS, "hw-chaos", content="chaos answer")
        doomed = await add_submissions(conn, max(10, JOBS // 10), "hw-cancel")
        await conn.close()

        host.up()
        chaos = c = Chaos(cluster, dsn, host)
        fn.failover = [f"{a.url}/webhooks/ai-mark" for a in c.apps]
        await asyncio.gather(*(asyncio.to_thread(a.start) for a in c.apps))
        c.tally.note("3 instances up")
        schedule: list[tuple[float, Callable[[], None]]] = [
            (0.15, lambda: c.kill9(0)),
            (0.35, c.restart_postgres),
            (0.50, c.function_outage),
            (0.65, lambda: c.kill9(2)),
            (0.80, c.fix_chain),
        ]
        async with httpx.AsyncClient(timeout=30) as client:
            half = len(ids) // 2
            await chaos.enqueue(client, ids[:half], "hw-chaos")
            await chaos.enqueue(client, doomed, "hw-cancel")
            cancelled = await chaos.cancel(client, "hw-cancel")
            chaos.tally.injected["cancelled_rows"] = cancelled
            # The rest arrives while the faults are already under way.
            late_enqueue = asyncio.ensure_future(_later(0.2, c, ids, lambda: c.enqueue(
                client, ids[half:], "hw-chaos")))
            drained = await drive(chaos, schedule, len(ids), timeout=90 + JOBS * 0.6)
            await late_enqueue
        chaos.tally.note(f"drained={drained}")
        # Late and duplicated callbacks still in the air must not change anything.
        await asyncio.to_thread(host.wait_idle, 10)
        await asyncio.sleep(1.0)
        conn = await asyncpg.connect(dsn)
        try:
            results = await check(conn, chaos, fn, ids)
            finals = dict(await conn.fetch(
                "SELECT status, count(*) FROM ai_marking_queue GROUP BY status"))
        finally:
            await conn.close()
        results["drained before the deadline"] = (drained, "")
        events, other = log_lines(chaos.apps)
        results["every log line is one JSON object"] = (
            not other, f"{len(events)} JSON lines, {len(other)} other")
        summary = _summary(chaos, fn, events, other, finals, results)
        with capsys.disabled():
            print(summary)
        (ROOT / "test-artifacts").mkdir(exist_ok=True)
        (ROOT / "test-artifacts" / f"chaos-{JOBS}.txt").write_text(summary)
        broken = [name for name, (ok, _) in results.items() if not ok]
        assert not broken, f"invariants broken: {broken}\n{summary}"
    finally:
        if chaos is not None:
            for app in chaos.apps:
                await asyncio.to_thread(app.stop)
        await asyncio.to_thread(host.close)
        await asyncio.to_thread(cluster.destroy)


async def _later(share: float, chaos: Chaos, ids: list[Any],
                 action: Callable[[], Awaitable[None]]) -> None:
    """Run `action` once a share of the first half is done."""
    while True:
        s = await sample(chaos.dsn)
        if s is not None and s[2] >= share * len(ids):
            break
        await asyncio.sleep(0.1)
    chaos.tally.note("second half enqueued")
    await action()


def _summary(chaos: Chaos, fn: MarkingFunction, events: list[dict[str, Any]], other: list[str],
             finals: dict[str, int], results: dict[str, tuple[bool, str]]) -> str:
    t = chaos.tally
    kinds = Counter(fn.record.faults) + t.injected
    chain_lost = sum(1 for e in events if e.get("event") == "chain" and e.get("chained") is False)
    kinds["chain_request_lost"] = chain_lost
    kinds["enqueue_batch_repeated"] = t.repeated_batches
    dispatch = Counter(str(e.get("outcome")) for e in events if e.get("event") == "dispatch")
    refusals = Counter(str(e.get("code")) for e in events
                       if e.get("event") == "dispatch" and e.get("outcome") == "failed")
    circuit = sum(1 for e in events if e.get("event") == "circuit")
    recovered = sum(int(e.get("recovered") or 0) for e in events
                    if e.get("event") == "housekeeping")
    errors = Counter(str(e.get("code")) for e in events if e.get("event") in (
        "error", "step_error", "tick_error"))
    webhook: Counter[str] = Counter()
    for e in events:
        if e.get("event") == "webhook":
            for k in ("accepted", "ignored", "rejected"):
                webhook[k] += int(e.get(k) or 0)
    lines = [
        "",
        f"=== chaos run: {JOBS} jobs (+{t.injected['cancelled_rows']} cancelled), seed {SEED},"
        f" cap {CAP}, {time.monotonic() - t.started:.1f}s ===",
        f"final rows: {dict(sorted(finals.items()))}",
        "faults injected: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items()) if v),
        f"crashes: {len(t.crashes)} — " + "; ".join(t.crashes),
        f"function: {fn.record.dispatches} dispatches received, max in flight"
        f" {fn.record.max_in_flight}, {fn.record.heartbeats} heartbeats, callback answers"
        f" {dict(sorted(fn.record.callback_status.items()))}",
        f"app: dispatch outcomes {dict(dispatch)} (failed: {dict(refusals)}),"
        f" circuit opened {circuit}x,"
        f" stuck rows recovered {recovered}, webhook items {dict(webhook)},"
        f" enqueue retries {t.enqueue_retries}",
        f"app errors by code: {dict(errors)}; non-JSON output lines: {len(other)}",
        "invariants:",
        *(f"  [{'ok' if ok else 'BROKEN'}] {name}  ({detail})"
          for name, (ok, detail) in results.items()),
        "timeline:",
        *(f"  {line}" for line in t.timeline),
    ]
    if other:
        lines += ["first non-JSON output lines:", *(f"  {x}" for x in other[:15])]
    return "\n".join(lines) + "\n"

