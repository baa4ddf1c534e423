"""Recovery's thresholds per target and DigitalOcean's decisions (queue/recovery.py), no I/O."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
import respx

from aiqueue.dispatch.aws import AwsCredentials, OidcToken
from aiqueue.dispatch.platform import Activation, LambdaTimeout, configuration_url
from aiqueue.models import Lookup, QueueId
from aiqueue.queue import housekeeping, recovery
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.settings.targets import DoTarget, LambdaTarget
from aiqueue.tokens import Tokens
from tests.unit.fakes import FakeStore, make_job

SECRET = "unit-secret-0123456789abcdef"
DO = DoTarget("https://faas.test", "fn-ns", "ai-mark", "mark", "user", "key", 300.0)
LAMBDA = LambdaTarget("eu-west-1", "AKID", "secret", None, "ai-mark", None,
                      "https://lambda.eu-west-1.amazonaws.com")


def runtime(store: FakeStore, **kw: Any) -> Runtime[FakeStore]:
    s = Settings(queue_secrets=(SECRET,)).with_overrides(**kw)
    return Runtime(settings=s, store=store, http=httpx.AsyncClient(),
                   tokens=Tokens(SECRET), owned={LambdaTimeout: LambdaTimeout(value=60.0)})


@pytest.mark.parametrize(("kw", "expected"), [
    ({}, recovery.Thresholds(600.0, 90.0, None, False)),
    # The heartbeat timeout shortens the wait, never lengthens it (docs/configuration.md).
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


ROLE_TARGET = LambdaTarget("eu-west-1", "", "", None, "ai-mark", None,
                           "https://lambda.eu-west-1.amazonaws.com",
                           "arn:aws:iam::123456789012:role/aiqueue-dispatch",
                           "https://sts.eu-west-1.amazonaws.com")
STS_ANSWER = """<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>
  <Credentials><AccessKeyId>ASIAROLE</AccessKeyId><SecretAccessKey>s</SecretAccessKey>
  <SessionToken>role-session</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration>
  </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"""


@respx.mock
async def test_with_a_role_the_lambda_timeout_is_read_with_the_assumed_credentials():
    """GetFunctionConfiguration is signed as the role, so the bound holds."""
    respx.post("https://sts.eu-west-1.amazonaws.com/").mock(
        return_value=httpx.Response(200, text=STS_ANSWER))
    config = respx.get(configuration_url(ROLE_TARGET)).mock(
        return_value=httpx.Response(200, json={"Timeout": 40}))
    rt = runtime(FakeStore(), dispatch_target="lambda", aws_lambda=ROLE_TARGET,
                 platform_grace_seconds=5.0)
    rt.owned[LambdaTimeout] = LambdaTimeout()
    rt.aws = AwsCredentials(ROLE_TARGET, OidcToken("oidc-token"))
    assert (await recovery.thresholds(rt)).bound == 45.0
    sent = config.calls.last.request.headers
    assert sent["authorization"].startswith("AWS4-HMAC-SHA256 Credential=ASIAROLE/")
    assert sent["x-amz-security-token"] == "role-session"


async def test_with_a_role_but_no_token_yet_the_timeout_is_read_again_soon():
    rt = runtime(FakeStore(), dispatch_target="lambda", aws_lambda=ROLE_TARGET)
    rt.owned[LambdaTimeout] = LambdaTimeout()
    rt.aws = AwsCredentials(ROLE_TARGET, OidcToken())
    assert (await recovery.thresholds(rt)).bound is None
    assert rt.own(LambdaTimeout).retry_at - time.monotonic() < 20.0


@pytest.mark.parametrize(("p95", "quiet"), [
    (None, 10.0),  # no recent results yet: the floor, not the heartbeat timeout
    (1.0, 10.0),  # 3 s, but never sooner than 10 s
    (20.0, 60.0),
    (45.0, 90.0),  # the heartbeat timeout comes first
])
async def test_digitalocean_is_asked_at_3x_the_recent_p95_at_least_10_s(
    p95: float | None, quiet: float
):
    """The earliest of the heartbeat timeout and 3x p95 (the bound caps both)."""
    store = FakeStore(p95=p95)
    rt = runtime(store, dispatch_target="digitalocean", digitalocean=DO)
    t = await recovery.thresholds(rt)
    assert (t.p95, t.quiet, t.bound) == (p95, quiet, 330.0)
    await recovery.thresholds(rt)
    # Read once a minute, not every step (while there is no result: every few seconds).
    assert store.names().count("recent_processing_tail") == 1
    rt.own(recovery.RecentP95).due -= recovery.P95_UNKNOWN_REFRESH_SECONDS
    await recovery.thresholds(rt)
    assert store.names().count("recent_processing_tail") == (2 if p95 is None else 1)


async def test_the_p95_is_not_read_where_no_platform_is_asked():
    store = FakeStore(p95=1.0)
    t = await recovery.thresholds(runtime(store, dispatch_target="lambda", aws_lambda=LAMBDA))
    assert t.p95 is None and "recent_processing_tail" not in store.names()


async def test_a_dispatch_wakes_a_ticker_that_would_oversleep_its_first_look() -> None:
    ticker = housekeeping.TickerSleep()
    sleeping = asyncio.create_task(ticker.sleep(60))  # nothing was in flight
    await asyncio.sleep(0)
    ticker.dispatched()
    await asyncio.wait_for(sleeping, 1)
    assert ticker.until == 0.0  # woken: it looks again rather than running a step
    # A sleep that ends before the dispatch's first look (10 s) is left alone.
    short = asyncio.create_task(ticker.sleep(0.2))
    await asyncio.sleep(0)
    ticker.dispatched()
    await short
    assert ticker.until > 0.0
