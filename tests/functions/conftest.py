"""Shared builders for the reference marking function's tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from functions.ai_mark.settings import Settings

CALLBACK_URL = "https://app.test/webhooks/ai-mark"
OLLAMA_URL = "http://ollama.test"
OPENAI_URL = "http://llm.test"
ANSWER = "Plants capture sunlight with chlorophyll and turn it into sugar. SECRET-ANSWER-42"

BASE_DISPATCH: dict[str, Any] = {
    "queue_id": "0b6f4a52-6a55-4a8e-9d5e-1f3f1f7c2a10",
    "submission_id": "7d1e2c3b-1111-4a8e-9d5e-1f3f1f7c2a10",
    "assignment_id": "hw-7",
    "attempt": 1,
    "callback_url": CALLBACK_URL,
    "callback_token": "signed-token",
    "payload": {
        "question": "What is photosynthesis?",
        "rubric": "- Explains that plants use sunlight (2 points)\n"
        "- Identifies chlorophyll as the pigment\n"
        "- Mentions carbon dioxide and water as inputs",
        "max_score": 10,
    },
    "submission": {
        "id": "7d1e2c3b-1111-4a8e-9d5e-1f3f1f7c2a10",
        "assignment_id": "hw-7",
        "content": ANSWER,
    },
}


def make_dispatch(**overrides: Any) -> dict[str, Any]:
    """A valid dispatch; keyword arguments replace top-level fields."""
    dispatch = copy.deepcopy(BASE_DISPATCH)
    dispatch.update(overrides)
    return dispatch


@pytest.fixture
def dispatch() -> dict[str, Any]:
    return make_dispatch()


@pytest.fixture
def sim_settings() -> Settings:
    """The simulator with no latency and no callback backoff: fast, deterministic tests."""
    return Settings(simulate_latency=0, callback_backoff=0, heartbeat_seconds=30)
