"""Refusals from the model (docs/concepts.md): webhook items and busy dispatches use no attempt."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from aiqueue.errors import Invalid
from aiqueue.queue import loop, webhook
from tests.unit.dispatch_kit import FN, runtime
from tests.unit.fakes import FakeStore, make_job


def failed(rt: Any, job: Any, **extra: Any) -> dict[str, Any]:
    return {"queue_id": str(job.queue_id), "status": "failed",
            "token": rt.tokens.callback(job.queue_id, job.dispatch_seq, job.attempt), **extra}


@pytest.mark.parametrize(("extra", "kind", "delay", "window"), [
    ({"error": "rate_limited", "retry_after": 12.5}, "rate_limited", 12.5, 12.5),
    ({"error": "overloaded", "retry_after": 0}, "overloaded", 0.0, 0.0),
    ({"error": "Rate_Limited"}, "rate_limited", None, None),  # no wait given: the backoff
    # retry-after-ms (one call's wait), and when the whole budget is back: the window.
    ({"error": "rate_limited", "retry_after": 0.3, "reset_after": 9.7}, "rate_limited", 0.3,
     9.7),
])
async def test_a_refusal_item_goes_back_without_an_attempt(
    client: httpx.AsyncClient, extra: dict[str, Any], kind: str, delay: float | None,
    window: float | None
) -> None:
    job = make_job()
    store = FakeStore()
    rt = runtime(store, client, max_in_flight=8, refused_give_up_seconds=120)
    receipt = await webhook.receive_results(
        rt, webhook.verify_results(rt.tokens, [failed(rt, job, **extra)]))
    assert receipt.counts["accepted"] == 1 and receipt.freed == 1
    _qid, _seq, kw = store.args_of("refused")
    if delay is None:  # the first retry's jittered backoff, base 10 s
        assert 5 <= kw.pop("delay") <= 15
    else:
        assert kw.pop("delay") == delay
    assert kw == {"kind": kind, "give_up": 120, "cap": 8, "window": window}
    assert "attempt_failed" not in store.names()


async def test_other_errors_still_use_an_attempt(client: httpx.AsyncClient) -> None:
    job = make_job()
    store = FakeStore()
    rt = runtime(store, client)
    await webhook.receive_results(rt, webhook.verify_results(
        rt.tokens, [failed(rt, job, error="model_timeout", retry_after=5)]))
    assert "refused" not in store.names() and "attempt_failed" in store.names()


@pytest.mark.parametrize("bad", [-1, 3600.5, "10", True, None, [1], float("nan")])
async def test_a_bad_retry_after_fails_the_whole_batch(
    client: httpx.AsyncClient, bad: Any
) -> None:
    job = make_job()
    rt = runtime(FakeStore(), client)
    items = [failed(rt, job, error="rate_limited", retry_after=bad)]
    if bad is None:  # null is "not given"
        webhook.verify_results(rt.tokens, items)
        return
    with pytest.raises(Invalid, match="retry_after"):
        webhook.verify_results(rt.tokens, [failed(rt, make_job(), error="overloaded"), *items])


@respx.mock
@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limited"), (503, "overloaded")])
async def test_a_busy_dispatch_is_a_refusal(client: httpx.AsyncClient, status: int,
                                            kind: str) -> None:
    respx.post(FN).mock(return_value=httpx.Response(status, headers={"retry-after": "3"}))
    store = FakeStore(jobs=[make_job()])
    await loop.process_step(runtime(store, client))
    _qid, _seq, kw = store.args_of("refused")
    assert kw["kind"] == kind and kw["delay"] == 3.0
