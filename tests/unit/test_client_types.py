"""The Python client's typed answers name exactly what the OpenAPI description says."""

from __future__ import annotations

import dataclasses
import typing

import aiqueue_client.notifications as notifications
import aiqueue_client.types as types
import pytest

from aiqueue.web.openapi import document

SCHEMAS = document()["components"]["schemas"]
TYPED = ["EnqueueAccepted", "EnqueueEstimate", "SubmissionStatus", "RunProgress", "Accepted",
         "Reverted", "RunAccepted", "RunReverted", "CancelAnswer", "UsageLine", "UsageTotal",
         "UsageReport", "AppliedResult", "ResultHistory", "Erased", "ReplayAnswer",
         "RowAttempt", "RowResultStatus", "RowDetail", "RemarkAccepted", "RemarkEstimate",
         "HeldRow", "AskedQuestion", "HeldResults", "Clarified"]


@pytest.mark.parametrize("name", TYPED)
def test_a_typed_answer_has_every_required_field_and_no_unknown_one(name: str):
    typed = getattr(types, name)
    schema = SCHEMAS[name]
    assert set(schema["required"]) <= set(typed.__required_keys__), name
    assert set(typed.__annotations__) <= set(schema["properties"]), name


def test_a_live_event_carries_the_described_fields():
    fields = {f.name for f in dataclasses.fields(types.MarkingEvent)} - {"id"}
    assert fields == set(SCHEMAS["MarkingEvent"]["properties"])



def test_every_notification_is_typed_as_described():
    webhooks = document()["webhooks"]
    kinds = typing.get_args(notifications.Notification)
    named = {typing.get_args(typing.get_type_hints(t)["type"])[0]: t for t in kinds}
    assert set(named) == set(webhooks)
    for typed in kinds:
        schema = SCHEMAS[typed.__name__]
        assert set(schema["required"]) <= set(typed.__required_keys__), typed.__name__
        assert set(typed.__annotations__) == set(schema["properties"]), typed.__name__
