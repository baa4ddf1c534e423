"""The provider's prompt cache in a result's usage (CONTRACT §10a): its counts read in our
spelling and the providers', and the input charged at billed tokens.

The scheduling itself (warm-up, locality within fair turns) lives in SQL
(db/sql/functions/45_cache.sql); this module is the one place a result's
billed tokens are computed: cost, turns by tokens and the spend windows all
read `billed_prompt_tokens` and the cost priced from it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from aiqueue.queue.spend import priced
from aiqueue.settings import ModelPrice
from aiqueue.settings.kinds import DEFAULT_POOL, QueueConfig
from aiqueue.settings.prompt_cache import PromptCache


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


def cache_of(queue: QueueConfig, model: str) -> PromptCache:
    """The write and read factors a result of `model` is billed at: those of the pool that
    prices it (a model has one price, so one pool's terms), else the default pool's."""
    for pool in queue.pools.values():
        if model in pool.prices:
            return pool.prompt_cache
    default = queue.pools.get(DEFAULT_POOL)
    return default.prompt_cache if default is not None else PromptCache()


def bill(usage: dict[str, Any] | None, queue: QueueConfig,
         prices: Mapping[str, ModelPrice]) -> dict[str, Any] | None:
    """The usage as stored: priced, and with cache counts its input at billed tokens.

    `billed_prompt_tokens` = uncached input × 1 + writes × write + reads × read;
    its cost (unless the function sent its own) is priced from it, and
    `cache_saved_usd` is what the same input cost uncached, minus that.
    """
    if not usage or not (usage.get("cache_read_tokens") or usage.get("cache_write_tokens")):
        return priced(usage, prices)
    model = str(usage.get("model", ""))
    prompt = float(usage.get("prompt_tokens", 0))
    reads = float(usage.get("cache_read_tokens", 0))
    writes = float(usage.get("cache_write_tokens", 0))
    billed = cache_of(queue, model).billed(prompt, reads, writes)
    out = {**usage, "billed_prompt_tokens": round(billed)}
    price = prices.get(model)
    if price is None:
        return out
    if "cost_usd" not in out:
        completion = float(usage.get("completion_tokens", 0))
        out["cost_usd"] = round((billed * price.input + completion * price.output) / 1e6, 9)
    out["cache_saved_usd"] = round((prompt - billed) * price.input / 1e6, 9)
    return out


def cache_key(payload: str, shard: int = 0) -> str:
    """A dispatch's cache_key: the payload's hash (as stored, ai_marking_payloads.sha256),
    and ":<n>" when the key is sharded."""
    digest = hashlib.sha256(payload.encode()).hexdigest()
    return digest if shard <= 0 else f"{digest}:{shard}"
