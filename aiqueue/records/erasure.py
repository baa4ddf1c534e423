"""Erasing one student's data: every queue row that names a submission, and its marks.

What stays is a content-free record (ai_marking_erasures): the sha256 of each
erased id, when, through which channel, and how many rows of each table went.
The host's own `submissions` row (the answer text) is the host's to delete;
the erasure clears the queue's marks on it (ai_result, ai_marked_at).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal
from uuid import UUID

from aiqueue import logs
from aiqueue.runtime import Runtime

Via = Literal["api", "cli"]

# An assignment is erased this many submissions per transaction: each stays
# well inside the database's per-call limit, and a failure leaves whole
# submissions erased or untouched, never half of one.
CHUNK = 200

# Every queue table and how an erasure covers it.  tests/integration/
# test_erasure.py reads the catalog: a queue table (ai_marking_*, ai_queue_*,
# aiqueue_*) with a column that could name a submission (a uuid, a uuid[], json,
# jsonb or text column) must be listed here, so a new table can't be forgotten.
# "erased": erase (sql/erasure.sql) deletes the rows naming the
# submission; "none": its rows can't name one, for the reason given.
COVERAGE: dict[str, tuple[Literal["erased", "none"], str]] = {
    "ai_marking_queue": ("erased", "rows by submission_id (a row in flight too), the answer's "
                                   "key (answer_key) with its row; a group's next row leads"),
    "ai_marking_attempts": ("erased", "with their queue rows, in every month; another "
                                      "row's handoff to one of them is cleared"),
    "ai_marking_claimed": ("erased", "a row's slot while at the function, with its queue "
                                     "row (ON DELETE CASCADE)"),
    "ai_marking_ready": ("erased", "a pending row's claimable copy, with its queue row "
                                   "(ON DELETE CASCADE)"),
    "ai_marking_slots": ("none", "a cap's numbered slot and the dispatch that last held "
                                 "it (a queue id and dispatch_seq, never a submission's id; "
                                 "free once that dispatch's lease row is gone)"),
    "ai_marking_results": ("erased", "results and their review, by submission_id"),
    "ai_marking_holds": ("erased", "held results, deleted with their results; a "
                                   "marker's question is in the result it came with"),
    "ai_marking_answers": ("erased", "a teacher's answer (a rubric's marking note, which "
                                     "quotes the question) once every submission that asked "
                                     "it is erased"),
    "ai_marking_events": ("erased", "single events; a batch event loses the entries"),
    "ai_marking_outbox": ("erased", "row_failed events, by queue_id and body.submission_id"),
    "ai_marking_budget": ("erased", "budget entries of the submissions' queue ids"),
    "ai_marking_budget_seconds": ("none", "a pool's budget tokens and requests per second"),
    "ai_marking_payloads": ("erased", "payloads no other row names"),
    "ai_marking_erasures": ("none", "sha256 hashes of erased ids and counts"),
    "ai_marking_idempotency": ("none", "key, body hash, answer with counts and queue ids"),
    "ai_marking_groups": ("none", "a group's name and last turn"),
    "ai_marking_fair": ("none", "a group's name, token counter and spend pause"),
    "ai_marking_spend": ("none", "a group's name and its spend per hour and day"),
    "ai_marking_budget_warnings": ("none", "a group's name and which spend warnings it had"),
    "ai_marking_estimates": ("none", "an assignment's mean tokens and cost per row"),
    "ai_marking_prefixes": ("none", "a payload's id, pool, size in tokens and when it was "
                                    "used (the prompt cache)"),
    "ai_marking_cache_pools": ("none", "a pool's prompt cache counters and means"),
    "ai_marking_assignments": ("none", "an assignment's title and payload"),
    "ai_marking_counts": ("none", "counts per status"),
    "ai_marking_tally": ("none", "counters: outcome, error code, model"),
    "ai_marking_usage_hours": ("none", "usage summed per hour, model and lane; an erased "
                                       "result's hour is summed again without it"),
    "ai_marking_traces": ("none", "a job's queue id, kind, pool and trace id (removed with "
                                  "its row: ON DELETE CASCADE)"),
    "ai_marking_probes": ("none", "the doctor's probes: no row, no submission"),
    "ai_queue_control": ("none", "the one control row"),
    "ai_queue_alerts": ("none", "alert incidents: type, pool, kind, figures"),
    "ai_marking_batches": ("none", "provider batches: provider ids, file ids, row counts; an "
                                   "erased row's line is never applied (its queue row is gone)"),
    "ai_marking_runs": ("none", "a calibrated run: its id, assignment, thresholds, times"),
    "ai_marking_canary_rows": ("erased", "a drift canary's re-marks of the submission (marks "
                                         "and usage, its payload copy), by submission_id"),
    "ai_marking_canary_runs": ("none", "a drift canary run: kind, trigger, model, figures, "
                                       "cost"),
    "ai_marking_remarks": ("none", "a re-mark: its assignment, payload version, run, counts"),
    "ai_queue_login_failures": ("none", "failed operator logins"),
    "aiqueue_meta": ("none", "migration facts"),
    "aiqueue_migrations": ("none", "applied migrations"),
}


# The answer's keys: every table erase (sql/erasure.sql) touches, and the marks it clears.
ANSWER_KEYS = (*sorted(t for t, (how, _) in COVERAGE.items() if how == "erased"), "submissions")


def subject_hash(submission_id: UUID) -> str:
    """The sha256 (hex) of an id as the erasure record keeps it."""
    return hashlib.sha256(str(submission_id).encode()).hexdigest()


def _add(total: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
    return {k: total.get(k, 0) + counts.get(k, 0) for k in {*total, *counts}}


async def erase_submissions(rt: Runtime, submission_ids: Sequence[UUID],
                            via: Via) -> dict[str, int]:
    """Erase what the queue holds of these submissions, CHUNK per transaction; rows per table.

    An id the queue never saw erases nothing and answers zero counts (an
    erasure is repeatable and says nothing about whether the id exists).
    """
    total = dict.fromkeys(ANSWER_KEYS, 0)
    for start in range(0, len(submission_ids), CHUNK):
        chunk = submission_ids[start:start + CHUNK]
        total = _add(total, await rt.store.erase(chunk, via))
    # Counts only: an erased id never reaches a log line.
    logs.event("erasure", mode=via, count=len(submission_ids), erased=sum(total.values()))
    return dict(sorted(total.items()))


async def erase_assignment(rt: Runtime, assignment_id: str, via: Via) -> dict[str, int]:
    """Erase every submission of an assignment (the host's and any the queue names)."""
    ids = await rt.store.assignment_subjects(assignment_id)
    return await erase_submissions(rt, ids, via)
