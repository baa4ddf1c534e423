"""Vercel's defaults: APP_BASE_URL from the production URL, never a local one."""

from __future__ import annotations

import pytest

from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings
from aiqueue.settings.safety import is_local_url

VERCEL = {"VERCEL": "1", "DATABASE_URL": "postgresql://u@db.example.org/x",
          "MARKING_QUEUE_SECRET": "unit-secret-0123456789abcdef",
          "AI_MARKING_FUNCTION_URL": "https://fn.example.org/mark"}


def test_on_vercel_the_base_url_defaults_to_the_production_url():
    s = load_settings({**VERCEL, "VERCEL_PROJECT_PRODUCTION_URL": "marking.vercel.app"})
    assert s.app_base_url == "https://marking.vercel.app"
    assert s.callback_url == "https://marking.vercel.app/webhooks/ai-mark"
    assert s.on_vercel and not s.vercel_dev
    explicit = load_settings({**VERCEL, "VERCEL_PROJECT_PRODUCTION_URL": "marking.vercel.app",
                              "APP_BASE_URL": "https://marking.example.org/"})
    assert explicit.app_base_url == "https://marking.example.org"


@pytest.mark.parametrize("base", [None, "http://127.0.0.1:8000", "http://localhost:3000",
                                  "http://[::1]:8000", "http://0.0.0.0", "http://127.0.1.1"])
def test_a_local_base_url_on_vercel_stops_start_up_with_one_line(base):
    env = dict(VERCEL) if base is None else {**VERCEL, "APP_BASE_URL": base}
    with pytest.raises(SettingsError, match="^APP_BASE_URL is a local address") as caught:
        load_settings(env)
    assert "\n" not in caught.value.detail


def test_vercel_dev_and_local_runs_may_use_a_local_address():
    dev = load_settings({**VERCEL, "VERCEL_ENV": "development",
                         "APP_BASE_URL": "http://127.0.0.1:3000"})
    assert dev.vercel_dev and dev.app_base_url == "http://127.0.0.1:3000"
    assert load_settings({}).app_base_url == "http://127.0.0.1:8000"


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:8000", True), ("http://LOCALHOST", True), ("http://a.localhost", True),
    ("http://[::1]/", True), ("http://0.0.0.0:1", True), ("https://10.0.0.5", False),
    ("https://marking.example.org", False), ("https://localhost.example.org", False),
])
def test_what_counts_as_local(url, local):
    assert is_local_url(url) is local


LAMBDA = {"AI_MARKING_DISPATCH": "lambda", "AWS_REGION": "eu-west-1",
          "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret-key-example",
          "AI_MARKING_LAMBDA_FUNCTION": "ai-mark"}


@pytest.mark.parametrize(("name", "extra"), [
    ("AI_MARKING_CALLBACK_URL", {}),
    ("AWS_ENDPOINT_URL_LAMBDA", LAMBDA),
    ("AWS_ENDPOINT_URL_STS", {**LAMBDA, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/r"}),
])
def test_the_callback_and_aws_endpoints_must_be_https_outside_dev(name: str,
                                                                  extra: dict[str, str]):
    env = {**VERCEL, "VERCEL_PROJECT_PRODUCTION_URL": "marking.vercel.app", **extra}
    with pytest.raises(SettingsError, match=f"^{name} must be an https:// URL") as caught:
        load_settings({**env, name: "http://aws.example.org"})
    assert "\n" not in caught.value.detail
    assert load_settings({**env, name: "https://aws.example.org"})
    local = load_settings({**env, "VERCEL_ENV": "development", "APP_BASE_URL":
                           "http://127.0.0.1:3000", name: "http://aws.example.org"})
    assert local.vercel_dev
