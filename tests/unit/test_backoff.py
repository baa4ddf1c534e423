"""Retry delays and Retry-After parsing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from aiqueue.backoff import parse_retry_after, retry_delay

SECRET = "unit-secret-0123456789abcdef"


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
