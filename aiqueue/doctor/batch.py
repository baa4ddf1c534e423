"""The doctor's look at each batch pool's key (docs/overnight.md): one read-only call each.

OpenAI: list batches, limit 1; Anthropic: list message batches, limit 1.  A
wrong key then shows here, not at the first cron, when the rows would go live
near their deadline at full price.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiqueue.batch.connect import connect
from aiqueue.batch.provider import ProviderError
from aiqueue.settings.kinds import DEFAULT_POOL, Pool

if TYPE_CHECKING:
    from aiqueue.doctor.report import Doctor

KEY_TIMEOUT_SECONDS = 10.0
_CALLS = {"openai": "list batches", "anthropic": "list message batches"}


async def check_batch_keys(doc: Doctor) -> None:
    """One line per pool that declares a batch API (none: one line that skips)."""
    pools = doc.settings.queue.batch_pools
    if not pools:
        doc.add("batch", "skip", "no pool declares a batch API (pools.<name>.batch)")
        return
    found = await asyncio.gather(*(_check(pool) for pool in pools))
    for pool, code in zip(pools, found, strict=True):
        name = "batch" if pool.name == DEFAULT_POOL else f"batch:{pool.name}"
        call = f"{pool.batch} {_CALLS[pool.batch or 'openai']}, limit 1"
        if code is None:
            doc.add(name, "pass", f"pool {pool.name}: the key in {pool.batch_key_env} works "
                                  f"({call})")
        else:
            doc.add(name, "fail", f"pool {pool.name}: {call} at {pool.batch_base_url} "
                                  f"answered {code}", _fix(pool, code))


async def _check(pool: Pool) -> str | None:
    """None when the key works, else the call's content-free error code."""
    assert pool.batch is not None and pool.batch_base_url
    # In a thread: the first use imports the SDK, which would stall the instance's loop.
    provider = await asyncio.to_thread(connect, pool.batch, pool.batch_base_url,
                                       pool.batch_api_key or "", KEY_TIMEOUT_SECONDS)
    try:
        await provider.check()
    except ProviderError as exc:
        return exc.code
    finally:
        await provider.aclose()
    return None


def _fix(pool: Pool, code: str) -> str:
    if code in ("provider_http_401", "provider_http_403"):
        return (f"set {pool.batch_key_env} to the pool's {pool.batch} API key (one allowed "
                "to use the batch API), and redeploy")
    if code in ("provider_timeout", "provider_unreachable"):
        return f"check pools.{pool.name}.batch_base_url in aiqueue.toml and the network"
    return f"check pools.{pool.name}.batch_base_url and the provider's status page"
