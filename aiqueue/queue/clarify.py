"""A teacher answers a marker's question once; the answer marks what asked it, and after.

The answer becomes a marking note of the assignment's payload (a new payload
version, docs/remark.md): `{"marking_notes": [{"question_id", "question",
"answer"}]}`.  In one transaction (db/holds.py) the answer is recorded once,
the assignment's rows not yet dispatched go under the new payload (keeping
their place and what they wait for), and the rows that asked are re-marked
under it by the re-mark (queue/remark.py), limited to them.  The note is kept
by the rubric it belongs to (the payload without its notes), so an enqueue of
that rubric later, for the next class, carries it and the marker is not asked
again (queue/holds.py, docs/review-holds.md).
"""

from __future__ import annotations

from aiqueue import logs
from aiqueue.db.holds import Answer
from aiqueue.errors import AlreadyAnswered, NotFound
from aiqueue.queue.enqueue import answer_key
from aiqueue.queue.holds import rubric_sha256, with_notes
from aiqueue.runtime import Runtime
from aiqueue.wire import EnqueueRequest, payload_json
from aiqueue.wire.holds import Clarified, ClarifyRequest


async def clarify(rt: Runtime, body: ClarifyRequest, actor: str) -> Clarified:
    """POST /api/marking/clarify: record the answer once, then mark under it."""
    asked = await rt.store.asked_question(body.assignment_id, body.question_id)
    if asked is None:
        raise NotFound("no row of this assignment asked that question")
    if asked.answered:
        raise AlreadyAnswered("this question was answered already")
    # The notes go on the assignment's current payload (its newest re-mark's or row's).
    base = await rt.store.current_payload(body.assignment_id) or asked.payload
    rubric = rubric_sha256(base)
    note = {"question_id": str(body.question_id), "question": asked.question or "",
            "answer": body.answer}
    text = payload_json(with_notes(base, [*await rt.store.rubric_notes(rubric), note]))
    defaults = await rt.store.remark_defaults(body.assignment_id)
    shape = EnqueueRequest(body.assignment_id, [], 0, text, group=defaults.group, remark=True,
                           kind=defaults.kind or "mark", lane="live")
    kind = rt.settings.queue.kind(shape.kind)
    done = await rt.store.answer_question(
        Answer(body.question_id, body.assignment_id, rubric, note, text, actor, asked.askers),
        defaults=defaults, pool=kind.pool, answer_key=answer_key(rt, shape, kind))
    if done is None:  # another answer won the race
        raise AlreadyAnswered("this question was answered already")
    logs.event("clarified", assignment_id=body.assignment_id, question_id=body.question_id,
               remarked=done.remarked, moved=done.moved)
    return Clarified(question_id=body.question_id, payload_version=done.payload_version,
                     run_id=done.run_id, remarked=done.remarked, moved=done.moved,
                     answered_at=done.answered_at)
