"""Pure view helpers for /ai-queue: formatting, the table, paging links (the chart: chart.py).

No I/O here: the page handlers fetch, these turn values into what the
templates print, and the tests import them directly.  `views.X` names the
helper wherever it lives: text.py (values in words, the stats header, the
pools card), table.py (the queue table, a row's history), links.py (keyset
links, notices).
"""

from aiqueue.web.views.links import (
    Cursor,
    Paging,
    decode_cursor,
    encode_cursor,
    notice_text,
    page_url,
    paging,
    with_params,
)
from aiqueue.web.views.table import (
    PLATFORM_SAID,
    HistoryEntry,
    TableRow,
    fmt_scheduled,
    history_entry,
    processing_seconds,
    row_times,
    table_row,
    waiting_text,
)
from aiqueue.web.views.text import (
    DASH,
    Header,
    PoolRow,
    alert_text,
    circuit_text,
    fmt_age,
    fmt_budget,
    fmt_duration,
    fmt_in_flight,
    fmt_limit,
    fmt_time,
    header,
    pool_rows,
)

__all__ = [
    "DASH", "PLATFORM_SAID", "Cursor", "Header", "HistoryEntry", "Paging", "PoolRow", "TableRow",
    "alert_text", "circuit_text", "decode_cursor", "encode_cursor", "fmt_age", "fmt_budget",
    "fmt_duration", "fmt_in_flight", "fmt_limit", "fmt_scheduled", "fmt_time", "header",
    "history_entry", "notice_text", "page_url", "paging", "pool_rows", "processing_seconds",
    "row_times", "table_row", "waiting_text", "with_params",
]
