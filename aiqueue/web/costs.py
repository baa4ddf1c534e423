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


def fmt_cost(item: dict[str, Any]) -> str:
    """'$0.0123', '$0.0123 + 2 unpriced', 'unknown (3 unpriced)' or '$0.0000'."""
    cost, unpriced = item.get("cost_usd"), item.get("unpriced_jobs") or 0
    if cost is None:
        return f"unknown ({unpriced} unpriced)" if unpriced else "$0.0000"
    text = f"${cost:.4f}"
    return f"{text} + {unpriced} unpriced" if unpriced else text


def line(label: str, item: dict[str, Any]) -> CostLine:
    tokens = item["prompt_tokens"] + item["completion_tokens"]
    return CostLine(label, fmt_cost(item), f"{tokens:,}", f"{item['jobs']:,}")


def cost_card(summary: dict[str, Any]) -> list[CostLine]:
    """Today, the last 30 days, then each model and each lane over the 30 days."""
    lanes = {"live": "Lane: live", "batch": "Lane: overnight batch (batch prices)"}
    return [line("Today", summary["today"]), line("Last 30 days", summary["month"]),
            *(line(f"Model: {m['key']}", m) for m in summary["by_model"]),
            *(line(lanes.get(m["key"], m["key"]), m) for m in summary.get("by_lane", []))]
