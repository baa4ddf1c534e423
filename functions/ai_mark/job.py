"""The dispatch as a typed, validated Job (the only place that trusts raw input)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from .errors import InvalidDispatch

Score = int | float

_SAFE_ID = re.compile(r"[A-Za-z0-9._:/@-]{1,80}")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_POINTS = re.compile(r"\s*[(\[](\d+(?:\.\d+)?)\s*(?:points?|pts?|marks?)?[)\]]\s*$", re.I)
_CACHE_KEY = re.compile(r"[0-9a-f]{16,64}(?::[0-9]{1,6})?")
_TEXT_KEYS = ("criterion", "description", "name", "text")
_WEIGHT_KEYS = ("points", "weight", "marks")


@dataclass(frozen=True)
class Criterion:
    """One rubric line: what to look for, how much it is worth, optional keywords."""

    text: str
    weight: float = 1.0
    keywords: tuple[str, ...] = ()
    # The rubric item's own "id"; without one a criterion is "c1", "c2", ... by position.
    id: str | None = None


@dataclass(frozen=True)
class Note:
    """A teacher's answer to a marker's question (the payload's `marking_notes`)."""

    question: str
    answer: str


@dataclass(frozen=True)
class Job:
    """A validated dispatch."""

    queue_id: str
    token: str
    attempt: int
    submission_id: str | None
    assignment_id: str | None
    callback_url: str | None
    question: str | None
    rubric_text: str
    criteria: tuple[Criterion, ...]
    max_score: Score
    content: str
    # The app's prompt cache key (the payload's hash): rows that share it share the prompt's
    # prefix, so the provider can route them to the machine that caches it.
    cache_key: str | None = None
    # The teacher's answers to earlier questions: they decide what the rubric does not.
    notes: tuple[Note, ...] = ()


def safe_id(value: object) -> str:
    """Return an id fit for logs: ids pass, anything else (maybe content) is masked."""
    if value is None:
        return "-"
    if isinstance(value, str) and _SAFE_ID.fullmatch(value):
        return value
    return "<invalid>"


def parse_dispatch(dispatch: Mapping[str, Any]) -> Job:
    """Validate a dispatch; raise InvalidDispatch naming the first bad field."""
    if not isinstance(dispatch, Mapping):
        raise InvalidDispatch("dispatch")
    queue_id = _required_str(dispatch, "queue_id")
    token = _required_str(dispatch, "callback_token")
    payload = _mapping(dispatch, "payload")
    submission = _mapping(dispatch, "submission")
    content = submission.get("content")
    if not isinstance(content, str) or not content.strip():
        raise InvalidDispatch("submission.content")
    question = payload.get("question")
    if question is not None and not isinstance(question, str):
        raise InvalidDispatch("payload.question")
    criteria = parse_rubric(payload.get("rubric"))
    rubric = payload["rubric"]
    return Job(
        queue_id=queue_id,
        token=token,
        attempt=_attempt(dispatch.get("attempt", 1)),
        submission_id=_optional_str(dispatch, "submission_id"),
        assignment_id=_optional_str(dispatch, "assignment_id"),
        callback_url=_optional_str(dispatch, "callback_url"),
        question=question.strip() if question else None,
        rubric_text=rubric.strip() if isinstance(rubric, str) else _format(criteria),
        criteria=criteria,
        max_score=_max_score(payload.get("max_score")),
        content=content,
        cache_key=_cache_key(dispatch.get("cache_key")),
        notes=_notes(payload.get("marking_notes")),
    )


def parse_rubric(rubric: object) -> tuple[Criterion, ...]:
    """Turn a rubric (text, or a list of strings / objects) into criteria."""
    if isinstance(rubric, str):
        items: list[object] = [part for line in rubric.splitlines() for part in line.split(";")]
    elif isinstance(rubric, list):
        items = list(rubric)
    else:
        raise InvalidDispatch("payload.rubric")
    criteria = tuple(c for c in (_criterion(item) for item in items) if c is not None)
    if not criteria:
        raise InvalidDispatch("payload.rubric")
    return criteria


def _criterion(item: object) -> Criterion | None:
    if isinstance(item, str):
        text = _BULLET.sub("", item).strip()
        match = _POINTS.search(text)
        weight = float(match.group(1)) if match else 1.0
        text = text[: match.start()].strip() if match else text
        return Criterion(text, weight if weight > 0 else 1.0) if text else None
    if not isinstance(item, Mapping):
        raise InvalidDispatch("payload.rubric")
    text = next((item[k] for k in _TEXT_KEYS if isinstance(item.get(k), str)), "").strip()
    weight = next((item[k] for k in _WEIGHT_KEYS if k in item), 1.0)
    keywords = item.get("keywords", [])
    if not text or not _is_number(weight) or weight <= 0:
        raise InvalidDispatch("payload.rubric")
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        raise InvalidDispatch("payload.rubric")
    own_id = item.get("id")
    if own_id is not None and (not isinstance(own_id, str) or not _SAFE_ID.fullmatch(own_id)):
        raise InvalidDispatch("payload.rubric")
    return Criterion(text, float(weight), tuple(k.strip() for k in keywords if k.strip()),
                     own_id)


def criteria_shape(job: Job) -> list[tuple[str, Score]]:
    """Each criterion's id and its share of max_score (its weight, scaled), in rubric order."""
    total = sum(c.weight for c in job.criteria)
    return [(c.id or f"c{n}", _points(c.weight / total * job.max_score))
            for n, c in enumerate(job.criteria, 1)]


def _points(value: float) -> Score:
    rounded = round(value, 2)
    return int(rounded) if rounded.is_integer() else rounded


def _format(criteria: tuple[Criterion, ...]) -> str:
    return "\n".join(f"- {c.text} ({c.weight:g} points)" for c in criteria)


def _mapping(data: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    value = data.get(field)
    if not isinstance(value, Mapping):
        raise InvalidDispatch(field)
    return value


def _required_str(data: Mapping[str, Any], field: str) -> str:
    value = data.get(field)
    if not isinstance(value, str) or not value:
        raise InvalidDispatch(field)
    return value


def _optional_str(data: Mapping[str, Any], field: str) -> str | None:
    value = data.get(field)
    if value is not None and not isinstance(value, str):
        raise InvalidDispatch(field)
    return value


def _notes(value: object) -> tuple[Note, ...]:
    """The payload's marking notes; an entry without a question and an answer is skipped."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidDispatch("payload.marking_notes")
    return tuple(Note(n["question"].strip(), n["answer"].strip()) for n in value
                 if isinstance(n, Mapping) and isinstance(n.get("question"), str)
                 and isinstance(n.get("answer"), str) and n["answer"].strip())


def _cache_key(value: object) -> str | None:
    """The dispatch's cache_key: a hash and maybe ":<n>"; anything else is left out."""
    if isinstance(value, str) and _CACHE_KEY.fullmatch(value):
        return value
    return None


def _attempt(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidDispatch("attempt")
    return value


def _max_score(value: object) -> Score:
    if not _is_number(value) or value <= 0:
        raise InvalidDispatch("payload.max_score")
    return value


def _is_number(value: object) -> TypeGuard[int | float]:
    # bool is an int subclass, but `true` is never a score.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
