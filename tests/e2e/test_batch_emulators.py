"""The batch API emulators, driven through the providers' official SDKs.

Every answer is also validated strictly against the SDK's own types (the SDKs
build their models without validation, so a wrong field would otherwise pass).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any, TypeVar

import anthropic
import openai
import pytest
from anthropic.types.messages import (
    DeletedMessageBatch,
    MessageBatch,
    MessageBatchIndividualResponse,
)
from openai.types import Batch, FileDeleted, FileObject
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from tests.batchapi.anthropic_api import AnthropicBatchAPI
from tests.batchapi.common import Behaviour, Clock
from tests.batchapi.openai_api import OpenAIBatchAPI
from tests.e2e.servers import free_port, run_asgi

pytestmark = pytest.mark.e2e

PROMPT = [{"role": "system", "content": "Reply shaped {\"score\": <number from 0 to 10>}"},
          {"role": "user", "content": "Student answer: photosynthesis."}]

Model = TypeVar("Model", bound=BaseModel)


def strict(model: type[Model], raw: Any) -> Model:
    """The answer validated by the SDK type (raises on any field the SDK can't read)."""
    http = getattr(raw, "http_response", None)
    data = json.loads(http.content) if http is not None else raw
    return model.model_validate(data, strict=False)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def openai_emu(clock: Clock) -> Iterator[tuple[OpenAIBatchAPI, openai.AsyncOpenAI]]:
    fates: dict[int, Behaviour] = {}
    emu = OpenAIBatchAPI(behaviours=lambda n: fates.get(n, Behaviour(delay=5)), clock=clock,
                         window_seconds=60)
    emu.fates = fates  # type: ignore[attr-defined]
    port = free_port()
    with run_asgi(emu.app, port):
        yield emu, openai.AsyncOpenAI(api_key=emu.key, base_url=f"http://127.0.0.1:{port}/v1",
                                      max_retries=0)


@pytest.fixture
def anthropic_emu(clock: Clock) -> Iterator[tuple[AnthropicBatchAPI, anthropic.AsyncAnthropic]]:
    fates: dict[int, Behaviour] = {}
    emu = AnthropicBatchAPI(behaviours=lambda n: fates.get(n, Behaviour(delay=5)), clock=clock,
                            window_seconds=60)
    emu.fates = fates  # type: ignore[attr-defined]
    port = free_port()
    with run_asgi(emu.app, port):
        yield emu, anthropic.AsyncAnthropic(api_key=emu.key,
                                            base_url=f"http://127.0.0.1:{port}", max_retries=0)


def jsonl(ids: list[str], model: str = "gpt-4o-mini") -> bytes:
    lines = [{"custom_id": i, "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": model, "messages": PROMPT}} for i in ids]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


async def openai_batch(client: openai.AsyncOpenAI, ids: list[str]) -> Batch:
    raw = await client.files.with_raw_response.create(
        file=("batch.jsonl", io.BytesIO(jsonl(ids))), purpose="batch")
    upload = strict(FileObject, raw)
    assert upload.purpose == "batch" and upload.id.startswith("file-")
    created = await client.batches.with_raw_response.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    return strict(Batch, created)


async def openai_look(client: openai.AsyncOpenAI, batch_id: str) -> Batch:
    return strict(Batch, await client.batches.with_raw_response.retrieve(batch_id))


async def openai_lines(client: openai.AsyncOpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    content = await client.files.content(file_id)
    return [json.loads(line) for line in content.text.splitlines()]


async def test_openai_healthy_batch_round_trip(openai_emu: Any, clock: Clock) -> None:
    emu, client = openai_emu
    batch = await openai_batch(client, ["q1-1", "q2-1", "q3-1"])
    assert batch.status == "validating" and batch.id.startswith("batch_")
    assert (await openai_look(client, batch.id)).status == "in_progress"
    clock.advance(6)
    done = await openai_look(client, batch.id)
    assert done.status == "completed" and done.error_file_id is None
    assert done.request_counts is not None and done.request_counts.completed == 3
    lines = await openai_lines(client, done.output_file_id)
    assert sorted(line["custom_id"] for line in lines) == ["q1-1", "q2-1", "q3-1"]
    for line in lines:
        completion = ChatCompletion.model_validate(line["response"]["body"])
        assert json.loads(completion.choices[0].message.content or "") ["score"] == 5
        assert completion.usage is not None and completion.usage.prompt_tokens > 0
    listed = await client.batches.list()
    assert [b.id for b in listed.data] == [batch.id]
    for file_id in (batch.input_file_id, done.output_file_id):
        assert file_id is not None
        strict(FileDeleted, await client.files.with_raw_response.delete(file_id))
    assert emu.held() == {"files": [], "open_batches": []}


async def test_openai_failure_modes(openai_emu: Any, clock: Clock) -> None:
    emu, client = openai_emu
    emu.fates[1] = Behaviour(fail=True)
    emu.fates[2] = Behaviour(delay=1, line=lambda cid, body: "error")
    emu.fates[3] = Behaviour(delay=1, line=lambda cid, body: "expire" if cid == "b-1" else "ok")
    emu.fates[4] = Behaviour(stall=True)
    failed = await openai_batch(client, ["a-1"])
    only_errors = await openai_batch(client, ["a-1", "b-1"])
    partial = await openai_batch(client, ["a-1", "b-1"])
    stalled = await openai_batch(client, ["a-1"])
    looked = await openai_look(client, failed.id)
    assert looked.status == "failed" and looked.errors and looked.errors.data
    clock.advance(2)
    ended = await openai_look(client, only_errors.id)
    # "completed" with only an error file: the trap users of the API report.
    assert ended.status == "completed" and ended.output_file_id is None
    assert {line["response"]["status_code"] for line in
            await openai_lines(client, ended.error_file_id)} == {500}
    assert (await openai_look(client, partial.id)).status == "in_progress"
    strict(Batch, await client.batches.with_raw_response.cancel(stalled.id))
    assert (await openai_look(client, stalled.id)).status == "cancelled"
    clock.advance(60)
    expired = await openai_look(client, partial.id)
    assert expired.status == "expired"
    assert [line["custom_id"] for line in await openai_lines(client, expired.output_file_id)] \
        == ["a-1"]
    errors = await openai_lines(client, expired.error_file_id)
    assert [(e["custom_id"], e["error"]["code"]) for e in errors] == [("b-1", "batch_expired")]
    assert emu.held()["open_batches"] == []
    assert len(emu.held()["files"]) == 4 + 3  # four inputs, three result files


async def test_openai_refuses_what_openai_refuses(openai_emu: Any) -> None:
    emu, client = openai_emu
    with pytest.raises(openai.AuthenticationError):
        await openai.AsyncOpenAI(api_key="wrong", base_url=str(client.base_url),
                                 max_retries=0).batches.list()
    upload = await client.files.create(file=("x.jsonl", io.BytesIO(
        jsonl(["same", "same"]) + jsonl(["other"], model="gpt-4o"))), purpose="batch")
    batch = await client.batches.create(input_file_id=upload.id,
                                        endpoint="/v1/chat/completions", completion_window="24h")
    looked = await openai_look(client, batch.id)
    assert looked.status == "failed" and looked.errors is not None
    assert {e.code for e in looked.errors.data or []} == {"duplicate_custom_id", "mixed_models"}


def requests(ids: list[str]) -> list[dict[str, Any]]:
    return [{"custom_id": i, "params": {"model": "claude-haiku-4-5", "max_tokens": 512,
                                        "system": PROMPT[0]["content"],
                                        "messages": [PROMPT[1]]}} for i in ids]


async def anthropic_look(client: anthropic.AsyncAnthropic, batch_id: str) -> MessageBatch:
    return strict(MessageBatch,
                  await client.messages.batches.with_raw_response.retrieve(batch_id))


async def anthropic_results(client: anthropic.AsyncAnthropic, batch_id: str,
                            ) -> dict[str, MessageBatchIndividualResponse]:
    out = {}
    async for line in await client.messages.batches.results(batch_id):
        out[line.custom_id] = strict(MessageBatchIndividualResponse, line.model_dump())
    return out


async def test_anthropic_healthy_batch_round_trip(anthropic_emu: Any, clock: Clock) -> None:
    emu, client = anthropic_emu
    raw = await client.messages.batches.with_raw_response.create(
        requests=requests(["q1-1", "q2-1"]))
    batch = strict(MessageBatch, raw)
    assert batch.processing_status == "in_progress" and batch.id.startswith("msgbatch_")
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.batches.delete(batch.id)  # still processing
    clock.advance(6)
    ended = await anthropic_look(client, batch.id)
    assert ended.processing_status == "ended" and ended.request_counts.succeeded == 2
    results = await anthropic_results(client, batch.id)
    assert set(results) == {"q1-1", "q2-1"}
    for line in results.values():
        assert line.result.type == "succeeded"
        text = line.result.message.content[0]
        assert text.type == "text" and json.loads(text.text)["score"] == 5
        assert line.result.message.usage.input_tokens > 0
    strict(DeletedMessageBatch, await client.messages.batches.with_raw_response.delete(batch.id))
    assert emu.held() == {"batches": []}


async def test_anthropic_failure_modes(anthropic_emu: Any, clock: Clock) -> None:
    emu, client = anthropic_emu
    emu.fates[1] = Behaviour(fail=True)
    emu.fates[2] = Behaviour(delay=1, line=lambda cid, p: "error" if cid == "a-1" else "ok")
    emu.fates[3] = Behaviour(delay=1, line=lambda cid, p: "expire" if cid == "b-1" else "ok")
    emu.fates[4] = Behaviour(stall=True)
    ids = []
    for _ in range(4):
        created = await client.messages.batches.create(
            requests=requests(["a-1", "b-1"]))
        ids.append(created.id)
    failed, errored, partial, stalled = ids
    assert {r.result.type for r in (await anthropic_results(client, failed)).values()} \
        == {"errored"}
    clock.advance(2)
    assert {k: r.result.type for k, r in (await anthropic_results(client, errored)).items()} \
        == {"a-1": "errored", "b-1": "succeeded"}
    canceling = await client.messages.batches.cancel(stalled)
    assert canceling.processing_status in {"canceling", "ended"}
    assert {r.result.type for r in (await anthropic_results(client, stalled)).values()} \
        == {"canceled"}
    clock.advance(60)
    assert {k: r.result.type for k, r in (await anthropic_results(client, partial)).items()} \
        == {"a-1": "succeeded", "b-1": "expired"}
    for batch_id in ids:
        await client.messages.batches.delete(batch_id)
    assert emu.held() == {"batches": []}


async def test_anthropic_refuses_what_anthropic_refuses(anthropic_emu: Any) -> None:
    emu, client = anthropic_emu
    for bad in (["has space"], ["x" * 65], ["dup", "dup"], []):
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.batches.create(requests=requests(bad))
    with pytest.raises(anthropic.AuthenticationError):
        await anthropic.AsyncAnthropic(api_key="wrong", base_url=str(client.base_url),
                                       max_retries=0).messages.batches.list()
    assert emu.held() == {"batches": []}
