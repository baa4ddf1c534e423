"""Real servers on loopback for end-to-end tests: `aiqueue serve` and a marking function."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Faults:
    """Fault mix of the test function; each a probability per dispatch (or per callback)."""

    http_500: float = 0.0
    busy_429: float = 0.0
    failed_callback: float = 0.0
    duplicate_callback: float = 0.0
    forged_callback: float = 0.0
    drop_callback: float = 0.0
    slow_ack: float = 0.0
    work_seconds: tuple[float, float] = (0.0, 0.005)
    # Hang past the app's dispatch timeout; the request is abandoned, no work is done.
    timeout: float = 0.0
    hang_seconds: float = 1.5
    busy_retry_after: str = "0"
    slow_ack_seconds: tuple[float, float] = (0.05, 0.05)
    # A callback carrying this job's token but another row's queue_id.
    wrong_row_callback: float = 0.0
    # The result is ready (the model is free) but its delivery is delayed, e.g.
    # past the lease, so it arrives after the row was recovered and re-dispatched.
    late_callback: float = 0.0
    late_seconds: tuple[float, float] = (0.0, 0.0)
    # Work longer than the lease, kept alive by `progress` heartbeats.
    long_work: float = 0.0
    long_work_seconds: float = 0.0
    heartbeat_seconds: float = 0.5
    # Feedback and error texts quote the student's answer (the no-content test).
    quote_content: bool = False
    callback_tries: int = 5
    # Fault name -> dispatch count after which it fires once for sure, so that a
    # small run still sees every kind.
    at_least_once: dict[str, int] = field(default_factory=dict)
    # Every job's first n attempts end in a `failed` callback (retries are then due later).
    fail_first_attempts: int = 0
    # The `error` of failed callbacks, e.g. "{content}" to quote the answer verbatim.
    error_template: str | None = None


@dataclass
class FunctionRecord:
    """What the test function saw."""

    in_flight: int = 0
    max_in_flight: int = 0
    dispatches: int = 0
    callbacks: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    seen_queue_ids: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)
    callback_status: Counter[int] = field(default_factory=Counter)
    heartbeats: int = 0
    over_cap: list[str] = field(default_factory=list)


class MarkingFunction:
    """An async marking function: acks 202, works, then POSTs the callback."""

    def __init__(self, faults: Faults | None = None, seed: int = 7, cap: int | None = None) -> None:
        self.faults = faults or Faults()
        self.record = FunctionRecord()
        self.rng = random.Random(seed)
        self.cap = cap
        self.tasks: set[asyncio.Task[None]] = set()
        self.client: httpx.AsyncClient | None = None
        self.forced: set[str] = set()
        # Webhook URLs of every instance: like a load balancer, a callback whose
        # instance refuses the connection is retried on another one.
        self.failover: list[str] = []
        self.lb = random.Random(seed + 1)
        self.app = Starlette(routes=[Route("/mark", self.mark, methods=["POST"])])

    def roll(self, name: str) -> bool:
        hit: bool = self.rng.random() < getattr(self.faults, name)
        due = self.faults.at_least_once.get(name)
        if due is not None and name not in self.forced and self.record.dispatches >= due:
            self.forced.add(name)
            hit = True
        if hit:
            self.record.faults[name] += 1
        return hit

    @property
    def idle(self) -> bool:
        """No work or callback delivery left in the function."""
        return not self.tasks

    async def mark(self, request: Request) -> Response:
        job = await request.json()
        if job.get("probe") is True:
            return self.probe(job)
        rec = self.record
        rec.dispatches += 1
        if self.roll("http_500"):
            error = f"cannot mark: {job['submission']['content']}" if self.faults.quote_content \
                else "boom"
            return JSONResponse({"error": error}, status_code=500)
        if self.roll("busy_429"):
            return JSONResponse({"error": "busy"}, status_code=429,
                                headers={"retry-after": self.faults.busy_retry_after})
        if self.roll("timeout"):
            # The caller gives up first; this dispatch never becomes work.
            await asyncio.sleep(self.faults.hang_seconds)
            return JSONResponse({"error": "too late"}, status_code=504)
        qid = job["queue_id"]
        rec.seen_queue_ids.add(qid)
        rec.in_flight += 1
        rec.held.add(qid)
        rec.max_in_flight = max(rec.max_in_flight, rec.in_flight)
        if self.cap and rec.in_flight > self.cap:
            rec.over_cap.append(f"{qid} attempt {job['attempt']} with {sorted(rec.held)}")
        task = asyncio.create_task(self.work(job))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        if self.roll("slow_ack"):
            await asyncio.sleep(self.rng.uniform(*self.faults.slow_ack_seconds))
        return JSONResponse({"accepted": True}, status_code=202)

    def probe(self, job: dict[str, Any]) -> Response:
        """The doctor's probe: call back a `probe` item, mark nothing (docs/operating/doctor.md)."""
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=10)
        item = {"queue_id": job["queue_id"], "token": job["callback_token"], "status": "probe"}
        task = asyncio.create_task(self.post(job["callback_url"], [item]))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return JSONResponse({"accepted": True, "probe": True}, status_code=202)

    async def work(self, job: dict[str, Any]) -> None:
        f = self.faults
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=10)
        token = {"queue_id": job["queue_id"], "token": job["callback_token"]}
        content = job["submission"]["content"]
        if self.roll("long_work"):
            steps = max(1, int(f.long_work_seconds / f.heartbeat_seconds))
            for k in range(steps):
                await asyncio.sleep(f.heartbeat_seconds)
                self.record.heartbeats += 1
                await self.post(job["callback_url"], quick=True, items=[{
                    **token, "status": "progress",
                    "progress": {"current": k + 1, "total": steps, "message":
                                 f"reading {content[:40]}" if f.quote_content else "working"}}])
        else:
            await asyncio.sleep(self.rng.uniform(*f.work_seconds))
        item: dict[str, Any] = dict(token)
        if job["attempt"] <= f.fail_first_attempts or self.roll("failed_callback"):
            error = f.error_template.format(content=content) if f.error_template else \
                f"model choked on: {content}" if f.quote_content else "model_timeout"
            item |= {"status": "failed", "error": error}
        else:
            feedback = f"You wrote '{content}'. Good effort." if f.quote_content else "ok"
            item |= {"status": "completed",
                     "result": {"score": len(content) % 10, "max_score": 10,
                                "feedback": feedback},
                     "usage": {"model": "test", "prompt_tokens": 10, "completion_tokens": 5}}
        # The model is free once the result exists: release the slot before posting.
        self.record.in_flight -= 1
        self.record.held.discard(job["queue_id"])
        if self.roll("drop_callback"):
            return
        if self.roll("late_callback"):
            await asyncio.sleep(self.rng.uniform(*f.late_seconds))
        if self.roll("forged_callback"):
            forged = {**item, "token": item["token"][:-4] + "AAAA"}
            await self.post(job["callback_url"], [forged])
        others = self.record.seen_queue_ids - {job["queue_id"]}
        if others and self.roll("wrong_row_callback"):
            other = self.rng.choice(sorted(others))
            await self.post(job["callback_url"], [{**item, "queue_id": other}])
        await self.post(job["callback_url"], [item])
        if self.roll("duplicate_callback"):
            await self.post(job["callback_url"], [item])

    async def post(self, url: str, items: list[dict[str, Any]], quick: bool = False) -> None:
        """Deliver like a real function: retry network errors, 429 and 5xx with backoff.

        `quick`: a heartbeat, worth little once late, so its retries come fast.
        """
        assert self.client is not None
        for k in range(self.faults.callback_tries):
            try:
                response = await self.client.post(url, json=items)
            except httpx.HTTPError:
                response = None
                if self.failover:
                    url = self.lb.choice(self.failover)
            if response is not None:
                self.record.callback_status[response.status_code] += 1
                if response.status_code < 500 and response.status_code != 429:
                    self.record.callbacks += 1
                    return
            await asyncio.sleep(min(0.05 * 2 ** k, 0.3) if quick else min(0.2 * 2 ** k, 2.0))


class FunctionHost:
    """Serves a MarkingFunction from an event loop that outlives the server.

    `down()` closes the listening socket (connections are refused) while work
    and callback deliveries already under way carry on; `up()` serves again.
    """

    def __init__(self, function: MarkingFunction, port: int) -> None:
        self.function, self.port = function, port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: uvicorn.Server | None = None
        self.serving: Any = None
        self.outages = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mark"

    def up(self) -> None:
        config = uvicorn.Config(self.function.app, host="127.0.0.1", port=self.port,
                                log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.serving = asyncio.run_coroutine_threadsafe(self.server.serve(), self.loop)
        deadline = time.time() + 10
        while not self.server.started:
            if self.serving.done():
                self.serving.result()
            if time.time() > deadline:
                raise RuntimeError("function server did not start")
            time.sleep(0.02)

    def down(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.serving.result(timeout=30)
            self.server = None

    def outage(self, seconds: float) -> None:
        """Refuse connections for a while."""
        self.down()
        self.outages += 1
        time.sleep(seconds)
        self.up()

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.function.idle:
                return True
            time.sleep(0.1)
        return False

    def close(self) -> None:
        self.down()

        async def _cancel() -> None:
            for task in list(self.function.tasks):
                task.cancel()
            if self.function.client is not None:
                await self.function.client.aclose()

        asyncio.run_coroutine_threadsafe(_cancel(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@contextmanager
def run_asgi(app: Any, port: int) -> Iterator[None]:
    """Serve an ASGI app on loopback in a background thread."""
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        if time.time() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class AppProcess:
    """`python -m aiqueue serve` as a child process."""

    def __init__(self, env: dict[str, str], port: int, base_url: str | None = None) -> None:
        self.env, self.port = env, port
        # APP_BASE_URL (what the chain calls); defaults to this process's own URL.
        self.base_url = base_url
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = ROOT / "test-artifacts" / f"serve-{port}.log"
        self.log_offset = self.log.stat().st_size if self.log.exists() else 0
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log.parent.mkdir(exist_ok=True)
        env = {**os.environ, **self.env, "APP_BASE_URL": self.base_url or self.url}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiqueue", "serve", "--port", str(self.port)],
            cwd=ROOT, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
        )
        self.starts += 1
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        # Not left running: a test that gives up here may never reach its stop().
        self.proc.kill()
        self.proc.wait(10)
        raise RuntimeError(f"serve did not become healthy in 30 s: {self.log.read_text()[-2000:]}")

    def output(self) -> str:
        """Everything this process (and its restarts) wrote to stdout/stderr."""
        with self.log.open("rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


async def drain(conn: asyncpg.Connection, timeout: float = 90) -> None:
    """Wait until no row is pending or processing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status IN ('pending', 'processing')")
        if live == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("queue did not drain in time")
