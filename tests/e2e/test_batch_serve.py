"""The overnight lane per pool in a real `aiqueue serve`, configured as a
school would: an aiqueue.toml with an OpenAI batch pool, an Anthropic batch pool and a
live-only pool, the keys in the environment, both providers emulated on loopback."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.paths import ROOT
from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.batchapi.anthropic_api import AnthropicBatchAPI
from tests.batchapi.common import Behaviour, Clock
from tests.batchapi.openai_api import OpenAIBatchAPI
from tests.conftest import AUTH, SECRET, add_submissions
from tests.e2e.servers import AppProcess, free_port, run_asgi

pytestmark = pytest.mark.e2e
TOML = """
[pools.oa]
max_in_flight = 2
prices = {{ "gpt-4o-mini" = [0.15, 0.60] }}
batch = "openai"
batch_base_url = "{oa}"
batch_key_env = "OA_BATCH_KEY"
batch_model = "gpt-4o-mini"

[pools.an]
max_in_flight = 2
prices = {{ "claude-haiku-4-5" = [1.0, 5.0] }}
batch = "anthropic"
batch_base_url = "{an}"
batch_key_env = "AN_BATCH_KEY"
batch_model = "claude-haiku-4-5"

[pools.plain]
max_in_flight = 2

[kinds.essay]
pool = "oa"
function_url = "{fn}"
lane = "batch"

[kinds.short]
pool = "an"
function_url = "{fn}"

[kinds.quiz]
pool = "plain"
function_url = "{fn}"
"""


@pytest.fixture
def stack(db_url: str, tmp_path: Path) -> Iterator[tuple[AppProcess, dict[str, Any], Clock]]:
    clock = Clock()
    emus: dict[str, Any] = {
        "oa": OpenAIBatchAPI(behaviours=lambda n: Behaviour(delay=1), clock=clock),
        "an": AnthropicBatchAPI(behaviours=lambda n: Behaviour(delay=1), clock=clock)}
    ports = {name: free_port() for name in ("oa", "an", "fn")}
    config = tmp_path / "aiqueue.toml"
    config.write_text(TOML.format(oa=f"http://127.0.0.1:{ports['oa']}/v1",
                                  an=f"http://127.0.0.1:{ports['an']}/v1",
                                  fn=f"http://127.0.0.1:{ports['fn']}/"))
    env = {"DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": SECRET,
           "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{ports['fn']}/",
           "AIQUEUE_CONFIG": str(config), "OA_BATCH_KEY": emus["oa"].key,
           "AN_BATCH_KEY": emus["an"].key, "QUEUE_TICK_SECONDS": "1"}
    app = AppProcess(env, free_port())
    fn = function_app(FunctionSettings(simulate_latency=0))
    with run_asgi(emus["oa"].app, ports["oa"]), run_asgi(emus["an"].app, ports["an"]), \
            run_asgi(fn, ports["fn"]):
        app.start()
        try:
            yield app, emus, clock
        finally:
            app.stop()


async def test_each_pool_marks_on_its_own_batch_api(
        stack: tuple[AppProcess, dict[str, Any], Clock], conn: asyncpg.Connection) -> None:
    app, emus, clock = stack
    essays = await add_submissions(conn, 3, "hw-e")
    shorts = await add_submissions(conn, 2, "hw-s")
    quiz = await add_submissions(conn, 1, "hw-q")
    payload = {"rubric": "- chlorophyll", "max_score": 4}
    async with httpx.AsyncClient(base_url=app.url, headers=AUTH, timeout=30) as client:
        async def enqueue(ids: list[Any], assignment: str, **extra: Any) -> httpx.Response:
            return await client.post("/api/marking/enqueue", json={
                "assignment_id": assignment, "submission_ids": [str(i) for i in ids],
                "payload": payload, **extra})
        assert (await enqueue(essays, "hw-e", kind="essay")).status_code == 202  # its default
        assert (await enqueue(shorts, "hw-s", kind="short", lane="batch")).status_code == 202
        refused = await enqueue(quiz, "hw-q", kind="quiz", lane="batch")
        assert refused.status_code == 422 and "pool 'plain'" in refused.json()["detail"]
        # The cron (and the server's own chain, which may pack first) runs each pool's
        # lane; the emulated batches take a second of their clock.
        for _ in range(30):
            assert (await client.get("/api/marking/process-queue")).status_code == 200
            if not await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                                       "WHERE status <> 'completed'"):
                break
            clock.advance(2)
            await conn.execute("UPDATE ai_marking_batches SET look_after = now()")
            await asyncio.sleep(0.2)
    rows = await conn.fetch("SELECT pool, lane, status FROM ai_marking_queue")
    assert sorted(tuple(r) for r in rows) == [("an", "batch", "completed")] * 2 + [
        ("oa", "batch", "completed")] * 3
    # Each pool's rows went only to its own provider.
    batches = await conn.fetch("SELECT DISTINCT pool, provider FROM ai_marking_batches")
    assert sorted(tuple(b) for b in batches) == [("an", "anthropic"), ("oa", "openai")]
    assert emus["oa"].created >= 1 and emus["an"].created >= 1
    # The keys went as each provider documents them; nothing stays at either.
    assert emus["an"].auth_seen == {("x-api-key",)}
    assert emus["oa"].auth_seen == {("authorization",)}
    for _ in range(50):  # a chain step that applied the last batch deletes it just after
        if not any(v for emu in emus.values() for v in emu.held().values()):
            break
        await asyncio.sleep(0.1)
    for emu in emus.values():
        assert all(not v for v in emu.held().values()), emu.held()


def test_a_pool_whose_key_is_not_set_stops_start_up_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "aiqueue.toml"
    config.write_text('[pools.oa]\nmax_in_flight = 1\nbatch = "openai"\n'
                      'batch_key_env = "OA_BATCH_KEY_NOT_SET"\nbatch_model = "gpt-4o-mini"\n')
    env = {"PATH": "/usr/bin:/bin", "AIQUEUE_CONFIG": str(config),
           "MARKING_QUEUE_SECRET": SECRET}
    done = subprocess.run([sys.executable, "-m", "aiqueue", "serve", "--port",
                           str(free_port())], cwd=ROOT, env=env, capture_output=True,
                          timeout=60)
    out = (done.stdout + done.stderr).decode()
    assert done.returncode != 0
    assert "pools.oa.batch_key_env names OA_BATCH_KEY_NOT_SET" in out
    assert "Traceback" not in out
