"""Replay by filter: failed rows back to pending, in one statement, safe to press twice.

Only rows still `failed` move, each with fresh attempts and a fresh turn
(aiqueue_retry, as an enqueue hands turns out), and the claim then paces them
under every limit.  A dry run counts and writes nothing.  With an
Idempotency-Key a repeat gets the first answer again (the enqueue's mechanism,
the same table), and the same key with another body is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from aiqueue import logs, wire
from aiqueue.errors import KeyReused
from aiqueue.models import KeyMismatch, Replayed
from aiqueue.models.records import ReplayFilter
from aiqueue.runtime import Runtime
from aiqueue.wire import requests
from aiqueue.wire.answers import ReplayAnswer


@dataclass(frozen=True)
class ReplayRequest:
    """A validated replay body."""

    where: ReplayFilter
    dry_run: bool
    # What an Idempotency-Key's repeat must match (never equal to an enqueue's hash).
    fingerprint: str

    @classmethod
    def parse(cls, body: object) -> ReplayRequest:
        """The body as wire's ReplayRequest type checks it, with its fingerprint."""
        b = wire.parse(requests.ReplayRequest, body)
        f = b.filter
        where = ReplayFilter(assignment_id=f.assignment_id, group=f.group, kind=f.kind,
                             error=f.error, failed_after=f.failed_after,
                             failed_before=f.failed_before)
        canonical = json.dumps({"replay": body}, sort_keys=True, separators=(",", ":"))
        return cls(where, b.dry_run, hashlib.sha256(canonical.encode()).hexdigest())


async def replay(rt: Runtime, request: ReplayRequest, *, actor: str,
                 key: str | None = None) -> tuple[ReplayAnswer, bool]:
    """Run (or dry-run) a replay: the 200 body, and whether it repeats a key's first answer.

    The answer is kept (for the key's repeats) as the mapping the store wrote, so what
    is stored stays as it was; both are read here as the type.
    """
    outcome = await rt.store.replay(request.where, dry_run=request.dry_run, actor=actor,
                                    key=(key, request.fingerprint) if key else None)
    match outcome:
        case KeyMismatch():
            raise KeyReused("this Idempotency-Key was used with a different body")
        case Replayed(stored):
            return ReplayAnswer.model_validate(stored), True
    logs.event("replay", matched=outcome.matched, replayed=outcome.replayed,
               mode="dry_run" if request.dry_run else "replay")
    return ReplayAnswer.model_validate(outcome.answer()), False
