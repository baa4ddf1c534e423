"""Can PostgreSQL store this value?  Checked at the edge so bad input is a 4xx, never a 5xx."""

from __future__ import annotations

import math

MAX_JSON_DEPTH = 64


def unstorable(value: object, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why `value` (a parsed JSON value or a string) cannot go into text/jsonb, or None.

    PostgreSQL refuses NUL characters in text and jsonb, unpaired UTF-16
    surrogates (which Python's json module lets through) and NaN/Infinity in
    jsonb; very deep nesting is refused here before it can exhaust a stack.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"is nested deeper than {max_depth} levels"
        if isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL character"
            if not _utf8(item):
                return "contains an unpaired surrogate"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "contains NaN or Infinity"
        elif isinstance(item, dict):
            stack.extend((k, depth) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
