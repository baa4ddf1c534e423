"""The field types the API's shapes are made of, with their JSON Schema constraints."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, PlainSerializer, WithJsonSchema

from aiqueue.models.queue import Circuit as Circuit
from aiqueue.models.queue import Status
from aiqueue.models.queue import WaitingFor as WaitingFor

Count = Annotated[int, Field(ge=0)]
# Seconds as a measured figure: null while nothing was measured.
Seconds = Annotated[float, Field(ge=0)] | None
Usd = Annotated[float, Field(ge=0)]
Uuid = UUID
# A moment, serialised as RFC 3339 by isoformat ("+00:00", as the API always wrote it,
# where pydantic would write "Z").
Time = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str, when_used="json"),
                 WithJsonSchema({"type": "string", "format": "date-time"})]
ShortText = Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S")]
# A task kind or a pool, as aiqueue.toml names them.
KindName = Annotated[str, Field(pattern="^[a-z0-9_-]{1,32}$")]
# A JSON object of any fields (said out loud, so generated types let them through).
AnyObject = Annotated[dict[str, Any], Field(json_schema_extra={"additionalProperties": True})]
RowStatus = Status
# What a result was marked under (docs/remark.md).
PAYLOAD_VERSION = ("the payload's version: the hex sha256 the queue stores it under (none: the "
                   "empty payload)")
Review = Literal["unreviewed", "accepted", "reverted"]
SpendCap = Literal["group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day"]
UsageBy = Literal["day", "assignment", "group", "model", "kind", "pool", "lane"]
AlertName = Literal["backlog_age", "stalled", "failure_spike", "latency", "drift"]


def described(text: str, **constraints: Any) -> Any:
    """A Field with a description for the OpenAPI document."""
    return Field(description=text, **constraints)
