"""The overnight lane's two synchronous modes: `render` and `parse` (no model is called).

The app never builds a prompt: it asks this function to `render` each job
as the provider's batch request (the same prompt the live path sends), and
later to `parse` each provider answer into the webhook item the live path
would have posted.

- `{"mode": "render", "provider", "model", "jobs": [dispatch bodies]}` →
  `{"requests": [{"queue_id", "body"}], "items": [failed items of jobs that
  can't be rendered]}`;
- `{"mode": "parse", "provider", "responses": [{"queue_id", "callback_token",
  "response", "job"?}]}` → `{"items": [webhook items]}`. `job` (the row's
  dispatch body) gives the maximum score to check the mark against; without
  it, a `max_score` in the model's reply is used, else none is checked.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from typing import Any

from .anthropic_backend import MAX_TOKENS, messages_body, usage_counts
from .errors import InvalidDispatch, MalformedOutput
from .invoke import HttpError
from .items import Item, failed_item, made_by
from .job import Job, Score, parse_dispatch, safe_id
from .prompt import build_messages, parse_criteria, parse_marking

log = logging.getLogger(__name__)

MODES = ("render", "parse")
PROVIDERS = ("openai", "anthropic")


def is_mode(body: Mapping[str, Any]) -> bool:
    """A render or parse request (a dispatch has no `mode`)."""
    return isinstance(body, Mapping) and "mode" in body


def answer(body: Mapping[str, Any]) -> dict[str, Any]:
    """Answer a render or parse request; raise HttpError(422) for a malformed one."""
    mode, provider = body.get("mode"), body.get("provider")
    if mode not in MODES:
        raise HttpError(422, "invalid_mode", 'mode must be "render" or "parse"')
    if provider not in PROVIDERS:
        raise HttpError(422, "invalid_mode", 'provider must be "openai" or "anthropic"')
    if mode == "render":
        return render(str(provider), body.get("model"), body.get("jobs"))
    return parse(str(provider), body.get("responses"))


def render(provider: str, model: object, jobs: object) -> dict[str, Any]:
    """Each job as the provider's request body."""
    if not isinstance(model, str) or not model:
        raise HttpError(422, "invalid_mode", "model must be a non-empty string")
    if not isinstance(jobs, list):
        raise HttpError(422, "invalid_mode", "jobs must be a list of dispatch bodies")
    requests, items = [], []
    for dispatch in jobs:
        try:
            job = parse_dispatch(dispatch)
        except InvalidDispatch as exc:
            qid = dispatch.get("queue_id") if isinstance(dispatch, Mapping) else None
            token = dispatch.get("callback_token") if isinstance(dispatch, Mapping) else None
            log.warning("render: invalid job queue_id=%s field=%s", safe_id(qid), exc.field)
            # Retrying the same job cannot fix its fields (as on the live path).
            items.append(failed_item(qid, token, "invalid_input", retryable=False))
            continue
        requests.append({"queue_id": job.queue_id, "body": request_body(provider, model, job)})
    return {"requests": requests, "items": items}


def request_body(provider: str, model: str, job: Job) -> dict[str, Any]:
    """The provider's request for `job`: the live path's prompt, in its API's shape.

    The shared prefix is cached: OpenAI routes by `prompt_cache_key`; Anthropic's
    prefix block is marked for a 1-hour entry (a batch's requests may run an hour
    apart), and its cached reads stack with the batch discount.
    """
    if provider == "openai":
        # Capped as the live Anthropic path is: a batch line that runs on bills its
        # whole output, hours later, with nobody watching.
        body: dict[str, Any] = {"model": model, "messages": build_messages(job),
                                "response_format": {"type": "json_object"}, "temperature": 0,
                                "max_tokens": MAX_TOKENS}
        if job.cache_key is not None:
            body["prompt_cache_key"] = job.cache_key
        return body
    return messages_body(job, model, ttl="1h")


def parse(provider: str, responses: object) -> dict[str, Any]:
    """Each provider answer as the webhook item the live path would have posted."""
    if not isinstance(responses, list):
        raise HttpError(422, "invalid_mode", "responses must be a list")
    items = []
    for entry in responses:
        if not isinstance(entry, Mapping):
            raise HttpError(422, "invalid_mode", "each response must be an object")
        for field in ("queue_id", "callback_token"):
            if not isinstance(entry.get(field), str) or not entry[field]:
                raise HttpError(422, "invalid_mode", f"{field} must be a non-empty string")
        items.append(_item(provider, entry))
    return {"items": items}


def _item(provider: str, entry: Mapping[str, Any]) -> Item:
    queue_id, token = entry["queue_id"], entry["callback_token"]
    response = entry.get("response")
    reply = _reply(provider, response) if isinstance(response, Mapping) else None
    if reply is None:
        return failed_item(queue_id, token, "model_bad_response", retryable=True)
    text, usage = reply
    max_score = _max_score(entry.get("job"), text)
    try:
        score, feedback = parse_marking(text, max_score)
    except MalformedOutput:
        # The live path would ask once for a repair; here the next attempt does.
        log.warning("parse: malformed model output queue_id=%s", safe_id(queue_id))
        return failed_item(queue_id, token, "malformed_model_output", retryable=True)
    result: dict[str, Any] = {"score": score, "feedback": feedback}
    if not math.isinf(max_score):
        result = {"score": score, "max_score": max_score, "feedback": feedback}
    job = _job(entry.get("job"))
    criteria = parse_criteria(text, job) if job is not None else ()
    if criteria:
        result["criteria"] = [{"id": cid, "score": s, "max_score": most}
                              for cid, s, most in criteria]
    return {"queue_id": queue_id, "token": token, "status": "completed", "result": result,
            "usage": {**usage, **made_by(provider)}}


def _reply(provider: str, response: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(text, usage) of a chat completion or a message; the usage in the queue's spelling,
    with the provider's cache counts."""
    raw_usage = response.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
    model = response.get("model") if isinstance(response.get("model"), str) else "unknown"
    if provider == "openai":
        choices = response.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, Mapping) else None
        text = message.get("content") if isinstance(message, Mapping) else None
        found = {"model": str(model), "prompt_tokens": _count(usage.get("prompt_tokens")),
                 "completion_tokens": _count(usage.get("completion_tokens"))}
        details = usage.get("prompt_tokens_details")
        if isinstance(details, Mapping) and "cached_tokens" in details:
            found["cache_read_tokens"] = _count(details["cached_tokens"])
    else:
        blocks = response.get("content")
        texts = [b.get("text") for b in blocks if isinstance(b, Mapping)
                 and b.get("type") == "text"] if isinstance(blocks, list) else []
        text = "".join(t for t in texts if isinstance(t, str)) if texts else None
        prompt, completion, reads, writes = usage_counts(dict(usage))
        found = {"model": str(model), "prompt_tokens": prompt, "completion_tokens": completion}
        # Relayed when the provider reports them (Anthropic always does).
        if "cache_read_input_tokens" in usage:
            found["cache_read_tokens"] = reads
        if "cache_creation_input_tokens" in usage:
            found["cache_write_tokens"] = writes
    if not isinstance(text, str):
        return None
    return text, found


def _job(job: object) -> Job | None:
    """The dispatch a batch line was made from, when it came back with it."""
    if not isinstance(job, Mapping):
        return None
    try:
        return parse_dispatch(job)
    except InvalidDispatch:
        return None


def _max_score(job: object, text: str) -> Score:
    """The maximum to check the score against: the job's, else the reply's, else none."""
    if isinstance(job, Mapping):
        try:
            return parse_dispatch(job).max_score
        except InvalidDispatch:
            pass
    try:
        declared = json.loads(text[text.find("{"): text.rfind("}") + 1]).get("max_score")
    except (ValueError, AttributeError):
        declared = None
    if isinstance(declared, int | float) and not isinstance(declared, bool) and declared > 0:
        return declared
    return math.inf


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
