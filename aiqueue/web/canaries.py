"""Pure view helper for the Canaries card of /ai-queue (docs/canaries.md): each kind's last
canary, and an open drift with what it holds back (figures, models and times only)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from aiqueue.models.canary import CanaryRun
from aiqueue.web.estimate import fmt_usd
from aiqueue.web.views import fmt_age, fmt_time


@dataclass(frozen=True)
class CanaryLine:
    """One kind's last canary."""

    kind: str
    when: str
    ago: str
    trigger: str
    model: str
    rows: str
    exact: str
    qwk: str
    cost: str
    verdict: str
    # "passed" | "drift" | "running" | "skipped" | "none" (the row's class)
    state: str
    drift: str | None


@dataclass(frozen=True)
class Card:
    enabled: bool
    lines: list[CanaryLine]


def _figure(value: float | None, before: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if before is None else f"{value:.2f} (was {before:.2f})"


def verdict(run: CanaryRun) -> tuple[str, str]:
    """(state, words): how the run ended, or where it stands."""
    if run.state == "skipped":
        return "skipped", f"skipped: {run.skipped}"
    if run.state == "running":
        return "running", f"running: {run.answered} of {run.rows} answered"
    if run.passed:
        return "passed", "passed"
    if run.passed is False:
        return "drift", "drift"
    return "none", "no answer to judge"


def line(run: CanaryRun, now: datetime) -> CanaryLine:
    state, words = verdict(run)
    drift = None
    if run.drift_since is not None:
        drift = (f"Drift open since {fmt_time(run.drift_since)}: every new enqueue of "
                 f"{run.kind} is gated (5 calibration rows) until a canary passes or you "
                 f"accept it (POST /api/marking/canary/{run.kind}/accept).")
    yard = run.state == "finished" and run.passed is False
    return CanaryLine(
        kind=run.kind, when=fmt_time(run.started_at),
        ago=fmt_age((now - run.started_at).total_seconds()),
        trigger=run.trigger.replace("_", " "), model=run.model or run.trigger_model or "—",
        rows=f"{run.answered}/{run.rows}" if run.state != "skipped" else "—",
        exact=_figure(run.exact, run.yardstick_exact if yard else None),
        qwk=_figure(run.qwk, run.yardstick_qwk if yard else None),
        cost=fmt_usd(run.cost_usd) if run.cost_usd is not None else "—",
        verdict=words, state=state if run.drift_since is None else "drift", drift=drift)


def card(declared: list[str], runs: list[CanaryRun], now: datetime) -> Card:
    """Every declared kind (a kind without a run yet says so), then kinds no longer declared
    that ran one."""
    by_kind = {r.kind: r for r in runs}
    lines = [line(by_kind[k], now) if k in by_kind else CanaryLine(
        kind=k, when="—", ago="", trigger="—", model="—", rows="—", exact="—", qwk="—",
        cost="—", verdict="no canary yet", state="none", drift=None) for k in declared]
    lines += [line(r, now) for k, r in sorted(by_kind.items()) if k not in declared]
    return Card(bool(declared), lines)
