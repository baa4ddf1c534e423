"""Words for the teacher page's "Needs you" list (docs/review-holds.md).  Pure helpers.

Held results come first on the page: each question the marker asked once,
with the answers that asked it, then the answers held for another reason;
each with the marker's best guess and Accept / Adjust, a question with Answer.
"""

from __future__ import annotations

from typing import Any

from aiqueue.models.holds import Hold

REASONS = {
    "clarification": "the rubric doesn't decide it",
    "suspected_injection": "it seems to speak to the marker rather than answer the question",
    "low_confidence": "the marker's own check of its mark failed",
}


def guess_text(h: Hold) -> str:
    """'best guess 6 / 10', or 'no guess'."""
    if h.best_guess is None:
        return "no guess"
    top = f" / {h.max_score:g}" if h.max_score is not None else ""
    return f"best guess {h.best_guess:g}{top}"


def needs_title(count: int) -> str:
    """'Needs you: 3'."""
    return f"Needs you: {count}"


def needs_view(holds: list[Hold], names: dict[str, str]) -> dict[str, Any]:
    """The list as the page renders it; `names`: submission id -> the student's name."""
    def item(h: Hold) -> dict[str, Any]:
        sid = str(h.submission_id)
        return {"submission_id": sid, "queue_id": str(h.queue_id),
                "name": names.get(sid, f"Submission {sid[:8]}"), "guess": guess_text(h),
                "reason": REASONS[h.reason], "max_score": h.max_score}
    questions: dict[str, dict[str, Any]] = {}
    others = []
    for h in holds:
        if h.question_id is None:
            others.append(item(h))
            continue
        q = questions.setdefault(str(h.question_id), {
            "question_id": str(h.question_id), "question": h.question or "", "rows": []})
        q["rows"].append(item(h))
    for q in questions.values():
        n = len(q["rows"])
        q["asked_by"] = f"asked by {n} answer{'s' if n != 1 else ''}"
    return {"count": len(holds), "title": needs_title(len(holds)),
            "questions": list(questions.values()), "others": others}
