"""The OpenAPI components, generated from the wire types (JSON Schema 2020-12, as 3.1 takes).

pydantic writes each model's schema; this module names them as the
description and the client kits know them, and drops what only adds noise
to generated clients (titles, and defaults, which openapi-typescript would
turn into required fields).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from aiqueue.wire import (
    answers,
    calibration,
    canary,
    events,
    holds,
    reads,
    remark,
    requests,
    reviews,
    webhook,
)
from aiqueue.wire.requests import REF

Schema = dict[str, Any]

# Bodies are described as they are validated, answers as they are serialised.
REQUESTS: tuple[type[BaseModel], ...] = (
    requests.EnqueueBody, webhook.WebhookItem, webhook.WebhookUsage, requests.AcceptBody,
    requests.ReplayRequest, requests.FailRequest, remark.RemarkRequest, holds.ClarifyRequest,
)
ANSWERS: tuple[type[BaseModel], ...] = (
    requests.Error, answers.EnqueueAccepted, answers.EnqueueEstimate, answers.ProcessStep,
    answers.WebhookReceipt, answers.QueuePage, answers.RetryAnswer, answers.SubmissionStatus,
    answers.RunProgress, answers.CancelAnswer, reviews.Accepted, reviews.Reverted,
    reviews.RunAccepted, reviews.RunReverted, reviews.ResultHistory, answers.Erased,
    answers.ReplayAnswer, answers.RowDetail, reads.Stats, reads.UsageReport, reads.Health,
    reads.DoctorReport,
    events.MarkingEvent, events.SseEvent, events.RunFinished, events.RowFailed,
    events.RowExpired, events.AlertOpened, events.AlertResolved, events.CalibrationReady,
    events.BudgetWarning, calibration.AgreementReport, calibration.Released,
    canary.CanaryRuns, canary.CanaryRunAnswer,
    remark.RemarkAccepted, remark.RemarkEstimate,
    holds.HeldResults, holds.Clarified, holds.ReviewNeeded,
)
# A class whose OpenAPI name is not its Python name.
RENAMED = {"EnqueueBody": "EnqueueRequest"}


def ref(name: str) -> Schema:
    return {"$ref": REF.format(model=name)}


def components() -> dict[str, Schema]:
    """Every schema the description names, keyed by its component name."""
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        *((m, "validation") for m in REQUESTS), *((m, "serialization") for m in ANSWERS)]
    _, top = models_json_schema(pairs, ref_template=REF)
    schemas = {RENAMED.get(name, name): _tidy(schema) for name, schema in top["$defs"].items()}
    schemas = _renamed_refs(schemas)
    # The webhook takes one item or a batch of them.
    schemas["WebhookBody"] = {"oneOf": [ref("WebhookItem"), {
        "type": "array", "items": ref("WebhookItem"), "minItems": 1,
        "maxItems": webhook.MAX_ITEMS}]}
    return dict(sorted(schemas.items()))


def _tidy(node: Any) -> Any:
    """The schema without titles and defaults; `properties` keep every name."""
    if isinstance(node, list):
        return [_tidy(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _tidy(v) for name, v in value.items()}
        elif key == "description" and isinstance(value, str):
            out[key] = " ".join(value.split())  # a docstring's line breaks are not meant
        elif key not in ("title", "default"):
            out[key] = _tidy(value)
    return out


def _renamed_refs(schemas: dict[str, Schema]) -> dict[str, Schema]:
    text_refs = {REF.format(model=old): REF.format(model=new) for old, new in RENAMED.items()}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: text_refs.get(v, v) if k == "$ref" else walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(n) for n in node]
        return node
    return {name: walk(s) for name, s in schemas.items()}
