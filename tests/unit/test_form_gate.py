"""CSRF is checked once, in the gate: every form a page posts goes through gate.form.

No database here: the settings point at a closed port, so a handler that ran
would fail on it. A refused form answers 401/403 before that; the same form
with its session's token gets past the gate and fails on the database.
"""

from __future__ import annotations

import re

import httpx
import pytest
from starlette.routing import Route

from aiqueue.paths import ROOT
from aiqueue.settings import load_settings
from aiqueue.web.app import all_routes, create_app
from aiqueue.web.auth import COOKIE

SECRET = "unit-secret-0123456789abcdef"
TOKEN = "the-sessions-csrf-token"
QUEUE_ID = "00000000-0000-0000-0000-000000000007"
FORMS = sorted(r.path for r in all_routes() if isinstance(r, Route) and "POST" in (r.methods or ())
               and r.path.startswith(("/ai-queue", "/results")) and r.path != "/ai-queue/login")


def _filled(template: str) -> str:
    return (template.replace("{queue_id}", QUEUE_ID).replace("{submission_id}", QUEUE_ID)
            .replace("{assignment_id}", "hw-1"))


async def _post(template: str, body: dict[str, str]) -> httpx.Response:
    settings = load_settings({"MARKING_QUEUE_SECRET": SECRET,
                              "DATABASE_URL": "postgresql://u@127.0.0.1:1/nowhere"})
    app = create_app(settings)
    cookie = app.state.aiqueue.tokens.session("admin", TOKEN)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test",
                                 cookies={COOKIE: cookie}) as client:
        return await client.post(_filled(template), data=body)


def test_the_page_forms_are_found():
    assert len(FORMS) >= 12 and "/ai-queue/logout" in FORMS
    assert "/results/assignments/{assignment_id}/mark" in FORMS


@pytest.mark.parametrize("template", FORMS)
@pytest.mark.parametrize("bad", [{}, {"csrf_token": ""}, {"csrf_token": "another-token"}])
async def test_a_form_without_its_sessions_token_is_refused_before_its_handler(
    template: str, bad: dict[str, str]
):
    refused = await _post(template, {"assignment_id": "hw-1", **bad})
    assert refused.status_code in (401, 403), refused.text
    assert COOKIE not in refused.headers.get("set-cookie", "")  # logout kept the session


@pytest.mark.parametrize("template", FORMS)
async def test_the_same_form_with_its_token_gets_past_the_gate(template: str):
    passed = await _post(template, {"csrf_token": TOKEN, "assignment_id": "hw-1"})
    # The handler ran: it reached for the (closed) database, or, for logout, signed out.
    if template == "/ai-queue/logout":
        assert passed.status_code == 303 and COOKIE in passed.headers["set-cookie"]
    else:
        assert passed.status_code == 503, passed.text


def test_no_handler_checks_csrf_by_hand():
    web = ROOT / "aiqueue" / "web"
    by_hand = [p.name for p in web.glob("*.py")
               if p.name not in ("gate.py", "auth.py") and re.search(r"check_csrf|csrf_token",
                                                                     p.read_text())]
    assert by_hand == []
