"""Dispatch outcomes and chain behaviour, outgoing HTTP mocked with respx."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from aiqueue import dispatch
from aiqueue.queue import loop, webhook
from aiqueue.queue.loop import Receipt
from aiqueue.tokens import Tokens
from tests.unit.dispatch_kit import FN, SECRET, SELF, runtime, settings
from tests.unit.fakes import FakeStore, make_job


@respx.mock
async def test_dispatch_sends_the_contract_payload_with_bearer(client: httpx.AsyncClient):
    route = respx.post(FN).mock(return_value=httpx.Response(202))
    job = make_job()
    outcome = await dispatch.send(client, job, settings().target(), Tokens(SECRET))
    assert outcome == dispatch.Accepted()
    request = route.calls.last.request
    assert request.headers["authorization"] == "Bearer fn-token"
    body = json.loads(request.content)
    assert body["queue_id"] == str(job.queue_id)
    assert body["attempt"] == 1 and body["assignment_id"] == "hw-7"
    assert body["callback_url"] == "http://app.test/webhooks/ai-mark"
    assert body["payload"] == {"rubric": "r", "max_score": 10}
    assert body["submission"] == {"id": str(job.submission_id), "assignment_id": "hw-7",
                                  "content": "the student's answer"}
    claim = Tokens(SECRET).verify_callback(body["callback_token"])
    assert claim is not None and claim.queue_id == job.queue_id and claim.dispatch_seq == 1


@respx.mock
@pytest.mark.parametrize(("status", "headers", "expected"), [
    (429, {"retry-after": "7"}, dispatch.Busy(7.0, 429)),
    (503, {}, dispatch.Busy(None, 503)),
    # Up to an hour, like a callback's retry_after, whatever the backoff's cap.
    (429, {"retry-after": "1800"}, dispatch.Busy(1800.0, 429)),
    (503, {"retry-after": "99999"}, dispatch.Busy(3600.0, 503)),
    (500, {}, dispatch.Failed("function_http_500", 500)),
    (404, {}, dispatch.Failed("function_http_404", 404)),
    (200, {}, dispatch.Accepted()),
])
async def test_dispatch_classifies_answers(client: httpx.AsyncClient, status: int,
                                           headers: dict[str, str], expected: Any):
    respx.post(FN).mock(return_value=httpx.Response(status, headers=headers))
    assert await dispatch.send(client, make_job(), settings().target(), Tokens(SECRET)) == expected


@respx.mock
async def test_dispatch_timeout_and_refused_connection_are_failed_attempts(
    client: httpx.AsyncClient,
):
    respx.post(FN).mock(side_effect=httpx.ReadTimeout("slow"))
    assert await dispatch.send(client, make_job(), settings().target(), Tokens(SECRET)) == \
        dispatch.Failed("dispatch_timeout")
    respx.post(FN).mock(side_effect=httpx.ConnectError("refused"))
    assert await dispatch.send(client, make_job(), settings().target(), Tokens(SECRET)) == \
        dispatch.Failed("dispatch_connect_error")


@respx.mock
async def test_sync_mode_reads_the_result_from_the_answer(client: httpx.AsyncClient):
    respx.post(FN).mock(return_value=httpx.Response(200, json={"status": "completed"}))
    outcome = await dispatch.send(client, make_job(), settings(function_mode="sync").target(),
                                  Tokens(SECRET))
    assert outcome == dispatch.Accepted({"status": "completed"})
    respx.post(FN).mock(return_value=httpx.Response(200, text="not json"))
    outcome = await dispatch.send(client, make_job(), settings(function_mode="sync").target(),
                                  Tokens(SECRET))
    assert outcome == dispatch.Failed("sync_answer_not_json", 200)


@respx.mock
async def test_busy_answer_returns_the_row_after_retry_after(client: httpx.AsyncClient):
    respx.post(FN).mock(return_value=httpx.Response(429, headers={"retry-after": "42"}))
    store = FakeStore(jobs=[make_job()])
    step = await loop.process_step(runtime(store, client))
    assert step.claimed is not None and not step.dispatched
    _qid, _seq, kw = store.args_of("refused")
    assert kw["delay"] == 42.0 and kw["kind"] == "rate_limited"
    assert "attempt_failed" not in store.names() and "breaker_failure" not in store.names()


@respx.mock
async def test_failed_dispatch_uses_an_attempt_with_backoff_and_counts_for_the_breaker(
    client: httpx.AsyncClient,
):
    respx.post(FN).mock(return_value=httpx.Response(500))
    store = FakeStore(jobs=[make_job(attempt=2)])
    await loop.process_step(runtime(store, client))
    _qid, _seq, kw = store.args_of("attempt_failed")
    assert kw["error"] == "function_http_500" and kw["retryable"] is True
    assert 16 <= kw["delay"] <= 24  # base 10 · 2^(2-1), ±20 % jitter
    assert store.names().count("breaker_failure") == 1


@respx.mock
async def test_chain_fires_once_when_another_row_could_be_claimed(client: httpx.AsyncClient):
    respx.post(FN).mock(return_value=httpx.Response(202))
    chain = respx.post(SELF).mock(return_value=httpx.Response(200, json={}))
    store = FakeStore(jobs=[make_job()], claimable_after=True)
    step = await loop.process_step(runtime(store, client))
    assert step.dispatched and step.chained
    assert chain.call_count == 1
    assert chain.calls.last.request.headers["authorization"] == f"Bearer {SECRET}"


@respx.mock
async def test_no_chain_without_a_free_slot_or_without_a_claim(client: httpx.AsyncClient):
    respx.post(FN).mock(return_value=httpx.Response(202))
    chain = respx.post(SELF).mock(return_value=httpx.Response(200, json={}))
    store = FakeStore(jobs=[make_job()], claimable_after=False)
    assert not (await loop.process_step(runtime(store, client))).chained
    empty = FakeStore(jobs=[], claimable_after=True)
    step = await loop.process_step(runtime(empty, client))
    assert step.claimed is None and not step.chained
    assert chain.call_count == 0


@pytest.mark.parametrize("settle_fails", [False, True])
async def test_a_completed_callback_settles_or_at_least_applies_its_result(
    client: httpx.AsyncClient, settle_fails: bool
):
    job = make_job()
    store = FakeStore(jobs=[make_job()], settle_fails=settle_fails)
    rt = runtime(store, client)
    item = {"queue_id": str(job.queue_id), "status": "completed", "result": {"score": 1},
            "token": rt.tokens.callback(job.queue_id, job.dispatch_seq, job.attempt)}
    receipt = await webhook.receive_results(rt, webhook.verify_results(rt.tokens, [item]))
    assert receipt.counts == {"accepted": 1, "ignored": 0, "rejected": 0}
    assert receipt.freed == 1
    if settle_fails:
        # Tried once more (a lost answer's repeat hands back what the first claimed),
        # then the result did not wait on the claim; the step after answering claims.
        assert store.names() == ["settle", "settle", "complete"]
        assert not receipt.settled and receipt.next_jobs == ()
    else:
        assert store.names() == ["settle", "claim"]
        assert receipt.settled and len(receipt.next_jobs) == 1


@respx.mock
@pytest.mark.parametrize("recovered", [0, 2])
async def test_a_settled_step_dispatches_first_and_tidies_up_after(client: httpx.AsyncClient,
                                                                   recovered: int):
    store = FakeStore(recovered=recovered)

    def accept(request: httpx.Request) -> httpx.Response:
        store.calls.append(("dispatch", ()))
        return httpx.Response(202)

    respx.post(FN).mock(side_effect=accept)
    chain = respx.post(SELF).mock(return_value=httpx.Response(200, json={}))
    settled = Receipt({"accepted": 1, "ignored": 0, "rejected": 0}, 1, True, (make_job(),))
    step = await loop.settled_step(runtime(store, client), settled)
    # The result's transaction claimed already: no claim here, and housekeeping
    # (due on an instance's first step) waits until the job has gone out.
    assert store.names() == ["dispatch", "recover_stuck", "prune", "retain",
                             "expire_rows", "evaluate_alerts"]
    assert step.dispatched
    # Slots that recovery freed get a chained step; otherwise nothing chains.
    assert step.chained is bool(recovered) and chain.call_count == int(bool(recovered))


@respx.mock
@pytest.mark.parametrize(("effect", "delivered"), [
    (httpx.ReadTimeout("still working"), True),
    (httpx.ConnectError("refused"), False),
    (httpx.Response(401), False),
    (httpx.Response(200), True),
])
async def test_chain_delivery(client: httpx.AsyncClient, effect: Any, delivered: bool):
    if isinstance(effect, Exception):
        respx.post(SELF).mock(side_effect=effect)
    else:
        respx.post(SELF).mock(return_value=effect)
    assert await dispatch.chain(client, settings()) is delivered


@pytest.mark.parametrize(
    ("more", "busy", "freed", "dispatched", "recovered", "chains"),
    [
        # The process endpoint, the cron, an enqueue: chain whenever a row is claimable.
        (True, False, 0, True, 0, True),
        (True, False, 0, False, 0, True),
        (False, False, 0, True, 0, False),
        # A busy function paused dispatching for everyone: nothing to chain to.
        (True, True, 0, False, 0, False),
        (True, True, 2, False, 3, False),
        # One result freed one slot and refilled it: its own result refills the rest.
        (True, False, 1, True, 0, False),
        # ... unless the refill failed, or recovery freed more slots.
        (True, False, 1, False, 0, True),
        (True, False, 1, True, 2, True),
        (False, False, 1, False, 2, False),
        # A batch that freed several slots refills one and chains for the others.
        (True, False, 2, True, 0, True),
        (False, False, 2, True, 0, False),
    ],
)
def test_should_chain(more: bool, busy: bool, freed: int, dispatched: bool, recovered: int,
                      chains: bool):
    assert loop.should_chain(more=more, busy=busy, freed=freed, dispatched=dispatched,
                             recovered=recovered) is chains
