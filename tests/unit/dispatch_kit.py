"""The dispatch tests' runtime: settings aimed at a respx function, a FakeStore, the client
of tests/unit/conftest.py."""

from __future__ import annotations

from typing import Any

import httpx

from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens
from tests.unit.fakes import FakeStore

FN = "http://function.test/mark"
SELF = "http://app.test/api/marking/process-queue"
SECRET = "unit-secret-0123456789abcdef"


def settings(**kw: Any) -> Settings:
    base = Settings(queue_secrets=(SECRET,), app_base_url="http://app.test", function_url=FN,
                    function_token="fn-token", callback_url="http://app.test/webhooks/ai-mark",
                    retry_base_seconds=10, retry_max_seconds=300, dispatch_timeout_seconds=0.5)
    return base.with_overrides(**kw)


def runtime(store: FakeStore, client: httpx.AsyncClient, **kw: Any) -> Runtime[FakeStore]:
    s = settings(**kw)
    return Runtime(settings=s, store=store, http=client, tokens=Tokens(s.queue_secret))
