"""Keyset paging links and the notices after an action."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit
from uuid import UUID

from aiqueue.models import PageCursor, QueueRow

Cursor = PageCursor


# -- keyset paging ----------------------------------------------------------


def encode_cursor(row: QueueRow) -> str:
    """A row's position in newest-first order, for ?after= / ?before=."""
    # Exact microseconds, not the float: the cursor must compare equal to the row.
    delta = row.created_at - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"{micros}_{row.queue_id}"


def decode_cursor(value: str | None) -> Cursor | None:
    """The (created_at, queue_id) of a cursor, or None when absent or malformed."""
    if not value or len(value) > 80:
        return None
    micros, _, queue_id = value.partition("_")
    try:
        at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(micros))
        return at, UUID(queue_id)
    except (ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class Paging:
    """Links to the newest page, the newer page and the older page (None: no such page)."""

    newest: str | None
    newer: str | None
    older: str | None


def page_url(path: str, params: Mapping[str, str | None]) -> str:
    """`path` with the non-empty params as a query string."""
    kept = {k: v for k, v in params.items() if v}
    return f"{path}?{urlencode(kept)}" if kept else path


def with_params(url: str, params: Mapping[str, str]) -> str:
    """`url` with `params` set (replacing any notice of an earlier action)."""
    parts = urlsplit(url)
    drop = {"notice", "n", "row", *params}
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in drop]
    query = urlencode([*kept, *((k, v) for k, v in params.items() if v)])
    return f"{parts.path}?{query}" if query else parts.path


def paging(
    path: str,
    filters: Mapping[str, str | None],
    rows: Sequence[QueueRow],
    *,
    has_newer: bool,
    has_older: bool,
) -> Paging:
    """Keyset links around the rows shown (newest first)."""
    if not rows:
        return Paging(newest=page_url(path, filters) if has_newer else None, newer=None,
                      older=None)
    newer = page_url(path, {**filters, "before": encode_cursor(rows[0])}) if has_newer else None
    older = page_url(path, {**filters, "after": encode_cursor(rows[-1])}) if has_older else None
    return Paging(newest=page_url(path, filters) if has_newer else None, newer=newer,
                  older=older)


# -- notices after an action --------------------------------------------------

_NOTICES = {
    "retried": "Row {id} is pending again with fresh attempts.",
    "not_failed": "Row {id} is not failed any more; nothing to retry.",
    "retried_all": "{n} failed row(s) are pending again.",
    "cancelled": "Row {id} is cancelled.",
    "not_pending": "Row {id} is not pending; nothing to cancel.",
    "cancelled_all": "{n} pending row(s) cancelled.",
    "paused": "Dispatch paused. Rows stay pending until you resume.",
    "resumed": "Dispatch resumed.",
    "missing_assignment": "Name an assignment to cancel its pending rows.",
    "missing": "That row no longer exists.",
    "accepted": "Row {id}'s result is accepted.",
    "reverted": "Row {id}'s result is reverted: the submission has its earlier mark again.",
    "superseded": "Row {id} was not reverted: a later result has been applied since.",
    "not_completed": "Row {id} has no applied result to review (or it was reverted).",
}


def notice_text(code: str | None, *, n: str | None = None, row: str | None = None) -> str | None:
    """The sentence for a notice code in the redirect after an action."""
    template = _NOTICES.get(code or "")
    if template is None:
        return None
    count = n if n and n.isdigit() else "0"
    short = (row or "")[:8] if row and all(c in "0123456789abcdef-" for c in row) else "?"
    return template.format(n=count, id=short)
