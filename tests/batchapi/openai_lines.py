"""OpenAI's batch input file and result lines, as the emulator (openai_api.py) reads and
writes them: the JSONL checks OpenAI documents, and the output- and error-file lines."""

from __future__ import annotations

import json
from typing import Any

from tests.batchapi.common import count_tokens, mark_text, new_id


def validate(data: bytes, endpoint: str, max_requests: int, max_bytes: int
         ) -> tuple[list[dict[str, Any]], str | None, list[dict[str, Any]]]:
    """The file's requests, its model, and what OpenAI would refuse in it."""
    invalid: list[dict[str, Any]] = []
    if len(data) > max_bytes:
        invalid.append({"code": "file_too_large", "message": "The file exceeds 200 MB."})
    lines: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()
    for number, raw in enumerate(data.decode().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            custom_id, body = line["custom_id"], line["body"]
            ok = (isinstance(custom_id, str) and line.get("method") == "POST"
                  and line.get("url") == endpoint and isinstance(body.get("model"), str)
                  and isinstance(body.get("messages"), list))
        except (ValueError, KeyError, TypeError, AttributeError):
            ok = False
        if not ok:
            invalid.append({"code": "invalid_request", "line": number,
                            "message": "This line is not a valid batch request."})
            continue
        if custom_id in seen:
            invalid.append({"code": "duplicate_custom_id", "line": number,
                            "message": "The custom_id for this request is a duplicate."})
        seen.add(custom_id)
        models.add(body["model"])
        lines.append(line)
    if len(lines) > max_requests:
        invalid.append({"code": "too_many_requests",
                        "message": f"A batch holds at most {max_requests} requests."})
    if len(models) > 1:
        invalid.append({"code": "mixed_models",
                        "message": "A batch input file uses one model only."})
    return lines, next(iter(models), None), invalid


def answer_line(line: dict[str, Any]) -> dict[str, Any]:
    """An output line: the chat completion the model would have answered."""
    body = line["body"]
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    text = mark_text(prompt)
    prompt_tokens, completion_tokens = count_tokens(prompt), count_tokens(text)
    completion = {
        "id": new_id("chatcmpl-"), "object": "chat.completion", "created": 0,
        "model": body["model"], "system_fingerprint": None,
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": text, "refusal": None}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }
    return {"id": new_id("batch_req_"), "custom_id": line["custom_id"], "error": None,
            "response": {"status_code": 200, "request_id": new_id("req_"),
                         "body": completion}}


def errored_line(line: dict[str, Any]) -> dict[str, Any]:
    """An error-file line for a request the model failed."""
    return {"id": new_id("batch_req_"), "custom_id": line["custom_id"], "error": None,
            "response": {"status_code": 500, "request_id": new_id("req_"), "body": {
                "error": {"message": "The server had an error processing your request.",
                          "type": "server_error", "param": None, "code": None}}}}
