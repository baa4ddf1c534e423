"""Recovery's thresholds per target and DigitalOcean's decisions (queue/recovery.py), no I/O."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from aiqueue.dispatch.platform import Activation, LambdaTimeout
from aiqueue.models import Lookup, QueueId
from aiqueue.queue import recovery
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.target_settings import DoTarget, LambdaTarget
from aiqueue.tokens import Tokens
from tests.unit.fakes import FakeStore, make_job

SECRET = "unit-secret-0123456789abcdef"
DO = DoTarget("https://faas.test", "fn-ns", "ai-mark", "mark", "user", "key", 300.0)
LAMBDA = LambdaTarget("eu-west-1", "AKID", "secret", None, "ai-mark", None,
                      "https://lambda.eu-west-1.amazonaws.com")


def runtime(store: FakeStore, **kw: Any) -> Runtime:
    s = Settings(queue_secrets=(SECRET,)).with_overrides(**kw)
    return Runtime(settings=s, store=store, http=httpx.AsyncClient(),  # type: ignore[arg-type]
                   tokens=Tokens(SECRET), owned={LambdaTimeout: LambdaTimeout(value=60.0)})


@pytest.mark.parametrize(("kw", "expected"), [
    ({}, recovery.Thresholds(600.0, 90.0, None, False)),
    # The heartbeat timeout shortens the wait, never lengthens it (CONTRACT §2).
    ({"stuck_after_seconds": 3.0}, recovery.Thresholds(3.0, 3.0, None, False)),
    ({"dispatch_target": "digitalocean", "digitalocean": DO},
     recovery.Thresholds(600.0, 90.0, 330.0, True)),
    ({"dispatch_target": "lambda", "aws_lambda": LAMBDA, "platform_grace_seconds": 5.0},
     recovery.Thresholds(600.0, 90.0, 65.0, False)),
])
async def test_thresholds_follow_the_target(kw: dict[str, Any], expected: recovery.Thresholds):
    assert await recovery.thresholds(runtime(FakeStore(), **kw)) == expected


async def test_an_unknown_lambda_timeout_leaves_the_stuck_timeout_in_charge():
    rt = runtime(FakeStore(), dispatch_target="lambda", aws_lambda=LAMBDA)
    rt.owned[LambdaTimeout] = LambdaTimeout(retry_at=float("inf"))  # read failed a moment ago
    assert (await recovery.thresholds(rt)).bound is None


def look(past_bound: bool = False) -> Lookup:
    job = make_job()
    return Lookup(QueueId(job.queue_id), job.dispatch_seq, job.attempt, "act1", past_bound)


async def test_not_found_waits_and_says_still_running_until_the_bound():
    store = FakeStore()
    rt = runtime(store)
    taken = look()
    assert await recovery.decide(rt, taken, Activation("not_found"), 90.0, 330.0) == 0
    assert store.calls == [("platform_waits", (taken.queue_id, taken.dispatch_seq,
                                               "still_running", 90.0, 330.0))]
    assert await recovery.decide(rt, taken, Activation("unknown", code="lookup_http_500"),
                                 90.0, 330.0) == 0
    assert store.calls[-1][1][2] == "lookup_failed"


async def test_past_the_bound_not_found_is_recovered_at_once_as_timed_out():
    store = FakeStore()
    taken = look(past_bound=True)
    assert await recovery.decide(runtime(store), taken, Activation("not_found"), 90, 330) == 1
    name, (queue_id, seq, kw) = store.calls[0]
    assert (name, queue_id, seq) == ("attempt_failed", taken.queue_id, taken.dispatch_seq)
    assert (kw["delay"], kw["error"], kw["outcome"]) == (0, "platform_timeout", "stuck")
    assert store.calls[1] == ("platform_said", (taken.queue_id, taken.dispatch_seq, "timed_out"))


async def test_a_failed_activation_fails_with_its_code_and_the_backoff():
    store = FakeStore()
    taken = look()
    answer = Activation("failed", code="activation_timeout")
    assert await recovery.decide(runtime(store), taken, answer, 90, 330) == 1
    kw = store.calls[0][1][2]
    assert (kw["error"], kw["outcome"], kw["delay"] > 0) == (
        "activation_timeout", "activation_failed", True)
    assert store.calls[1][1][2] == "timed_out"


async def test_a_finished_activation_applies_only_this_dispatchs_items():
    store = FakeStore()
    rt = runtime(store)
    taken = look()
    mine = {"queue_id": str(taken.queue_id), "status": "completed", "result": {"score": 2},
            "token": rt.tokens.callback(taken.queue_id, taken.dispatch_seq, taken.attempt)}
    older = {**mine, "result": {"score": 9},
             "token": rt.tokens.callback(taken.queue_id, taken.dispatch_seq - 1, 1)}
    beat = {**mine, "status": "progress", "progress": {"current": 1}}
    answer = Activation("finished", (older, beat, "junk", {"status": "??"}, mine))
    assert await recovery.decide(rt, taken, answer, 90, 330) == 1
    assert [name for name, _ in store.calls] == ["complete", "platform_said"]
    assert store.calls[0][1][2] == {"score": 2}
    assert store.calls[1][1][2] == "applied_from_activation"
