"""The provider's prompt cache in a result's usage (docs/prompt-cache.md): its counts read in our
spelling and the providers'.

The rest lives in SQL (db/sql/functions/45_cache.sql): warm-up and locality
within fair turns, and the input at billed tokens (aiqueue_cache_billed),
which cost, turns by tokens and the spend windows are charged at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _count(value: object) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e15:
        return round(value)
    return None


def counts(usage: Mapping[str, Any]) -> dict[str, int]:
    """The token counts of a usage object in our spelling, whichever spelling it came in.

    Ours: prompt_tokens (all input), completion_tokens, and cache_read_tokens /
    cache_write_tokens, parts of prompt_tokens.  OpenAI's:
    prompt_tokens_details.cached_tokens (a part of prompt_tokens).  Anthropic's:
    input_tokens (which leaves the cache out), cache_read_input_tokens,
    cache_creation_input_tokens, output_tokens.
    """
    found: dict[str, int] = {}
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    reads = _count(usage.get("cache_read_tokens"))
    writes = _count(usage.get("cache_write_tokens"))
    anthropic_reads = _count(usage.get("cache_read_input_tokens"))
    anthropic_writes = _count(usage.get("cache_creation_input_tokens"))
    prompt = _count(usage.get("prompt_tokens"))
    if prompt is None and _count(usage.get("input_tokens")) is not None:
        # Anthropic's input_tokens counts only what follows the last cache mark.
        prompt = (_count(usage.get("input_tokens")) or 0) + (anthropic_reads or 0) + (
            anthropic_writes or 0)
    completion = _count(usage.get("completion_tokens"))
    if completion is None:
        completion = _count(usage.get("output_tokens"))
    reads = next((v for v in (reads, cached, anthropic_reads) if v is not None), None)
    writes = writes if writes is not None else anthropic_writes
    for key, value in (("prompt_tokens", prompt), ("completion_tokens", completion),
                       ("cache_read_tokens", reads), ("cache_write_tokens", writes)):
        if value is not None:
            found[key] = value
    return found
