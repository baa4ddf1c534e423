"""A deterministic rubric scorer standing in for a model (labelled as a simulator)."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Awaitable, Callable

from .errors import MarkingError
from .items import Marking
from .job import Criterion, Job, Score, criteria_shape
from .prompt import build_messages

_WORD = re.compile(r"\w+")
# Rubric verbs and filler say how to judge, not what to find in the answer.
_STOPWORDS = frozenset(
    """a accurate accurately an and answer any appropriate are as at be by can clear clearly
    compare compares correct correctly define defines demonstrate demonstrates describe describes
    discuss discusses example examples explain explains for from give gives good has have how
    identify identifies in include includes into is it its least list lists mention mentions
    must name names note notes of on one or outline outlines point points provide provides
    relevant response should show shows state states student that the their them this to two
    use uses using was well were what which why with""".split()
)


class SimulatorBackend:
    """Scores an answer by the rubric criteria it covers; no model involved."""

    name = "simulate"

    def __init__(
        self,
        latency: float = 0.5,
        failure_rate: float = 0.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.latency = latency
        self.failure_rate = failure_rate
        self.sleep = sleep

    async def mark(self, job: Job) -> Marking:
        """Wait the configured latency, maybe fail (deterministically), else score."""
        if self.latency > 0:
            await self.sleep(self.latency)
        if fails(job.queue_id, job.attempt, self.failure_rate):
            raise MarkingError("simulated_failure", retryable=True)
        return score_answer(job)


def fails(queue_id: str, attempt: int, rate: float) -> bool:
    """Whether this attempt fails; a hash, not a random draw, so tests and retries are stable."""
    digest = hashlib.sha256(f"{queue_id}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def score_answer(job: Job) -> Marking:
    """Score = weight of the criteria the answer covers, scaled to max_score.

    A criterion the answer half meets is one the rubric doesn't decide: a teacher's
    note decides it, else it counts as met for the best guess and the first such
    criterion is asked about (a clarification, docs/review-holds.md).
    """
    tokens = set(_WORD.findall(job.content.lower()))
    met, asked = [], None
    for n, c in enumerate(job.criteria, 1):
        if not half_met(c, tokens):
            met.append(covered(c, tokens))
            continue
        question = clarification(n, c)
        note = next((x for x in job.notes if x.question == question), None)
        met.append(note is None or says_yes(note.answer))
        asked = asked or (question if note is None else None)
    total = sum(c.weight for c in job.criteria)
    earned = sum(c.weight for c, ok in zip(job.criteria, met, strict=True) if ok)
    score = _round_half(earned / total * job.max_score)
    feedback = _feedback(job.criteria, met)
    criteria = tuple((cid, most if ok else 0, most)
                     for (cid, most), ok in zip(criteria_shape(job), met, strict=True))
    return Marking(
        score=score,
        feedback=feedback,
        model="simulator",
        # What a model would have been sent and answered: the real prompt, at
        # about four characters per token (labelled simulated in the usage).
        prompt_tokens=estimate_tokens(" ".join(m["content"] for m in build_messages(job))),
        completion_tokens=estimate_tokens(feedback) + 12,  # + the JSON around it
        extra={"simulated": True, "criteria_met": sum(met), "criteria_total": len(met)},
        criteria=criteria,
        review=None if asked is None else {"reason": "clarification", "question": asked,
                                           "best_guess": score},
    )


def half_met(criterion: Criterion, tokens: set[str]) -> bool:
    """Exactly half of a criterion's keywords (two or more) occur in the answer: `covered`
    counts it as met, but only just, so the rubric doesn't decide it."""
    wanted = keywords(criterion)
    return len(wanted) >= 2 and 2 * _found(wanted, tokens) == len(wanted)


def clarification(n: int, criterion: Criterion) -> str:
    """The question about criterion `n`: the same words for every answer that half meets
    it, from the rubric only (never the answer's words)."""
    return (f"Criterion {n} (\"{_short(criterion.text)}\"): does an answer that gives half "
            f"of what it looks for meet it?")


def says_yes(answer: str) -> bool:
    """Whether a teacher's note answers yes."""
    return bool(re.match(r"\s*(?:yes|yeah|yep|it does|accept|count|meets|correct|full)\b",
                         answer, re.IGNORECASE))


def estimate_tokens(text: str) -> int:
    """About how many tokens a BPE tokenizer makes of `text` (4 characters each)."""
    return max(1, math.ceil(len(text) / 4))


def keywords(criterion: Criterion) -> tuple[str, ...]:
    """The rubric's own keywords, else the criterion's content words."""
    if criterion.keywords:
        return tuple(k.lower() for k in criterion.keywords)
    words = _WORD.findall(criterion.text.lower())
    return tuple(dict.fromkeys(w for w in words if len(w) >= 3 and w not in _STOPWORDS))


def covered(criterion: Criterion, tokens: set[str]) -> bool:
    """A criterion is met when at least half of its keywords occur in the answer."""
    wanted = keywords(criterion)
    if not wanted:
        # Nothing checkable (e.g. "Be concise"): a non-empty answer gets the benefit of the doubt.
        return True
    return _found(wanted, tokens) >= math.ceil(len(wanted) / 2)


def _found(wanted: tuple[str, ...], tokens: set[str]) -> int:
    return sum(all(_matches(w, tokens) for w in _WORD.findall(k)) for k in wanted)


def _matches(word: str, tokens: set[str]) -> bool:
    # A crude stem, so "photosynthesis" also finds "photosynthetic" and "evaporate" "evaporation".
    stem = word[: max(4, len(word) - 3)]
    return word in tokens or any(t.startswith(stem) for t in tokens)


def _round_half(value: float) -> Score:
    rounded = round(value * 2) / 2
    return int(rounded) if rounded.is_integer() else rounded


def _feedback(criteria: tuple[Criterion, ...], met: list[bool]) -> str:
    # Named by the teacher's rubric text only: the feedback never quotes the answer.
    labels = [f"{i} ({_short(c.text)})" for i, c in enumerate(criteria, 1)]

    def names(ok: bool) -> str:
        return "; ".join(label for label, m in zip(labels, met, strict=True) if m is ok) or "none"

    return (
        f"Simulated marking (no AI model): {sum(met)} of {len(met)} rubric criteria covered. "
        f"Criteria met: {names(True)}. Criteria missed: {names(False)}."
    )


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
