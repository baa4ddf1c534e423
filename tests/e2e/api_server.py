"""A running `aiqueue serve` for the black-box API tests (schemathesis, client kit).

The app serves a migrated test database with seeded submissions; its marking
function is the bundled reference function on loopback, so rows really
complete; live-event streams end after a short while, so clients reconnect.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import SECRET
from tests.e2e.live_servers import serve
from tests.e2e.servers import AppProcess, free_port


@dataclass(frozen=True)
class ApiServer:
    """Where the app listens and what it was given."""

    url: str
    secret: str
    app: AppProcess


@contextmanager
def api_server(db_url: str, *, stream_seconds: float = 2.0,
               function: bool = True) -> Iterator[ApiServer]:
    """`aiqueue serve` on `db_url` (already migrated), with the reference function."""
    fn_port = free_port()
    env = {
        "DATABASE_URL": db_url,
        "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/",
        "QUEUE_EVENTS_MAX_SECONDS": str(stream_seconds),
        "QUEUE_EVENTS_HEARTBEAT_SECONDS": "1",
        "QUEUE_EVENTS_POLL_SECONDS": "0.2",
        "QUEUE_RETRY_BASE_SECONDS": "0.1",
        "QUEUE_TICK_SECONDS": "1",
    }
    app = AppProcess(env, free_port())
    fn = function_app(FunctionSettings(simulate_latency=0.05, callback_backoff=0.05))
    if function:
        with serve(fn, fn_port):
            yield from _run(app)
    else:
        yield from _run(app)


def _run(app: AppProcess) -> Iterator[ApiServer]:
    app.start()
    try:
        yield ApiServer(app.url, SECRET, app)
    finally:
        app.stop()


