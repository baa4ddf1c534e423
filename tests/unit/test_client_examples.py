"""The notification receivers of the docs (clients/*/examples) work, and the docs show them
(and the happy paths) exactly as they are tested."""

from __future__ import annotations

import importlib.util
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import respx
from standardwebhooks.webhooks import Webhook
from starlette.applications import Starlette

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [ROOT / "clients/python/examples/happy_path.py",
            ROOT / "clients/python/examples/receiver.py",
            ROOT / "clients/python/examples/slack_relay.py",
            ROOT / "clients/typescript/examples/happy-path.ts",
            ROOT / "clients/typescript/examples/receiver.ts"]
SECRET = "whsec_" + "dGhpcyBpcyBhIHRlc3Qgc2VjcmV0IG9mIDMyIGJ5dGVz"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The page of docs/ that shows each example.
SHOWN_ON = {"slack_relay.py": ROOT / "docs/operating/alerts.md"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_docs_show_the_tested_example(path: Path):
    page = SHOWN_ON.get(path.name, ROOT / "docs/integrating.md")
    assert path.read_text() in page.read_text(), f"{page.relative_to(ROOT)} lacks {path}"


async def test_the_receiver_takes_signed_notifications_and_refuses_forged_ones():
    got: list[tuple[str, dict[str, Any]]] = []
    route = load(ROOT / "clients/python/examples/receiver.py").notifications(
        SECRET, lambda webhook_id, event: got.append((webhook_id, event)))
    event = {"type": "marking.run_finished", "assignment_id": "hw-7", "completed": 30,
             "failed": 1, "cancelled": 0, "tokens": 12000, "cost_usd": 0.012,
             "started_at": "2026-11-23T10:00:00+00:00", "finished_at": "2026-11-23T10:05:00+00:00"}
    body = json.dumps(event)

    def headers(secret: str, msg_id: str) -> dict[str, str]:
        now = datetime.now(UTC)
        return {"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": Webhook(secret).sign(msg_id, now, body),
                "content-type": "application/json"}

    transport = httpx.ASGITransport(app=Starlette(routes=[route]))
    async with httpx.AsyncClient(transport=transport, base_url="http://host.test") as client:
        msg_id = f"evt_{uuid.uuid4().hex}"
        ok = await client.post("/aiqueue/notifications", content=body,
                               headers=headers(SECRET, msg_id))
        other = "whsec_" + "YW5vdGhlciBzZWNyZXQsIGFsc28gMzIgYnl0ZXMhIQ=="
        forged = await client.post("/aiqueue/notifications", content=body,
                                   headers=headers(other, msg_id))
    assert (ok.status_code, forged.status_code) == (204, 401)
    assert got == [(msg_id, event)]


@respx.mock
async def test_the_slack_relay_posts_signed_alerts_and_refuses_forged_ones():
    slack = respx.post("https://hooks.slack.test/services/T/B/X").mock(
        return_value=httpx.Response(200, text="ok"))
    route = load(ROOT / "clients/python/examples/slack_relay.py").slack_relay(
        SECRET, "https://hooks.slack.test/services/T/B/X")
    alert = {"type": "marking.alert_opened", "alert": "stalled", "pool": "default",
             "kind": None, "value": 312.5, "threshold": 300.0,
             "opened_at": "2026-11-23T10:00:00+00:00"}

    def signed(event: dict[str, Any], secret: str = SECRET) -> dict[str, Any]:
        body, now, msg_id = json.dumps(event), datetime.now(UTC), f"evt_{uuid.uuid4().hex}"
        return {"content": body, "headers": {
            "webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": Webhook(secret).sign(msg_id, now, body)}}

    transport = httpx.ASGITransport(app=Starlette(routes=[route]))
    async with httpx.AsyncClient(transport=transport, base_url="http://host.test") as client:
        url = "/aiqueue/notifications"
        ok = await client.post(url, **signed(alert))
        other = "whsec_" + "YW5vdGhlciBzZWNyZXQsIGFsc28gMzIgYnl0ZXMhIQ=="
        forged = await client.post(url, **signed(alert, other))
        # Other events are taken (204) but not relayed.
        run = await client.post(url, **signed({"type": "marking.run_finished"}))
    assert (ok.status_code, forged.status_code, run.status_code) == (204, 401, 204)
    assert slack.call_count == 1
    text = json.loads(slack.calls[0].request.content)["text"]
    assert "stalled" in text and "opened" in text and "312.5" in text


def test_the_clients_signature_check_matches_the_standard_library_one():
    from aiqueue_client import BadSignature, verify_notification
    body, now = '{"type": "marking.row_failed"}', datetime.now(UTC)
    headers = {"webhook-id": "evt_1", "webhook-timestamp": str(int(now.timestamp())),
               "webhook-signature": Webhook(SECRET).sign("evt_1", now, body)}
    assert verify_notification(SECRET, body, headers) == {"type": "marking.row_failed"}
    with pytest.raises(BadSignature):
        verify_notification(SECRET, body + " ", headers)
    with pytest.raises(BadSignature):
        verify_notification(SECRET, body, headers, now=now.timestamp() + 600)
