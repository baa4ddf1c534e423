"""What the browser tests share: Debian's Chromium, the demo class, the teacher page's app,
the login, and the teacher page opened in Chromium with its servers running."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.async_api import Browser, Page, ViewportSize, expect
from starlette.applications import Starlette

from aiqueue.db.store import Store, connect_pool
from aiqueue.dev import demo
from aiqueue.reads.live import LiveConfig
from aiqueue.web.app import create_app
from aiqueue.web.live_api import configure
from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import SECRET, make_settings
from tests.e2e.live_servers import serve
from tests.e2e.servers import free_port

CHROMIUM = shutil.which("chromium")
BROWSER_MARKS = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None and not os.environ.get("AIQUEUE_REQUIRE_BROWSER"),
                       reason="Debian's chromium is not installed"),
]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
MARK = re.compile(r"^\d+(\.\d+)? / 10$")
TEACHER_PAGE = f"/results/assignments/{demo.ASSIGNMENT_ID}"
# The reference function answering quickly, as the teacher-page tests want it.
QUICK = FunctionSettings(simulate_latency=0.05, callback_backoff=0.05)


async def seed_demo(db_url: str) -> None:
    """The demo class the teacher page shows."""
    store = Store(await connect_pool(db_url, max_size=2))
    await demo.seed(store)
    await store.close()


def teacher_app(db_url: str, port: int, *, fn_port: int | None = None,
                live: LiveConfig | None = None, **overrides: Any) -> Starlette:
    """The app on 127.0.0.1:`port`, dispatching to a function on `fn_port` (or nowhere)."""
    base = f"http://127.0.0.1:{port}"
    function_url = f"http://127.0.0.1:{fn_port}/" if fn_port else "http://127.0.0.1:9/unreachable"
    app = create_app(make_settings(db_url, app_base_url=base,
                                   callback_url=f"{base}/webhooks/ai-mark",
                                   function_url=function_url, **overrides))
    if live is not None:
        configure(app, live)
    return app


async def launch(pw: Any) -> Any:
    """Headless Chromium, as the machine has it (no browser download)."""
    return await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)


async def log_in(page: Page, base: str, target: str) -> None:
    """Open `target`, which sends a stranger to the login; sign in and land on `target`."""
    await page.goto(f"{base}{target}")
    await expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/ai-queue/login\?next="))
    await page.fill("#password", SECRET)
    await page.click("button[type=submit]")
    await expect(page).to_have_url(f"{base}{target}")


@dataclass
class TeacherPage:
    """The logged-in teacher page, the app's address, and the page's uncaught errors."""

    page: Page
    base: str
    errors: list[str]


@asynccontextmanager
async def teacher_page(browser: Browser, db_url: str, *, function: FunctionSettings | None = None,
                       viewport: ViewportSize | None = None, live: LiveConfig | None = None,
                       **overrides: Any) -> AsyncIterator[TeacherPage]:
    """The demo class's page in a new context of `browser` (the `chromium` fixture), logged
    in; the app served on loopback, dispatching to the reference function with `function`'s
    settings (or nowhere)."""
    port, fn_port = free_port(), free_port() if function else None
    app = teacher_app(db_url, port, fn_port=fn_port, live=live, **overrides)
    with ExitStack() as servers:
        if function is not None:
            servers.enter_context(serve(function_app(function), fn_port))
        servers.enter_context(serve(app, port))
        page = await browser.new_page(viewport=viewport)  # in a context of its own
        try:
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            base = f"http://127.0.0.1:{port}"
            await log_in(page, base, TEACHER_PAGE)
            yield TeacherPage(page, base, errors)
        finally:
            await page.context.close()
