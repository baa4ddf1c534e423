"""The reference function's `render` and `parse` modes (the overnight lane): no model is called."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx
import pytest

from functions.ai_mark import do_main, lambda_handler
from functions.ai_mark.items import made_by
from functions.ai_mark.job import parse_dispatch
from functions.ai_mark.modes import answer
from functions.ai_mark.prompt import build_messages
from functions.ai_mark.server import create_app
from functions.ai_mark.settings import Settings
from tests.batchapi.anthropic_api import message_for
from tests.batchapi.openai_lines import answer_line

from .conftest import ANSWER, make_dispatch

TOKEN = "fn-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class NoModel:
    """A backend that fails the test if a mode ever calls a model."""

    name = "no-model"

    async def mark(self, job: Any) -> Any:
        raise AssertionError("render/parse must not call a model")


def jobs(n: int = 2) -> list[dict[str, Any]]:
    return [make_dispatch(queue_id=f"0b6f4a52-6a55-4a8e-9d5e-1f3f1f7c2a1{i}",
                          callback_token=f"tok-{i}") for i in range(n)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_render_builds_the_live_prompt_in_the_providers_shape(provider: str) -> None:
    out = answer({"mode": "render", "provider": provider, "model": "m-1", "jobs": jobs()})
    assert out["items"] == []
    assert [r["queue_id"] for r in out["requests"]] == [j["queue_id"] for j in jobs()]
    live = build_messages(parse_dispatch(jobs()[0]))
    body = out["requests"][0]["body"]
    assert body["model"] == "m-1"
    if provider == "openai":
        assert body["messages"] == live and body["response_format"] == {"type": "json_object"}
    else:
        # The same text, the shared prefix in its own block marked for a 1-hour entry,
        # the answer last.
        assert body["system"] == live[0]["content"]
        [message] = body["messages"]
        prefix, last = message["content"]
        assert prefix["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
        assert "cache_control" not in last and ANSWER in last["text"]
        assert f"{prefix['text']}\n\n{last['text']}" == live[1]["content"]
        assert ANSWER not in prefix["text"]
    # Every batch line's output is capped.
    assert isinstance(body["max_tokens"], int) and 0 < body["max_tokens"] <= 4096
    assert ANSWER in json.dumps(body)


def test_render_sends_the_cache_key_and_orders_prefix_first() -> None:
    keyed = [{**j, "cache_key": "ab" * 32} for j in jobs()]
    out = answer({"mode": "render", "provider": "openai", "model": "m-1", "jobs": keyed})
    body = out["requests"][0]["body"]
    assert body["prompt_cache_key"] == "ab" * 32
    text = body["messages"][1]["content"]
    assert text.index("Rubric") < text.index(ANSWER)
    # Not a key: left out rather than sent on.
    odd = [{**j, "cache_key": "not a key"} for j in jobs()]
    body = answer({"mode": "render", "provider": "openai", "model": "m-1",
                   "jobs": odd})["requests"][0]["body"]
    assert "prompt_cache_key" not in body


def test_parse_relays_the_providers_cache_counts() -> None:
    job = jobs(1)[0]
    reply = {"content": [{"type": "text", "text": '{"score": 7, "feedback": "Good."}'}],
             "model": "claude-x", "usage": {"input_tokens": 400, "output_tokens": 60,
                                            "cache_read_input_tokens": 2000,
                                            "cache_creation_input_tokens": 0}}
    [item] = answer({"mode": "parse", "provider": "anthropic", "responses": [
        {"queue_id": job["queue_id"], "callback_token": "t", "response": reply}]})["items"]
    assert item["usage"] == {"model": "claude-x", "prompt_tokens": 2400,
                             "completion_tokens": 60, "cache_read_tokens": 2000,
                             "cache_write_tokens": 0, **made_by("anthropic")}
    chat = {"choices": [{"message": {"content": '{"score": 7, "feedback": "Good."}'}}],
            "model": "gpt-x", "usage": {"prompt_tokens": 2400, "completion_tokens": 60,
                                        "prompt_tokens_details": {"cached_tokens": 1920}}}
    [item] = answer({"mode": "parse", "provider": "openai", "responses": [
        {"queue_id": job["queue_id"], "callback_token": "t", "response": chat}]})["items"]
    assert item["usage"]["cache_read_tokens"] == 1920


def test_render_fails_a_job_that_cannot_be_marked_for_good() -> None:
    bad = make_dispatch(submission={"id": "s", "content": "   "})
    out = answer({"mode": "render", "provider": "openai", "model": "m", "jobs": [bad]})
    assert out["requests"] == []
    assert out["items"] == [{"queue_id": bad["queue_id"], "token": bad["callback_token"],
                             "status": "failed", "error": "invalid_input",
                             "retryable": False}]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_parse_reads_the_emulated_providers_answer(provider: str) -> None:
    rendered = answer({"mode": "render", "provider": provider, "model": "m-1",
                       "jobs": jobs(1)})["requests"][0]
    if provider == "openai":
        response = answer_line({"custom_id": "x", "body": rendered["body"]})["response"]["body"]
    else:
        response = message_for(rendered["body"])
    job = jobs(1)[0]
    out = answer({"mode": "parse", "provider": provider, "responses": [
        {"queue_id": job["queue_id"], "callback_token": "tok-0", "response": response,
         "job": job}]})
    [item] = out["items"]
    assert item["status"] == "completed" and item["token"] == "tok-0"
    assert item["result"]["score"] == 5 and item["result"]["max_score"] == 10
    assert item["result"]["feedback"]
    assert item["usage"]["model"] == "m-1" and item["usage"]["prompt_tokens"] > 0
    assert item["usage"]["completion_tokens"] > 0


def openai_reply(text: str) -> dict[str, Any]:
    return {"model": "gpt", "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4}}


def test_parse_checks_the_score_and_fails_malformed_replies_retryably() -> None:
    job = jobs(1)[0]
    entries = [
        {"queue_id": "a", "callback_token": "t", "response": openai_reply("no json"),
         "job": job},
        {"queue_id": "b", "callback_token": "t", "job": job,
         "response": openai_reply('{"score": 11, "feedback": "x"}')},
        {"queue_id": "c", "callback_token": "t", "response": {"choices": []}},
        {"queue_id": "d", "callback_token": "t",
         "response": openai_reply('{"score": 3, "feedback": "fine"}')},
    ]
    items = answer({"mode": "parse", "provider": "openai", "responses": entries})["items"]
    assert [(i["status"], i.get("error"), i.get("retryable")) for i in items] == [
        ("failed", "malformed_model_output", True), ("failed", "malformed_model_output", True),
        ("failed", "model_bad_response", True), ("completed", None, None)]
    assert items[3]["result"] == {"score": 3, "feedback": "fine"}  # no maximum known


def test_anthropic_text_blocks_are_joined() -> None:
    reply = {"model": "claude", "content": [{"type": "text", "text": '{"score": 2,'},
                                            {"type": "text", "text": ' "feedback": "ok"}'}],
             "usage": {"input_tokens": 9, "output_tokens": 5}}
    [item] = answer({"mode": "parse", "provider": "anthropic", "responses": [
        {"queue_id": "q", "callback_token": "t", "response": reply}]})["items"]
    assert item["result"] == {"score": 2, "feedback": "ok"}
    assert item["usage"] == {"model": "claude", "prompt_tokens": 9, "completion_tokens": 5,
                             **made_by("anthropic")}


@pytest.fixture
def settings(sim_settings: Settings) -> Settings:
    return dataclasses.replace(sim_settings, function_token=TOKEN)


async def post(settings: Settings, body: Any, path: str = "/",
               headers: dict[str, str] | None = None) -> httpx.Response:
    app = create_app(settings, backend=NoModel())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fn") as client:
        return await client.post(path, json=body, headers=AUTH if headers is None else headers)


@pytest.mark.parametrize("path", ["/", "/sync"])
async def test_the_server_answers_modes_at_once_with_its_usual_auth(
        settings: Settings, path: str) -> None:
    body = {"mode": "render", "provider": "anthropic", "model": "m", "jobs": jobs()}
    response = await post(settings, body, path)
    assert response.status_code == 200 and len(response.json()["requests"]) == 2
    assert (await post(settings, body, path, headers={})).status_code == 401
    bad = await post(settings, {"mode": "shred", "provider": "openai"}, path)
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_mode"


async def test_digitalocean_and_lambda_web_entry_points_answer_modes(settings: Settings) -> None:
    body = {"mode": "render", "provider": "openai", "model": "m", "jobs": jobs(1)}
    do = await do_main.handle({"http": {"method": "POST", "headers": AUTH,
                                        "body": json.dumps(body)}}, settings)
    assert do["statusCode"] == 200 and len(do["body"]["requests"]) == 1
    aws = await lambda_handler.handle({"requestContext": {"http": {"method": "POST"}},
                                       "headers": AUTH, "body": json.dumps(body)}, settings)
    assert aws["statusCode"] == 200 and len(json.loads(aws["body"])["requests"]) == 1
    denied = await lambda_handler.handle({"requestContext": {"http": {"method": "POST"}},
                                          "headers": {}, "body": json.dumps(body)}, settings)
    assert denied["statusCode"] == 401
