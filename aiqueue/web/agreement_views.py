"""Words for agreement and the calibration gate on the teacher's page (docs/agreement.md).

Pure helpers; the tests import them.  The page renders `card_view`'s JSON in one
card: the agreement sentence, links to the rows that disagree most, and while a
run holds rows, what they wait for and the button that releases them.
"""

from __future__ import annotations

from typing import Any

from aiqueue.models.agreement import Agreement
from aiqueue.reads.agreement import Card
from aiqueue.web.estimate import fmt_usd


def _points(n: float) -> str:
    text = f"{n:g}"
    return f"{text} point{'' if n == 1 else 's'}"


def agreement_text(a: Agreement, max_score: float | None) -> str:
    """'12 checked: 10 exact, all within 1 point, κ 0.91'."""
    if a.reviewed == 0:
        return "No marks checked yet: accept or adjust a few to see how often you agree."
    parts = []
    if a.pairs:
        margin = _points(max(1.0, 0.1 * max_score) if max_score else 1.0)
        parts.append(f"{a.exact_count} exact")
        parts.append(f"all within {margin}" if a.adjacent_count == a.pairs
                     else f"{a.adjacent_count} within {margin}")
    if a.reverted:
        parts.append(f"{a.reverted} reverted")
    if a.qwk is not None:
        parts.append(f"κ {a.qwk:.2f}")
    return f"{a.reviewed} checked: {', '.join(parts)}"


def release_text(held: int, row_cost_usd: float | None) -> str:
    """'Release the other 25 (about $0.12)'."""
    cost = f" (about {fmt_usd(held * row_cost_usd)})" if row_cost_usd is not None else ""
    return f"Release the other {held}{cost}"


def gate_text(card: Card) -> str:
    """Where the run's calibration stands, in a sentence ('' without a gate)."""
    g = card.gate
    if g is None:
        return ""
    if g.held == 0:
        return (f"The {g.calibration} to check first were released by "
                f"{'your thresholds' if g.released_by == 'release_when' else 'you'}."
                if g.released_at else "")
    if g.calibration_ended < g.calibration:
        return (f"Checking {g.calibration} first: {g.calibration_ended} of {g.calibration} "
                f"marked; the other {g.held} wait.")
    return (f"The {g.calibration} to check first are marked: accept or adjust them below, "
            f"then release the other {g.held}.")


def with_held(view: dict[str, Any], card: Card) -> dict[str, Any]:
    """The progress bar's words when rows wait for the teacher: no ETA for them."""
    g = card.gate
    if g is None or not g.held or not view.get("total"):
        return view
    text = view["text"].split(" — ")[0]
    return {**view, "text": f"{text} — the other {g.held} wait for your check"}


def card_view(card: Card, max_score: float | None) -> dict[str, Any]:
    """The card as the page's script renders it."""
    g = card.gate
    held = g.held if g else 0
    return {
        "agreement_text": agreement_text(card.figures, max_score),
        "reviewed": card.figures.reviewed,
        "disagreements": [str(q) for q in card.figures.disagreement_submissions],
        "gate_text": gate_text(card),
        # The plain case is said by gate_text; thresholds and unmarked ones need a word.
        "why": card.why if held and g and (g.thresholds or g.calibration_ended < g.calibration)
        else None,
        "held": held,
        "run_id": str(g.run_id) if g else None,
        "release_text": release_text(held, g.row_cost_usd) if g and held else "",
    }


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def model_rows(by_model: list[tuple[str, Agreement]]) -> list[dict[str, str]]:
    """/ai-queue's agreement by model (last 30 days): one row of words per model."""
    return [{"model": model, "reviewed": str(a.reviewed), "reverted": str(a.reverted),
             "exact": _share(a.exact), "adjacent": _share(a.adjacent),
             "mae": "–" if a.mean_abs_error is None else f"{a.mean_abs_error:.2f}",
             "qwk": "–" if a.qwk is None else f"{a.qwk:.2f}"} for model, a in by_model]
