"""The API's JSON, each request and answer once, as a type (pydantic models).

- requests.py: the bodies routes take, each field with its rule (rules.py);
- webhook.py: the webhook's items, as the marking function posts them;
- enqueue.py: an enqueue parsed into the queue's command, with the rules that need the clock;
- answers.py, reviews.py, reads.py, events.py: what routes answer and what the app sends;
- base.py: `parse` (the one place a body is validated, one 4xx convention)
  and `dump` (the one place an answer becomes JSON);
- schema.py: the OpenAPI components, generated from these types.
"""

from aiqueue.wire.base import NO_BODY, Wire, dump, no_fields, parse
from aiqueue.wire.enqueue import EnqueueRequest, parse_times
from aiqueue.wire.rules import (
    MAX_IDS,
    parse_assignment_id,
    parse_group,
    parse_idempotency_key,
    parse_kind,
    parse_status,
    parse_uuid,
    payload_json,
)

__all__ = [
    "MAX_IDS", "NO_BODY", "EnqueueRequest", "Wire", "dump", "no_fields", "parse",
    "parse_assignment_id",
    "parse_group", "parse_idempotency_key", "parse_kind", "parse_status", "parse_times",
    "parse_uuid", "payload_json",
]
