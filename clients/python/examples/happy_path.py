from typing import Any

from aiqueue_client import AsyncMarkingClient, RunProgress


async def mark_all(base_url: str, secret: str, assignment_id: str, submission_ids: list[str],
                   payload: dict[str, Any]) -> RunProgress:
    async with AsyncMarkingClient(base_url, secret) as queue, \
            queue.watch(assignment_id) as events:  # open before enqueueing: miss nothing
        await queue.enqueue(assignment_id, submission_ids, payload=payload,
                            idempotency_key=f"mark-all-{assignment_id}")  # retry-safe
        progress = await queue.progress(assignment_id)
        while progress["pending"] + progress["processing"]:
            event = await anext(events)  # resumes by itself after a dropped connection
            print(event.submission_id, event.status, event.result)
            if event.status in ("completed", "failed", "cancelled", "expired"):
                progress = await queue.progress(assignment_id)
        await queue.accept_run(assignment_id, actor="teacher-42")
        return progress
