"""Signed dispatch (docs/deploying/databases.md): the reference function, given the app's
AI_MARKING_SIGNING_SECRET, takes what the app signs and refuses a replay, a
timestamp more than 5 minutes off, a tampered body and a wrong or missing
signature."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

import httpx
import pytest
import respx
from starlette.applications import Starlette

from aiqueue.dispatch.invoke import message_id
from aiqueue.dispatch.targets import http_request
from aiqueue.settings import Settings as AppSettings
from functions.ai_mark.server import Worker, create_app
from functions.ai_mark.settings import Settings
from functions.ai_mark.signing import DispatchVerifier

from .conftest import CALLBACK_URL, make_dispatch

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
OTHER = "whsec_" + base64.b64encode(b"o" * 32).decode()
QUEUE_ID = make_dispatch()["queue_id"]


@pytest.fixture
async def app(sim_settings: Settings, respx_mock: respx.MockRouter
              ) -> AsyncIterator[Starlette]:
    respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    app = create_app(dataclasses.replace(sim_settings, signing_secret=SECRET))
    yield app
    worker: Worker = app.state.worker
    await worker.close()


def signed(body: bytes, *, secret: str = SECRET, seq: int = 1,
           at: datetime | None = None) -> dict[str, str]:
    """The headers the app sends with this body (aiqueue's own signing code)."""
    settings = AppSettings(signing_secret=secret, function_url="http://fn.test/mark")
    request = http_request(settings.target(), body, at or datetime.now(UTC),
                           message_id(UUID(QUEUE_ID), seq))
    return request.headers


async def post(app: Starlette, body: bytes, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://fn.test") as client:
        return await client.post("/mark", content=body, headers=headers)


BODY = json.dumps(make_dispatch()).encode()


async def test_a_signed_dispatch_is_accepted_and_its_replay_refused(app: Starlette) -> None:
    headers = signed(BODY)
    assert headers["webhook-id"] == f"{QUEUE_ID}.1"
    assert headers["webhook-signature"].startswith("v1,")
    assert (await post(app, BODY, headers)).status_code == 202
    replay = await post(app, BODY, headers)
    assert replay.status_code == 409 and replay.json()["error"] == "replayed"


async def test_a_new_dispatch_of_the_same_attempt_is_not_a_replay(app: Starlette) -> None:
    """A refusal gives the attempt back; the re-dispatch, in the same
    second, has an id of its own and is taken."""
    at = datetime.now(UTC)
    assert (await post(app, BODY, signed(BODY, seq=1, at=at))).status_code == 202
    assert (await post(app, BODY, signed(BODY, seq=2, at=at))).status_code == 202
    # An id already accepted is a replay, however newly it is signed.
    later = signed(BODY, seq=2, at=at + timedelta(seconds=2))
    assert (await post(app, BODY, later)).status_code == 409


async def test_a_dispatch_refused_before_it_was_accepted_may_come_again(app: Starlette) -> None:
    """Only an accepted dispatch's id is remembered: a refused one is no replay."""
    bad = json.dumps(make_dispatch(callback_url="ftp://nowhere")).encode()
    headers = signed(bad, seq=3)
    assert (await post(app, bad, headers)).status_code == 422
    assert (await post(app, bad, headers)).status_code == 422  # refused again, not 409


@pytest.mark.parametrize("offset", [timedelta(minutes=-6), timedelta(minutes=6)])
async def test_a_timestamp_more_than_5_minutes_off_is_refused(
    app: Starlette, offset: timedelta
) -> None:
    r = await post(app, BODY, signed(BODY, at=datetime.now(UTC) + offset))
    assert r.status_code == 401 and r.json()["error"] == "bad_signature"


async def test_a_timestamp_4_minutes_off_is_accepted(app: Starlette) -> None:
    at = datetime.now(UTC) - timedelta(minutes=4)
    assert (await post(app, BODY, signed(BODY, at=at))).status_code == 202


async def test_a_tampered_body_is_refused(app: Starlette) -> None:
    headers = signed(BODY)
    tampered = json.dumps(make_dispatch(callback_url="https://evil.test/hook")).encode()
    assert (await post(app, tampered, headers)).status_code == 401
    assert (await post(app, BODY + b" ", headers)).status_code == 401
    assert (await post(app, BODY, headers)).status_code == 202  # the original still passes


async def test_missing_garbled_and_foreign_signatures_are_refused(app: Starlette) -> None:
    good = signed(BODY)
    cases = {
        "none": {"content-type": "application/json"},
        "another secret": signed(BODY, secret=OTHER),
        "another id": {**good, "webhook-id": f"{QUEUE_ID}.2"},
        "no version": {**good, "webhook-signature": good["webhook-signature"][3:]},
        "garbage": {**good, "webhook-signature": "v1,%%%"},
        "timestamp not a number": {**good, "webhook-timestamp": "soon"},
    }
    for name, headers in cases.items():
        r = await post(app, BODY, headers)
        assert r.status_code == 401, name
    assert (await post(app, b"\xff\xfe", good)).status_code == 401


async def test_without_a_secret_nothing_is_required(sim_settings: Settings,
                                                    respx_mock: respx.MockRouter) -> None:
    respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    app = create_app(sim_settings)
    assert (await post(app, BODY, {"content-type": "application/json"})).status_code == 202
    worker: Worker = app.state.worker
    await worker.close()


def test_accepted_messages_are_forgotten_after_twice_the_tolerance() -> None:
    verifier = DispatchVerifier(SECRET)
    verifier.accept_once("q.1", now=0.0)
    verifier.accept_once("q.2", now=1.0)
    assert len(verifier.seen) == 2
    verifier.accept_once("q.3", now=600.5)
    assert set(verifier.seen) == {"q.2", "q.3"}
