"""Settings read once from the environment, with one clear line per bad variable."""

from __future__ import annotations

import pytest

from functions.ai_mark.errors import SettingsError
from functions.ai_mark.settings import Settings


def test_defaults() -> None:
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.backend == "simulate" and settings.simulate_latency == 0.5
    assert settings.heartbeat_seconds == 30 and settings.callback_tries == 5
    assert settings.function_token is None


def test_reads_every_variable() -> None:
    settings = Settings.from_env(
        {
            "AI_MARK_BACKEND": "OpenAI",
            "AI_MARK_MODEL": "qwen2.5-7b-instruct",
            "OPENAI_BASE_URL": "http://vllm:8000/v1/",
            "OPENAI_API_KEY": "sk-x",
            "OLLAMA_URL": "http://gpu:11434",
            "AI_MARK_TIMEOUT_SECONDS": "60",
            "AI_MARK_SIMULATE_LATENCY": "0",
            "AI_MARK_SIMULATE_FAILURE_RATE": "0.25",
            "AI_MARK_HEARTBEAT_SECONDS": "5",
            "AI_MARK_CALLBACK_TRIES": "3",
            "AI_MARK_CALLBACK_BACKOFF_SECONDS": "0",
            "AI_MARKING_FUNCTION_TOKEN": "t0k",
        }
    )
    assert settings == Settings(
        backend="openai",
        model="qwen2.5-7b-instruct",
        ollama_url="http://gpu:11434",
        openai_base_url="http://vllm:8000/v1",
        openai_api_key="sk-x",
        model_timeout=60,
        simulate_latency=0,
        simulate_failure_rate=0.25,
        heartbeat_seconds=5,
        callback_tries=3,
        callback_backoff=0,
        function_token="t0k",
    )


def test_model_default_follows_the_backend() -> None:
    assert Settings.from_env({"AI_MARK_BACKEND": "ollama"}).model == "llama3.1:8b"
    assert Settings.from_env({"AI_MARK_BACKEND": "simulate"}).model == "simulator"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AI_MARK_BACKEND", "gpt"),
        ("AI_MARK_SIMULATE_LATENCY", "soon"),
        ("AI_MARK_SIMULATE_LATENCY", "-1"),
        ("AI_MARK_SIMULATE_FAILURE_RATE", "1.5"),
        ("AI_MARK_HEARTBEAT_SECONDS", "0"),
        ("AI_MARK_TIMEOUT_SECONDS", "nan"),
        ("AI_MARK_CALLBACK_TRIES", "2.5"),
        ("AI_MARK_CALLBACK_TRIES", "0"),
        ("OLLAMA_URL", "localhost:11434"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: value})
    assert str(caught.value).startswith(name)
    assert "\n" not in str(caught.value)
