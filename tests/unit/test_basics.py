"""Settings, tokens, backoff and log hygiene: pure functions, no I/O."""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import UTC, datetime

import pytest

from aiqueue import logs
from aiqueue.backoff import parse_retry_after, retry_delay
from aiqueue.callbacks import error_code
from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings
from aiqueue.tokens import Tokens, same_secret

SECRET = "unit-secret-0123456789abcdef"


def test_defaults_match_the_contract():
    s = load_settings({"MARKING_QUEUE_SECRET": SECRET}, port=9000)
    assert (s.max_attempts, s.max_in_flight, s.stuck_after_seconds) == (3, 1, 600)
    assert (s.prune_after_days, s.retry_base_seconds, s.retry_max_seconds) == (7, 10, 300)
    assert s.dispatch_timeout_seconds == 10 and s.function_mode == "async"
    assert s.app_base_url == "http://127.0.0.1:9000"
    assert s.callback_url == "http://127.0.0.1:9000/webhooks/ai-mark"
    assert s.admin_password == SECRET


def test_dev_generates_a_secret_and_production_requires_one():
    s = load_settings({})
    assert s.secret_generated and len(s.queue_secret) >= 16
    with pytest.raises(SettingsError, match="MARKING_QUEUE_SECRET"):
        load_settings({"AIQUEUE_ENV": "production", "DATABASE_URL": "postgresql://x/y",
                       "AI_MARKING_FUNCTION_URL": "https://fn"})


@pytest.mark.parametrize(("name", "value"), [
    ("QUEUE_MAX_IN_FLIGHT", "-1"), ("QUEUE_MAX_ATTEMPTS", "three"),
    ("QUEUE_RETRY_BASE_SECONDS", "nan"), ("AI_MARKING_FUNCTION_MODE", "batch"),
    ("AI_MARKING_FUNCTION_URL", "ftp://x"), ("DATABASE_URL", "mysql://x"),
    ("QUEUE_DISPATCH_TIMEOUT_SECONDS", "0"), ("MARKING_QUEUE_SECRET", "short"),
])
def test_a_bad_setting_names_its_variable(name: str, value: str):
    env = {"MARKING_QUEUE_SECRET": SECRET, name: value}
    with pytest.raises(SettingsError) as info:
        load_settings(env)
    assert name in info.value.detail
    assert "\n" not in info.value.detail


def test_floats_are_allowed_for_backoff():
    s = load_settings({"MARKING_QUEUE_SECRET": SECRET, "QUEUE_RETRY_BASE_SECONDS": "0.5"})
    assert s.retry_base_seconds == 0.5


def test_retry_delay_doubles_with_jitter_and_a_cap():
    assert retry_delay(1, 10, 300, rand=0.5) == pytest.approx(10)
    assert retry_delay(3, 10, 300, rand=0.5) == pytest.approx(40)
    assert retry_delay(3, 10, 300, rand=0.0) == pytest.approx(32)
    assert retry_delay(3, 10, 300, rand=1.0) == pytest.approx(48)
    assert retry_delay(10, 10, 300, rand=1.0) == 300
    assert retry_delay(2, 0, 300) == 0


def test_retry_after_seconds_and_dates():
    assert parse_retry_after("5", cap=300) == 5
    assert parse_retry_after("9999", cap=300) == 300
    assert parse_retry_after("-3", cap=300) == 0
    assert parse_retry_after("soon", cap=300) is None
    assert parse_retry_after(None, cap=300) is None
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", cap=300, now=now) == 30


def test_callback_tokens_bind_row_and_dispatch_and_reject_forgeries():
    tokens = Tokens(SECRET)
    qid = uuid.uuid4()
    token = tokens.callback(qid, 3, 2)
    claim = tokens.verify_callback(token)
    assert claim is not None and (claim.queue_id, claim.dispatch_seq, claim.attempt) == (qid, 3, 2)
    assert tokens.verify_callback(token[:-2] + "xx") is None
    assert Tokens("another-secret-0123456789").verify_callback(token) is None
    assert tokens.verify_callback(None) is None and tokens.verify_callback(42) is None
    # The event and session signers cannot stand in for a callback token.
    assert tokens.verify_callback(tokens.events("hw-1")) is None


def test_token_expiry_with_a_frozen_clock():
    tokens = Tokens(SECRET)
    token = tokens.events("hw-1")
    now = time.time()
    assert tokens.verify_events(token, "hw-1", max_age=60, now=now + 59)
    assert not tokens.verify_events(token, "hw-1", max_age=60, now=now + 61)
    assert not tokens.verify_events(token, "hw-2", max_age=60, now=now)
    session = tokens.session("admin", "csrf")
    assert tokens.verify_session(session, max_age=100, now=now + 10) == ("admin", "csrf")
    assert tokens.verify_session(session, max_age=100, now=now + 101) is None


def test_same_secret():
    assert same_secret("abc", "abc")
    assert not same_secret("abc", "abd")
    assert not same_secret(None, "abc") and not same_secret("", "")


def test_error_texts_become_content_free_codes():
    assert error_code("model_timeout") == "function:model_timeout"
    assert error_code("The student wrote about photosynthesis") == "function_failed"
    assert error_code(None) == "function_failed"
    assert error_code("x" * 100) == "function_failed"


def test_log_lines_accept_only_whitelisted_fields(caplog: pytest.LogCaptureFixture):
    logs.log.setLevel(logging.INFO)
    with caplog.at_level(logging.INFO, logger="aiqueue"):
        logs.event("claim", queue_id=uuid.UUID(int=1), attempt=1)
    record = json.loads(caplog.records[-1].getMessage())
    assert record["event"] == "claim" and record["attempt"] == 1
    with pytest.raises(ValueError, match="content"):
        logs.event("claim", content="student text")
