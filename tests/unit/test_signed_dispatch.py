"""AI_MARKING_SIGNING_SECRET (docs/deploying/databases.md): every `http` dispatch is signed per
Standard Webhooks v1; the setting is validated at start-up."""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import respx
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from aiqueue import dispatch
from aiqueue.dispatch import targets
from aiqueue.errors import SettingsError
from aiqueue.settings import Settings, load_settings
from aiqueue.settings.targets import DoTarget
from aiqueue.tokens import Tokens
from tests.unit.fakes import make_job

FN = "http://function.test/mark"
SECRET = "unit-secret-0123456789abcdef"
SIGNING = "whsec_" + base64.b64encode(bytes(range(32))).decode()


def settings(**kw: Any) -> Settings:
    return Settings(queue_secrets=(SECRET,), function_url=FN, function_token="fn-token",
                    signing_secret=SIGNING).with_overrides(**kw)


@respx.mock
async def test_every_http_dispatch_carries_a_verifiable_signature() -> None:
    route = respx.post(FN).mock(return_value=httpx.Response(202))
    # The id is the dispatch's own, not the attempt (docs/deploying/index.md): a refusal gives
    # the attempt back, and the next dispatch must not look like a replay.
    job = dataclasses.replace(make_job(attempt=2), dispatch_seq=5)
    async with httpx.AsyncClient() as client:
        outcome = await dispatch.send(client, job, settings().target(), Tokens(SECRET))
    assert outcome == dispatch.Accepted()
    request = route.calls.last.request
    headers = dict(request.headers)
    assert headers["webhook-id"] == f"{job.queue_id}.5"
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 5
    assert headers["authorization"] == "Bearer fn-token"  # the bearer stays
    body = Webhook(SIGNING).verify(request.content, headers)
    assert body["queue_id"] == str(job.queue_id)
    # The signature covers the body: any change breaks it.
    with pytest.raises(WebhookVerificationError):
        Webhook(SIGNING).verify(request.content.replace(b"hw-7", b"hw-8"), headers)


@respx.mock
async def test_without_the_secret_no_signature_headers() -> None:
    route = respx.post(FN).mock(return_value=httpx.Response(202))
    async with httpx.AsyncClient() as client:
        unsigned = settings(signing_secret=None).target()
        await dispatch.send(client, make_job(), unsigned, Tokens(SECRET))
    assert not {"webhook-id", "webhook-signature"} & set(route.calls.last.request.headers)


def test_platform_targets_are_not_signed() -> None:
    # DigitalOcean and Lambda authenticate the call themselves; headers don't reach the action.
    do = settings(dispatch_target="digitalocean",
                  digitalocean=DoTarget("https://do.test", "ns", "pkg", "act", "u", "k"))
    request = targets.build_request(do.target(), json.dumps({}).encode(), datetime.now(UTC),
                                    message_id="q.1")
    assert "webhook-signature" not in request.headers


@pytest.mark.parametrize("value", [
    "not-a-secret",
    "whsec_",
    "whsec_%%%%",
    "whsec_" + base64.b64encode(b"short").decode(),
    "whsec_" + base64.b64encode(b"x" * 65).decode(),
    base64.b64encode(b"x" * 32).decode(),  # no prefix
])
def test_a_malformed_signing_secret_stops_start_up_naming_it(value: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings({"MARKING_QUEUE_SECRET": SECRET, "AI_MARKING_SIGNING_SECRET": value})
    assert "AI_MARKING_SIGNING_SECRET" in info.value.detail and "\n" not in info.value.detail
    assert value not in info.value.detail or value == "whsec_"


def test_a_well_formed_signing_secret_is_kept() -> None:
    s = load_settings({"MARKING_QUEUE_SECRET": SECRET, "AI_MARKING_SIGNING_SECRET": SIGNING})
    assert s.signing_secret == SIGNING
    assert load_settings({"MARKING_QUEUE_SECRET": SECRET}).signing_secret is None
