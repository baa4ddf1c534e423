"""Live events, ETA and the results page's view helpers, without I/O."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

import pytest

from aiqueue.errors import SettingsError, StoreError
from aiqueue.models import (
    EventBatch,
    EventCursor,
    MarkingEvent,
    QueueId,
    RunProgress,
    SubmissionId,
    SubmissionStatus,
)
from aiqueue.queue.progress import eta_seconds, progress_json, run_eta, status_json
from aiqueue.reads.live import EventHub, LiveConfig, format_event, stream
from aiqueue.settings import load_settings
from aiqueue.web.teacher_views import fmt_eta, mark_text, progress_message, progress_view
from aiqueue.wire import dump


def event(n: int, status: str = "pending", summary: dict[str, float] | None = None
          ) -> MarkingEvent:
    return MarkingEvent(EventCursor(100, n), QueueId(uuid.uuid4()), SubmissionId(uuid.uuid4()),
                        status, summary)  # type: ignore[arg-type]


@dataclass
class FakeFeed:
    """Implements the store's events_after over a list that tests append to."""

    events: list[MarkingEvent] = field(default_factory=list)
    fail: bool = False
    reads: int = 0

    async def live_events_after(self, assignment_id: str, cursor: EventCursor, limit: int
                           ) -> EventBatch:
        self.reads += 1
        if self.fail:
            raise StoreError("database error: ConnectionResetError")
        after = [e for e in self.events if e.cursor > cursor][:limit]
        return EventBatch(after, held_back=False, full=len(after) == limit)


async def collect(feed: FakeFeed, hub: EventHub, cursor: EventCursor) -> list[str]:
    return [chunk async for chunk in stream(feed, hub, "hw-1", cursor)]  # type: ignore[arg-type]


def test_eta_counts_rounds_through_the_slots():
    assert eta_seconds(0, 1, 10.0) == 10.0
    assert eta_seconds(3, 1, 10.0) == 40.0
    assert eta_seconds(3, 2, 10.0) == 20.0
    assert eta_seconds(50, 0, 10.0) == 10.0  # unlimited: all at once
    assert eta_seconds(3, 1, None) is None


def test_status_body_by_state():
    def st(status: str, ahead: int | None = None, running: float | None = None
           ) -> SubmissionStatus:
        return SubmissionStatus(QueueId(uuid.uuid4()), status, 1, ahead,  # type: ignore[arg-type]
                                running, in_flight=1)

    pending = status_json(st("pending", ahead=2), cap=1, avg=5.0)
    assert pending.queue_position == 3 and pending.estimated_wait_seconds == 20.0
    busy = status_json(st("processing", running=2.0), cap=1, avg=5.0)
    assert busy.queue_position == 0 and busy.estimated_wait_seconds == 3.0
    late = status_json(st("processing", running=9.0), cap=1, avg=5.0)
    assert late.estimated_wait_seconds == 0.0
    for final in ("completed", "failed", "cancelled"):
        body = status_json(st(final), cap=1, avg=5.0)
        assert body.queue_position is None and body.estimated_wait_seconds is None


def test_progress_text_and_percent():
    p = RunProgress(uuid.uuid4(), total=48, pending=20, processing=1, completed=23, failed=2,
                    cancelled=2, last_position=20, youngest_running_seconds=1.0, in_flight=1)
    body = progress_view(progress_json(p, cap=1, avg=6.0))
    assert body["estimated_remaining_seconds"] == 126.0
    assert body["text"] == "23 of 48 marked (2 failed, 2 cancelled) — about 2 min left"
    assert body["percent"] == 56 and body["active"]
    done = RunProgress(uuid.uuid4(), 48, 0, 0, 48, 0, 0, None, None, 0)
    assert progress_view(progress_json(done, 1, 6.0)) == {
        **dump(progress_json(done, 1, 6.0)), "percent": 100, "active": False,
        "text": "48 of 48 marked", "usage_text": "", "review_text": "", "paused": False}
    assert fmt_eta(None) == "estimating time left" and fmt_eta(20) == "less than a minute left"
    assert mark_text({"score": 7.0, "max_score": 10}) == "7 / 10" and mark_text(None) == ""


def test_run_usage_review_and_progress_texts():
    p = RunProgress(uuid.uuid4(), 4, 0, 0, 4, 0, 0, None, None, 0, prompt_tokens=2000,
                    completion_tokens=431, cost_usd=0.01234, unpriced_jobs=1, accepted=2,
                    reverted=1, unreviewed=1)
    body = progress_view(progress_json(p, 1, None))
    assert body["tokens"] == 2431 and body["cost_usd"] == 0.01234
    assert body["usage_text"] == "2,431 tokens · $0.0123 (1 without a known price)"
    assert body["review_text"] == "2 accepted, 1 reverted, 1 to review"
    assert progress_message({"current": 2, "total": 5, "message": "criterion 2"}) == \
        "criterion 2 (2/5)"
    assert progress_message({"message": "thinking"}) == "thinking"
    assert progress_message(None) == ""


def test_an_sse_event_carries_its_cursor_and_the_score_only_when_completed():
    done = format_event(event(7, "completed", {"score": 4, "max_score": 6}))
    lines = done.splitlines()
    assert lines[0] == "id: 100-7" and lines[1] == "event: marking" and done.endswith("\n\n")
    data = json.loads(lines[2].removeprefix("data: "))
    assert data["status"] == "completed" and data["result"] == {"score": 4, "max_score": 6}
    assert "result" not in json.loads(format_event(event(8)).splitlines()[2][6:])


def live_config(env: dict[str, str]) -> LiveConfig:
    return LiveConfig.from_settings(load_settings({"MARKING_QUEUE_SECRET": "s" * 20, **env}))


def test_live_config_from_the_environment():
    assert live_config({}).max_seconds == 250
    assert live_config({"VERCEL": "1", "VERCEL_PROJECT_PRODUCTION_URL": "q.vercel.app",
                        "DATABASE_URL": "postgresql://x/y",
                        "AI_MARKING_FUNCTION_URL": "https://fn"}).max_seconds < 60
    cfg = live_config({"QUEUE_EVENTS_MAX_SECONDS": "5", "QUEUE_EVENTS_HEARTBEAT_SECONDS": "40"})
    assert cfg.max_seconds == 5 and cfg.heartbeat_seconds == 15  # a heartbeat at least every 15 s
    for bad in ("soon", "0", "-3", "1e9"):
        with pytest.raises(SettingsError, match="QUEUE_EVENTS_POLL_SECONDS"):
            live_config({"QUEUE_EVENTS_POLL_SECONDS": bad})


async def test_a_stream_heartbeats_and_ends_at_its_time_limit():
    hub = EventHub(None, LiveConfig(max_seconds=0.5, heartbeat_seconds=0.1, poll_seconds=0.05))
    feed = FakeFeed([event(1), event(2)])
    chunks = await collect(feed, hub, EventCursor(100, 0))
    # The opening names its cursor, so a reconnect before any event resumes from it.
    assert chunks[0] == "retry: 1500\nid: 100-0\n\n"
    assert [c.splitlines()[0] for c in chunks if c.startswith("id:")] == ["id: 100-1",
                                                                          "id: 100-2"]
    assert sum(c == ": keep-alive\n\n" for c in chunks) >= 2
    assert feed.reads >= 5  # no LISTEN: it polled
    assert hub.subscribers == 0


async def test_a_stream_ends_when_the_database_fails_or_the_hub_closes():
    hub = EventHub(None, LiveConfig(max_seconds=30, heartbeat_seconds=5, poll_seconds=5))
    chunks = await collect(FakeFeed(fail=True), hub, EventCursor(0, 0))
    assert len(chunks) == 1 and hub.subscribers == 0
    task = asyncio.create_task(collect(FakeFeed(), hub, EventCursor(0, 0)))
    await asyncio.sleep(0.05)
    assert hub.subscribers == 1
    await hub.close()
    assert await asyncio.wait_for(task, 2) == [chunks[0]]
    assert hub.subscribers == 0


async def test_a_change_wakes_a_waiting_stream_at_once():
    hub = EventHub(None, LiveConfig(max_seconds=30, heartbeat_seconds=10, poll_seconds=10))
    feed = FakeFeed()
    got: list[str] = []

    async def consume() -> None:
        chunks = stream(feed, hub, "hw-1", EventCursor(0, 0))  # type: ignore[arg-type]
        try:
            async for chunk in chunks:
                got.append(chunk)
                if chunk.startswith("id:"):
                    return
        finally:
            # As the server does when the client goes: close the stream now, not
            # whenever the event loop gets round to finalizing the generator.
            assert isinstance(chunks, AsyncGenerator)
            await chunks.aclose()

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    feed.events.append(event(1))
    hub.wake()  # what a NOTIFY does
    await asyncio.wait_for(task, 1)  # far below the 10 s poll
    assert got[-1].startswith("id: 100-1")
    assert hub.subscribers == 0


@pytest.mark.parametrize(("args", "expected"), [
    ((0, 0, 4, 2.0, {}), 0.0),                      # nothing to mark
    ((10, 30, 4, 2.0, {}), 20.0),                   # 40 rows through 4 slots of 2 s
    ((10, 30, 4, None, {}), None),                  # no mark and no expectation: unknown
    ((10, 30, 4, 2.0, {"wait": 3600.0}), 3616.0),   # from not_before, its own rows only
    ((10, 30, 4, None, {"by": 7200.0}), 7200.0),    # the batch lane: by its deadline
])
def test_the_dry_runs_eta(args: tuple[int, int, int, float | None, dict[str, float]],
                          expected: float | None) -> None:
    ahead, rows, cap, avg, extra = args
    assert run_eta(ahead, rows, cap, avg, **extra) == expected
