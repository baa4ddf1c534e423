"""The audit export: a period's attempts and results, streamed as CSV or JSONL.

Content-free by default: ids, times, outcomes, error codes, marks (score,
max_score), tokens and cost.  `include=feedback` adds the AI's feedback on
result lines.  Never the submission's answer, the result object, the usage
object or the payload.  Pages are read by keyset (db/records.py), so memory
and every database call stay bounded however long the period.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from aiqueue import logs
from aiqueue.errors import Invalid
from aiqueue.models.records import ExportLine
from aiqueue.runtime import Runtime
from aiqueue.wire.rules import in_utc

Format = Literal["csv", "jsonl"]
PAGE = 2000
DEFAULT_DAYS = 30
MEDIA_TYPES: dict[Format, str] = {"csv": "text/csv; charset=utf-8",
                                  "jsonl": "application/x-ndjson"}
# A spreadsheet runs a cell that starts with one of these as a formula.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class ExportRequest:
    """A validated export query."""

    since: datetime
    until: datetime
    format: Format = "csv"
    feedback: bool = False

    @classmethod
    def parse(cls, query: Mapping[str, str], now: datetime) -> ExportRequest:
        """from/to (RFC 3339 or YYYY-MM-DD; default the last 30 days), format, include."""
        until = _moment(query.get("to"), "to") or now
        since = _moment(query.get("from"), "from") or until - timedelta(days=DEFAULT_DAYS)
        if since >= until:
            raise Invalid("from must be before to")
        fmt = query.get("format") or "csv"
        if fmt not in ("csv", "jsonl"):
            raise Invalid("format must be csv or jsonl")
        include = {part.strip() for part in (query.get("include") or "").split(",")} - {""}
        if include - {"feedback"}:
            raise Invalid("include may only name feedback")
        return cls(since, until, "csv" if fmt == "csv" else "jsonl", "feedback" in include)

    @property
    def columns(self) -> tuple[str, ...]:
        return (*ExportLine.COLUMNS, "feedback") if self.feedback else ExportLine.COLUMNS

    def filename(self) -> str:
        return (f"aiqueue-export-{self.since:%Y%m%d}-{self.until:%Y%m%d}."
                f"{'csv' if self.format == 'csv' else 'jsonl'}")


def _moment(value: str | None, name: str) -> datetime | None:
    if not value:
        return None
    problem = f"{name} must be an RFC 3339 time or a date (YYYY-MM-DD)"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(problem) from None
    return in_utc(moment, problem)


Page = Callable[[int], Awaitable[list[ExportLine]]]


async def _pages(page: Page) -> AsyncIterator[list[ExportLine]]:
    after = 0
    while True:
        lines = await page(after)
        if lines:
            yield lines
        if len(lines) < PAGE:
            return
        after = lines[-1].key


def _cell(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def _render(lines: list[ExportLine], request: ExportRequest) -> bytes:
    if request.format == "jsonl":
        return "".join(json.dumps({c: line.fields.get(c) for c in request.columns}) + "\n"
                       for line in lines).encode()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for line in lines:
        writer.writerow([_cell(line.fields.get(c)) for c in request.columns])
    return out.getvalue().encode()


async def stream(rt: Runtime, request: ExportRequest) -> AsyncIterator[bytes]:
    """The export's bytes: the header (CSV), then every attempt, then every result."""
    store, r = rt.store, request
    if r.format == "csv":
        yield (",".join(r.columns) + "\r\n").encode()
    count = 0
    sources: list[Page] = [
        lambda after: store.export_attempts(r.since, r.until, after, PAGE),
        lambda after: store.export_results(r.since, r.until, after, PAGE, r.feedback),
    ]
    for source in sources:
        async for lines in _pages(source):
            count += len(lines)
            yield _render(lines, r)
    logs.event("export", count=count, mode=r.format)
