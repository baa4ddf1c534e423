"""Pure view helper for the cost card of /ai-queue (figures only, never content)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CostLine:
    """One line of the cost card: a label and its formatted figures."""

    label: str
    cost: str
    tokens: str
    jobs: str
    # The provider's prompt cache: what was read and written, what it saved ("" for none).
    cache: str = ""


def fmt_cost(item: dict[str, Any]) -> str:
    """'$0.0123', '$0.0123 + 2 unpriced', 'unknown (3 unpriced)' or '$0.0000'."""
    cost, unpriced = item.get("cost_usd"), item.get("unpriced_jobs") or 0
    if cost is None:
        return f"unknown ({unpriced} unpriced)" if unpriced else "$0.0000"
    text = f"${cost:.4f}"
    return f"{text} + {unpriced} unpriced" if unpriced else text


def fmt_cache(item: dict[str, Any]) -> str:
    """'58,000 read · 2,000 written · the cache saved $4.10, 61 % of input', or '' for none.

    Writes billed above the input price can make it cost more than it saved.
    """
    reads, writes = item.get("cache_read_tokens") or 0, item.get("cache_write_tokens") or 0
    if not reads and not writes:
        return ""
    saved_usd, saved = item.get("cache_saved_usd"), item.get("cache_saved_tokens") or 0
    parts = [f"${abs(saved_usd):.2f}"] if saved_usd is not None else []
    if item["prompt_tokens"]:
        parts.append(f"{round(abs(saved) * 100 / item['prompt_tokens'])} % of input")
    verb = "saved" if saved >= 0 else "cost more by"
    return f"{reads:,} read · {writes:,} written · the cache {verb} {', '.join(parts)}".strip()


def line(label: str, item: dict[str, Any]) -> CostLine:
    tokens = item["prompt_tokens"] + item["completion_tokens"]
    return CostLine(label, fmt_cost(item), f"{tokens:,}", f"{item['jobs']:,}",
                    fmt_cache(item))


def cost_card(summary: dict[str, Any]) -> list[CostLine]:
    """Today, the last 30 days, then each model and each lane over the 30 days."""
    lanes = {"live": "Lane: live", "batch": "Lane: overnight batch (batch prices)",
             "canary": "Lane: drift canaries (re-marks, never applied)"}
    return [line("Today", summary["today"]), line("Last 30 days", summary["month"]),
            *(line(f"Model: {m['key']}", m) for m in summary["by_model"]),
            *(line(lanes.get(m["key"], m["key"]), m) for m in summary.get("by_lane", []))]
