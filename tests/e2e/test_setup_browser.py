"""The Setup panel of /ai-queue in a real Chromium: the doctor runs only when asked, and its
report shows each check, a failure with its fix."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from playwright.async_api import Browser, expect

from aiqueue.web.app import create_app
from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import make_settings
from tests.e2e.browser import BROWSER_MARKS, log_in
from tests.e2e.servers import ROOT, free_port, run_asgi
from tests.roles import RuntimeDb, runtime_database

pytestmark = BROWSER_MARKS
TOKEN = "function-token-0123456789"


@pytest.fixture
def function_port() -> Iterator[int]:
    port = free_port()
    settings = FunctionSettings(simulate_latency=0, callback_backoff=0, function_token=TOKEN)
    with run_asgi(function_app(settings), port):
        yield port


def serve(db_url: str, function_port: int, token: str) -> tuple[object, str, int]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    app = create_app(make_settings(
        db_url, app_base_url=base, callback_url=f"{base}/webhooks/ai-mark",
        function_url=f"http://127.0.0.1:{function_port}/mark", function_token=token))
    return app, base, port


@pytest.fixture
async def supabase(pg_admin: str) -> AsyncIterator[RuntimeDb]:
    """A database prepared as Supabase prepares one, migrated with a runtime role."""
    async with runtime_database(pg_admin, platform="supabase") as db:
        yield db


@pytest.mark.parametrize(("token", "as_owner"), [
    (TOKEN, False), ("a-wrong-token-from-the-docs", False), (TOKEN, True)])
async def test_the_setup_panel_runs_the_doctor_on_demand(
    chromium: Browser, supabase: RuntimeDb, function_port: int, token: str, as_owner: bool
):
    dsn = supabase.owner_dsn if as_owner else supabase.runtime_dsn
    app, base, port = serve(dsn, function_port, token)
    asked: list[str] = []
    with run_asgi(app, port):
        page = await chromium.new_page(viewport={"width": 1280, "height": 1400})
        try:
            page.set_default_timeout(30_000)
            page.on("request", lambda r: asked.append(r.url) if "/doctor" in r.url else None)
            await log_in(page, base, "/ai-queue")
            # Polls come and go (every 4 s); the doctor is not among them.
            await page.wait_for_timeout(4500)
            assert asked == []
            await expect(page.locator("#setup-report")).to_be_empty()
            await page.click("#setup-run")
            report = page.locator("#setup-checks")
            await expect(report).to_be_visible()
            function = page.locator('#setup-checks tr[data-check="function"]')
            probe = page.locator('#setup-checks tr[data-check="probe"]')
            role = page.locator('#setup-checks tr[data-check="role"]')
            if as_owner:
                # The queue's owner works, but a runtime role is what it should be.
                await expect(page.locator("#setup-summary")).to_contain_text(
                    "Every check passed; 1 with a warning")
                await expect(role).to_have_class("check-warn")
                await expect(role).to_contain_text("Fix: create a role for the app with SQL")
                await expect(probe).to_contain_text("called back through")
            elif token == TOKEN:
                await expect(page.locator("#setup-summary")).to_have_text("Every check passed.")
                await expect(function).to_have_class("check-pass")
                await expect(role).to_have_class("check-pass")
                await expect(probe).to_contain_text("called back through")
            else:
                await expect(page.locator("#setup-summary")).to_contain_text("Some checks failed")
                await expect(function).to_have_class("check-fail")
                await expect(function).to_contain_text("refused AI_MARKING_FUNCTION_TOKEN")
                await expect(function).to_contain_text("Fix: set AI_MARKING_FUNCTION_TOKEN")
                await expect(probe).to_have_class("check-skip")
            await expect(page.locator('#setup-checks tr[data-check="lockdown"]')).to_have_class(
                "check-pass")
            (ROOT / "test-artifacts").mkdir(exist_ok=True)
            name = "warn" if as_owner else "ok" if token == TOKEN else "bad"
            shot = ROOT / "test-artifacts" / f"setup-{name}.png"
            await page.locator("#setup").screenshot(path=str(shot))
            await expect(page.locator("#setup-run")).to_have_text("Run checks again")
        finally:
            await page.context.close()
    assert len(asked) == 1 and asked[0].endswith("/ai-queue/doctor")
