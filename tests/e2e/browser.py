"""What the browser tests share: Debian's Chromium, the demo class, the teacher page's app."""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

import pytest
from starlette.applications import Starlette

from aiqueue.db.store import Store, connect_pool
from aiqueue.dev import demo
from aiqueue.reads.live import LiveConfig
from aiqueue.web.app import create_app
from aiqueue.web.live_api import configure
from tests.conftest import make_settings

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
