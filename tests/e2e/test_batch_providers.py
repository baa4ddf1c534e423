"""The app's provider clients (aiqueue/batch) against the emulators, on loopback."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from aiqueue.batch.connect import connect
from aiqueue.batch.provider import Line, Provider, ProviderError, submit
from tests.batchapi.anthropic_api import AnthropicBatchAPI
from tests.batchapi.common import Behaviour, Clock, LineFate
from tests.batchapi.openai_api import OpenAIBatchAPI
from tests.e2e.servers import free_port, run_asgi

pytestmark = pytest.mark.e2e

SYSTEM = 'Reply {"score": <number from 0 to 10>}'


def body(provider: str) -> dict[str, Any]:
    if provider == "openai":
        return {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": SYSTEM},
                                                     {"role": "user", "content": "answer"}]}
    return {"model": "claude-haiku-4-5", "max_tokens": 256, "system": SYSTEM,
            "messages": [{"role": "user", "content": "answer"}]}


class Rig:
    """A provider client, its emulator, the emulator's clock and its batches' fates."""

    def __init__(self, emu: Any, provider: Provider, clock: Clock) -> None:
        self.emu, self.provider, self.clock = emu, provider, clock
        self.fates: dict[int, Behaviour] = emu.fates


@pytest.fixture(params=["openai", "anthropic"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any, Clock, int]]:
    clock = Clock()
    fates: dict[int, Behaviour] = {}
    cls = OpenAIBatchAPI if request.param == "openai" else AnthropicBatchAPI
    emu: Any = cls(behaviours=lambda n: fates.get(n, Behaviour(delay=2)), clock=clock,
              window_seconds=60)
    emu.fates = fates
    port = free_port()
    with run_asgi(emu.app, port):
        yield request.param, emu, clock, port


@pytest.fixture
async def rig(served: tuple[str, Any, Clock, int]) -> AsyncIterator[Rig]:
    name, emu, clock, port = served
    base = f"http://127.0.0.1:{port}/v1"
    provider = connect(name, base, emu.key)  # type: ignore[arg-type]
    yield Rig(emu, provider, clock)
    await provider.aclose()


def lines(provider: str, ids: list[str]) -> list[Line]:
    return [Line(i, body(provider)) for i in ids]


async def test_submit_poll_results_delete(rig: Rig) -> None:
    handle = await submit(rig.provider, lines(rig.provider.name, ["q1-1", "q2-1"]), tag="b1")
    assert (await rig.provider.poll(handle)).state == "running"
    assert await rig.provider.delete(handle) is False  # not while it runs
    rig.clock.advance(3)
    polled = await rig.provider.poll(handle)
    assert polled.state == "ended"
    outcomes = {o.custom_id: o for o in await rig.provider.results(polled)}
    assert set(outcomes) == {"q1-1", "q2-1"}
    assert all(o.kind == "succeeded" and o.response for o in outcomes.values())
    assert await rig.provider.delete(polled.handle) is True
    held = rig.emu.held()
    assert all(not v for v in held.values()), held


async def test_errored_expired_and_failed_lines(rig: Rig) -> None:
    fates: dict[str, LineFate] = {"e-1": "error", "x-1": "expire"}
    rig.fates[1] = Behaviour(delay=1, line=lambda cid, b: fates.get(cid, "ok"))
    rig.fates[2] = Behaviour(fail=True)
    mixed = await submit(rig.provider, lines(rig.provider.name, ["ok-1", "e-1", "x-1"]), "b1")
    failed = await submit(rig.provider, lines(rig.provider.name, ["f-1"]), "b2")
    rig.clock.advance(61)
    polled = await rig.provider.poll(mixed)
    assert polled.state == "ended"
    kinds = {o.custom_id: o.kind for o in await rig.provider.results(polled)}
    assert kinds == {"ok-1": "succeeded", "e-1": "errored", "x-1": "expired"}
    look = await rig.provider.poll(failed)
    # OpenAI fails the batch; Anthropic, which can't, errors every line.
    if look.state == "ended":
        assert {o.kind for o in await rig.provider.results(look)} == {"errored"}
    else:
        assert look.state == "failed"
    for handle in (polled.handle, look.handle):
        assert await rig.provider.delete(handle)
    assert all(not v for v in rig.emu.held().values())


async def test_cancel_a_stalled_batch_then_delete(rig: Rig) -> None:
    rig.fates[1] = Behaviour(stall=True)
    handle = await submit(rig.provider, lines(rig.provider.name, ["a-1", "b-1"]), "b1")
    await rig.provider.cancel(handle)
    polled = await rig.provider.poll(handle)
    assert polled.state == "ended" and polled.missing == "canceled"
    outcomes = await rig.provider.results(polled)
    assert all(o.kind == "canceled" for o in outcomes)
    await rig.provider.cancel(polled.handle)  # cancelling an ended batch is harmless
    assert await rig.provider.delete(polled.handle)
    assert all(not v for v in rig.emu.held().values())


async def test_find_a_batch_whose_creation_was_not_recorded(rig: Rig) -> None:
    since = time.time()
    handle = await submit(rig.provider, lines(rig.provider.name, ["a-1", "b-1"]), "lane-7")
    found = await rig.provider.find("lane-7", 2, since)
    assert found is not None and found.batch_id == handle.batch_id
    # OpenAI's batch carries the tag; Anthropic's is known by its time and its size.
    other = ("lane-8", 2) if rig.provider.name == "openai" else ("lane-7", 3)
    assert await rig.provider.find(*other, since) is None


async def test_a_wrong_key_is_a_content_free_error(served: tuple[str, Any, Clock, int]) -> None:
    name, emu, clock, port = served
    provider = connect(name, f"http://127.0.0.1:{port}/v1", "wrong-key")  # type: ignore[arg-type]
    with pytest.raises(ProviderError) as caught:
        await submit(provider, lines(name, ["a-1"]), "b1")
    assert caught.value.code == "provider_http_401"
    await provider.aclose()


async def test_anthropics_key_goes_in_its_own_header_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A key in the environment must not reach the API beside the pool's either.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token-from-the-environment")
    emu, port = AnthropicBatchAPI(behaviours=lambda n: Behaviour(delay=2)), free_port()
    with run_asgi(emu.app, port):
        provider = connect("anthropic", f"http://127.0.0.1:{port}/v1", emu.key)
        handle = await submit(provider, lines("anthropic", ["a-1"]), "b1")
        await provider.poll(handle)
        await provider.cancel(handle)
        await provider.aclose()
    # Every request carried x-api-key (with anthropic-version, which the emulator
    # requires) and no Authorization header.
    assert emu.auth_seen == {("x-api-key",)}
