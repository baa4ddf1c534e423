"""Drift canaries (docs/canaries.md): the settings, the verdict, a canary's answer, the card."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from aiqueue.errors import SettingsError
from aiqueue.models.agreement import Agreement
from aiqueue.models.canary import CanaryMarks, CanaryRun
from aiqueue.queue import canary
from aiqueue.queue.canary import figures_of, verdict
from aiqueue.queue.canary_send import parse_answer
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings, load_settings
from aiqueue.settings.canary import Canary
from aiqueue.settings.kinds import Kind, QueueConfig
from aiqueue.tokens import Tokens
from aiqueue.web import canaries
from tests.unit.fakes import FakeStore

BATCH_POOL = """
[pools.openai]
max_in_flight = 8
batch = "openai"
batch_key_env = "OPENAI_API_KEY"
batch_model = "gpt-4o-mini"
"""


def settings(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "aiqueue.toml"
    path.write_text(text)
    return load_settings({"AIQUEUE_CONFIG": str(path), "OPENAI_API_KEY": "sk-x"})


def test_a_canary_table_takes_its_defaults_and_its_lane_from_the_pool(tmp_path: Path) -> None:
    q = settings(tmp_path, BATCH_POOL + """
[kinds.essay]
pool = "openai"
function_url = "https://essay.example/mark"
[kinds.essay.canary]
[kinds.short]
function_url = "https://short.example/mark"
[kinds.short.canary]
rows = 5
every_seconds = 3600
max_drop = 0.05
max_share = 0.1
""").queue
    essay, short = q.kinds["essay"], q.kinds["short"]
    assert essay.canary is not None and short.canary is not None
    assert (essay.canary.rows, essay.canary.every_seconds, essay.canary.max_drop,
            essay.canary.max_share) == (20, 86400.0, 0.1, 0.02)
    # Batch by default where the pool has a batch API, else live.
    assert essay.canary_lane(q.pools["openai"]) == "batch"
    assert short.canary_lane(q.pools["default"]) == "live"
    assert (short.canary.rows, short.canary.every_seconds, short.canary.max_drop,
            short.canary.max_share) == (5, 3600.0, 0.05, 0.1)
    assert q.kinds["mark"].canary is None


@pytest.mark.parametrize(("line", "named"), [
    ("rows = 0", "kinds.short.canary.rows must be a whole number >= 1"),
    ("rows = 201", "kinds.short.canary.rows must be at most 200"),
    ("every_seconds = 0", "kinds.short.canary.every_seconds must be a number of seconds"),
    ("max_drop = 1.5", "kinds.short.canary.max_drop must be a number from 0 to 1"),
    ("max_share = -0.1", "kinds.short.canary.max_share must be a number from 0 to 1"),
    ('lane = "night"', 'kinds.short.canary.lane must be "live" or "batch"'),
    ('lane = "batch"', 'kinds.short.canary.lane = "batch" needs a batch API'),
    ("size = 3", "kinds.short.canary.size is not a known key"),
])
def test_a_bad_canary_setting_stops_start_up_with_one_line_naming_it(
        tmp_path: Path, line: str, named: str) -> None:
    with pytest.raises(SettingsError) as caught:
        settings(tmp_path, f"""
[kinds.short]
function_url = "https://short.example/mark"
[kinds.short.canary]
{line}
""")
    assert named in str(caught.value) and "\n" not in str(caught.value)


def run(exact: float | None, qwk: float | None) -> CanaryRun:
    return CanaryRun(uuid.uuid4(), "mark", "default", "schedule", "live", "finished",
                     datetime.now(UTC), exact=exact, qwk=qwk, passed=True)


@pytest.mark.parametrize(("now", "yard", "passed", "drop"), [
    ((0.8, 0.9), None, True, 0.0),                 # the first canary is the yardstick
    ((0.8, 0.9), (0.8, 0.9), True, 0.0),
    ((0.9, 0.95), (0.8, 0.9), True, 0.0),          # better is no drop
    ((0.7, 0.9), (0.8, 0.9), True, 0.1),           # exactly max_drop still passes
    ((0.69, 0.9), (0.8, 0.9), False, 0.11),        # exact fell
    ((0.8, 0.7), (0.8, 0.9), False, 0.2),          # qwk fell
    ((0.8, None), (0.8, 0.9), True, 0.0),          # no qwk now: exact alone
    ((None, None), (0.8, 0.9), None, 0.0),         # nothing answered: no verdict
])
def test_the_verdict_holds_exact_and_qwk_to_the_yardstick(
        now: tuple[float | None, float | None], yard: tuple[float, float] | None,
        passed: bool | None, drop: float) -> None:
    found = verdict(Agreement(exact=now[0], qwk=now[1]), run(*yard) if yard else None, 0.1)
    assert found.passed is passed and found.drop == pytest.approx(drop)


def test_the_figures_pair_each_canary_mark_with_the_teachers() -> None:
    rows = [CanaryMarks(uuid.uuid4(), {"score": s, "max_score": 10}, {"score": t}, "m", None)
            for s, t in [(7, 7), (5, 9), (3, 3), (10, 10), (2, 1), (8, 8)]]
    figures = figures_of(rows)
    assert figures.exact == pytest.approx(4 / 6) and figures.qwk is not None


def test_only_a_canary_token_makes_a_canary_answer_and_only_its_marks_are_kept() -> None:
    tokens = Tokens("s" * 32)
    row = uuid.uuid4()
    item = {"queue_id": str(row), "token": tokens.canary(row), "status": "completed",
            "result": {"score": 6, "max_score": 10, "feedback": "the student's words"},
            "usage": {"model": "m-2", "prompt_tokens": 10, "function_version": "v3"}}
    answer = parse_answer(item, tokens)
    assert answer is not None and answer.row_id == row
    assert answer.marks == {"score": 6, "max_score": 10}
    assert answer.usage == {"model": "m-2", "prompt_tokens": 10, "function_version": "v3"}
    # A queue row's callback token, another row's id, a forgery: not a canary's answer.
    assert parse_answer({**item, "token": tokens.callback(row, 1, 1)}, tokens) is None
    assert parse_answer({**item, "queue_id": str(uuid.uuid4())}, tokens) is None
    assert parse_answer({**item, "token": Tokens("t" * 32).canary(row)}, tokens) is None
    failed = parse_answer({**item, "status": "failed", "error": "the answer says x"}, tokens)
    assert failed is not None and failed.error == "function_failed"


def test_the_card_shows_each_kinds_last_canary_and_an_open_drift() -> None:
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    drifted = CanaryRun(uuid.uuid4(), "essay", "openai", "model_change", "batch", "finished",
                        now - timedelta(minutes=5), model="m-2", rows=20, answered=20,
                        exact=0.45, qwk=0.5, yardstick_exact=0.9, yardstick_qwk=0.92,
                        cost_usd=0.04, passed=False, drift_since=now - timedelta(minutes=4))
    card = canaries.card(["essay", "mark"], [drifted], now)
    essay, mark = card.lines
    assert essay.state == "drift" and essay.exact == "0.45 (was 0.90)" and essay.rows == "20/20"
    assert essay.drift is not None and "gated" in essay.drift and essay.trigger == "model change"
    assert mark.verdict == "no canary yet" and card.enabled


async def test_a_look_asked_for_too_soon_wakes_the_ticker_when_it_may_run() -> None:
    kind = Kind(name="mark", pool="default", canary=Canary())
    s = Settings(queue_secrets=("u" * 32,)).with_overrides(
        queue_file=QueueConfig({}, {"mark": kind}))
    rt = Runtime(settings=s, store=FakeStore(), http=httpx.AsyncClient(),
                 tokens=Tokens("u" * 32))
    assert canary.next_look(rt) is None
    await canary.tick(rt)              # looks now
    assert canary.next_look(rt) is None
    await canary.tick(rt)              # too soon: asked for, not run
    wait = canary.next_look(rt)
    assert wait is not None and 0 < wait <= canary.EVERY
    await canary.tick(rt, force=True)  # the cron looks whenever it comes
    assert canary.next_look(rt) is None
    await rt.http.aclose()
