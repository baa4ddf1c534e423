"""Notifications without I/O: the backoff schedule, the settings, the signature, the panel."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from aiqueue.errors import SettingsError
from aiqueue.models import EventId, OutboxEntry, QueueId
from aiqueue.notify import delivery
from aiqueue.settings import Settings, load_settings
from aiqueue.web import deliveries

SECRET = "unit-secret-0123456789abcdef"
KEY = "whsec_" + base64.b64encode(b"k" * 32).decode()


# -- the backoff schedule ------------------------------------------------------

def test_backoff_grows_fivefold_from_the_base_then_stays_at_six_hours():
    delays = [delivery.retry_delay(n, 5.0, rand=0.5) for n in range(1, 10)]
    assert delays[:6] == [5.0, 25.0, 125.0, 625.0, 3125.0, 15625.0]
    assert delays[6:] == [6 * 3600.0] * 3


def test_backoff_jitter_stays_within_ten_percent():
    assert delivery.retry_delay(2, 5.0, rand=0.0) == pytest.approx(22.5)
    assert delivery.retry_delay(2, 5.0, rand=1.0) == pytest.approx(27.5)
    assert delivery.retry_delay(100, 5.0, rand=1.0) == 6 * 3600.0  # capped, no overflow
    assert delivery.retry_delay(1, 0.0) == 0.0


def test_the_default_schedule_tries_ten_times_in_a_day_then_once_at_its_end():
    """Attempts at these offsets fall in the 24 h window; the store adds one at its end."""
    at, tries = 0.0, 1
    while True:
        at += delivery.retry_delay(tries, 5.0, rand=0.5)
        if at >= 86400:
            break
        tries += 1
    assert tries == 10  # at 0 s, 5 s, 30 s, 2.6 min, 13 min, 65 min, 5.4 h, 11.4 h, 17.4 h, 23.4 h


def test_the_lease_outlives_the_http_deadline():
    s = Settings(notify_timeout_seconds=5.0)
    assert delivery.lease_seconds(s) > 2 * s.notify_timeout_seconds


# -- settings -------------------------------------------------------------------

def load(**env: str) -> Settings:
    return load_settings({"MARKING_QUEUE_SECRET": SECRET, **env})


def test_notifications_are_off_by_default_and_on_with_a_url_and_a_secret():
    assert not delivery.enabled(load())
    s = load(QUEUE_NOTIFY_URL="https://host.example/hooks", QUEUE_NOTIFY_SECRET=KEY)
    assert delivery.enabled(s) and s.notify_secret == KEY
    assert (s.notify_timeout_seconds, s.notify_give_up_seconds) == (5.0, 86400.0)


@pytest.mark.parametrize(("env", "message"), [
    ({"QUEUE_NOTIFY_URL": "https://h/x"}, "QUEUE_NOTIFY_SECRET is required"),
    ({"QUEUE_NOTIFY_SECRET": KEY}, "QUEUE_NOTIFY_URL is not"),
    ({"QUEUE_NOTIFY_URL": "ftp://h/x", "QUEUE_NOTIFY_SECRET": KEY}, "QUEUE_NOTIFY_URL"),
    ({"QUEUE_NOTIFY_URL": "https://h/x", "QUEUE_NOTIFY_SECRET": "s3cret-without-prefix"},
     "whsec_"),
    ({"QUEUE_NOTIFY_URL": "https://h/x", "QUEUE_NOTIFY_SECRET": "whsec_not base64!"}, "whsec_"),
    ({"QUEUE_NOTIFY_URL": "https://h/x",
      "QUEUE_NOTIFY_SECRET": "whsec_" + base64.b64encode(b"short").decode()}, "24 to 64"),
])
def test_a_bad_notification_setting_stops_start_up_with_one_line(
    env: dict[str, str], message: str
):
    with pytest.raises(SettingsError, match=message) as info:
        load(**env)
    assert "\n" not in str(info.value)


def test_an_unpadded_secret_is_accepted_as_the_library_accepts_it():
    unpadded = KEY.rstrip("=")
    s = load(QUEUE_NOTIFY_URL="https://h/x", QUEUE_NOTIFY_SECRET=unpadded)
    Webhook(s.notify_secret or "")  # the library takes it too


# -- the signature ----------------------------------------------------------------

def test_the_library_verifies_what_we_sign_and_rejects_a_changed_body():
    hook = Webhook(KEY)
    body = json.dumps({"type": "marking.row_failed", "error": "model_timeout"})
    headers = delivery.signed_headers(hook, "evt-1", body, datetime.now(UTC))
    assert headers["webhook-id"] == "evt-1"
    assert Webhook(KEY).verify(body, headers) == json.loads(body)
    with pytest.raises(WebhookVerificationError):
        Webhook(KEY).verify(body.replace("model", "other"), headers)
    old = delivery.signed_headers(hook, "evt-1", body, datetime.now(UTC) - timedelta(minutes=6))
    with pytest.raises(WebhookVerificationError):
        Webhook(KEY).verify(body, old)


# -- the panel ------------------------------------------------------------------------

def entry(state: str, **times: datetime) -> OutboxEntry:
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    return OutboxEntry(
        event_id=EventId(uuid.uuid4()), type="marking.row_failed", assignment_id="hw-1",
        queue_id=QueueId(uuid.uuid4()), state=state,  # type: ignore[arg-type]
        attempts=3, created_at=now - timedelta(hours=1),
        next_at=times.get("next_at", now), last_outcome="500",
        last_at=times.get("last_at"), of_state=4)


def test_the_panel_says_when_the_next_try_comes_or_when_it_gave_up():
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    waiting = entry("waiting", next_at=now + timedelta(seconds=25))
    gave_up = entry("gave_up", last_at=now - timedelta(minutes=3))
    assert deliveries.when_text(waiting, now) == "next try in 25s"
    assert deliveries.when_text(entry("waiting", next_at=now), now) == "due now"
    assert deliveries.when_text(gave_up, now) == "gave up 3m 0s ago"
    p = deliveries.panel([waiting, gave_up], now, enabled=True)
    assert (p.waiting, p.gave_up) == (4, 4)
    assert [line.state for line in p.lines] == ["waiting", "gave up"]
