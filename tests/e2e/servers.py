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
    """Fault mix of the test function; each a probability per dispatch."""

    http_500: float = 0.0
    busy_429: float = 0.0
    failed_callback: float = 0.0
    duplicate_callback: float = 0.0
    forged_callback: float = 0.0
    drop_callback: float = 0.0
    slow_ack: float = 0.0
    work_seconds: tuple[float, float] = (0.0, 0.005)


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


class MarkingFunction:
    """An async marking function: acks 202, works, then POSTs the callback."""

    def __init__(self, faults: Faults | None = None, seed: int = 7) -> None:
        self.faults = faults or Faults()
        self.record = FunctionRecord()
        self.rng = random.Random(seed)
        self.tasks: set[asyncio.Task[None]] = set()
        self.client: httpx.AsyncClient | None = None
        self.app = Starlette(routes=[Route("/mark", self.mark, methods=["POST"])])

    def roll(self, name: str) -> bool:
        hit = self.rng.random() < getattr(self.faults, name)
        if hit:
            self.record.faults[name] += 1
        return hit

    async def mark(self, request: Request) -> Response:
        job = await request.json()
        rec = self.record
        rec.dispatches += 1
        if self.roll("http_500"):
            return JSONResponse({"error": "boom"}, status_code=500)
        if self.roll("busy_429"):
            return JSONResponse({"error": "busy"}, status_code=429, headers={"retry-after": "0"})
        qid = job["queue_id"]
        rec.seen_queue_ids.add(qid)
        rec.in_flight += 1
        rec.held.add(qid)
        rec.max_in_flight = max(rec.max_in_flight, rec.in_flight)
        task = asyncio.create_task(self.work(job))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        if self.roll("slow_ack"):
            await asyncio.sleep(0.05)
        return JSONResponse({"accepted": True}, status_code=202)

    async def work(self, job: dict[str, Any]) -> None:
        await asyncio.sleep(self.rng.uniform(*self.faults.work_seconds))
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=10)
        content = job["submission"]["content"]
        item: dict[str, Any] = {"queue_id": job["queue_id"], "token": job["callback_token"]}
        if self.roll("failed_callback"):
            item |= {"status": "failed", "error": "model_timeout"}
        else:
            item |= {"status": "completed",
                     "result": {"score": len(content) % 10, "max_score": 10, "feedback": "ok"},
                     "usage": {"model": "test", "prompt_tokens": 10, "completion_tokens": 5}}
        # The model is free once the result exists: release the slot before posting.
        self.record.in_flight -= 1
        self.record.held.discard(job["queue_id"])
        if self.roll("drop_callback"):
            return
        if self.roll("forged_callback"):
            forged = {**item, "token": item["token"][:-4] + "AAAA"}
            await self.post(job["callback_url"], [forged])
        await self.post(job["callback_url"], [item])
        if self.roll("duplicate_callback"):
            await self.post(job["callback_url"], [item])

    async def post(self, url: str, items: list[dict[str, Any]]) -> None:
        assert self.client is not None
        for _ in range(5):
            try:
                await self.client.post(url, json=items)
                self.record.callbacks += 1
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.2)


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

    def __init__(self, env: dict[str, str], port: int) -> None:
        self.env, self.port = env, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = ROOT / "test-artifacts" / f"serve-{port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log.parent.mkdir(exist_ok=True)
        env = {**os.environ, **self.env, "APP_BASE_URL": self.url}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiqueue", "serve", "--port", str(self.port)],
            cwd=ROOT, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
        )
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
        raise RuntimeError("serve did not become healthy")

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
