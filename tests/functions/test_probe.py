"""A probe (`"probe": true`) is answered by calling back a `probe` item, never by a model,
on every entry point: the local server (async and sync), DigitalOcean and Lambda."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx
import pytest
import respx

from functions.ai_mark import do_main, lambda_handler
from functions.ai_mark.items import Marking
from functions.ai_mark.job import Job
from functions.ai_mark.server import create_app
from functions.ai_mark.settings import Settings

from .conftest import CALLBACK_URL

TOKEN = "fn-secret"
PROBE: dict[str, Any] = {"probe": True, "queue_id": "5d0b0c2e-8a57-4f58-9b0e-0b9e6b7f4c11",
                         "attempt": 1, "callback_url": CALLBACK_URL,
                         "callback_token": "probe-token"}


class NoModel:
    """A backend that fails the test if anything asks it to mark."""

    name = "no-model"
    calls = 0

    async def mark(self, job: Job) -> Marking:
        NoModel.calls += 1
        raise AssertionError("a probe must never reach the model")


def called_back(route: respx.Route) -> list[dict[str, Any]]:
    return [item for call in route.calls for item in json.loads(call.request.content)]


def assert_probe_item(items: list[dict[str, Any]]) -> None:
    assert items == [{"queue_id": PROBE["queue_id"], "token": "probe-token", "status": "probe",
                      "probe": {"function": "ai_mark", "version": items[0]["probe"]["version"]}}]


@pytest.fixture
def settings(sim_settings: Settings) -> Settings:
    return dataclasses.replace(sim_settings, function_token=TOKEN)


@respx.mock
@pytest.mark.parametrize("path", ["/mark", "/sync"])
async def test_the_server_answers_a_probe_by_calling_back(settings: Settings, path: str):
    callback = respx.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    app = create_app(settings, backend=NoModel())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://fn.test") as client:
        r = await client.post(path, json=PROBE, headers={"authorization": f"Bearer {TOKEN}"})
        await app.state.worker.drain()
        wrong = await client.post(path, json=PROBE, headers={"authorization": "Bearer nope"})
    assert r.status_code == (202 if path == "/mark" else 200)
    assert r.json()["queue_id"] == PROBE["queue_id"]
    assert_probe_item(called_back(callback))
    assert wrong.status_code == 401  # a probe is authenticated like any dispatch
    assert NoModel.calls == 0


@respx.mock
async def test_digitalocean_answers_a_probe_invoke(settings: Settings):
    callback = respx.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    answer = await do_main.handle(dict(PROBE), settings)
    assert answer["statusCode"] == 202 and answer["body"]["status"] == "probe"
    assert answer["body"]["delivered"] is True
    assert_probe_item(called_back(callback))


@respx.mock
async def test_lambda_answers_a_probe_event(settings: Settings):
    callback = respx.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    answer = await lambda_handler.handle(dict(PROBE), settings)
    assert answer["statusCode"] == 202 and json.loads(answer["body"])["status"] == "probe"
    assert_probe_item(called_back(callback))


@respx.mock
async def test_a_probe_false_is_an_ordinary_dispatch(settings: Settings):
    callback = respx.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    await lambda_handler.handle({**PROBE, "probe": "yes"}, settings)
    (item,) = called_back(callback)
    # Not a probe: no submission, so the usual invalid dispatch answer.
    assert item["status"] == "failed" and item["error"] == "invalid_input"
