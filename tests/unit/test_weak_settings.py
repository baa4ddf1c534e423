"""Weak values stop start-up with one line naming the variable (docs/deploying/index.md)."""

from __future__ import annotations

import pytest

from aiqueue.dev.defaults import load_dev
from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings
from aiqueue.tokens import Tokens
from tests.conftest import CRON, METRICS, PASSWORD

SECRET = "unit-secret-0123456789abcdef"
DO = {"AI_MARKING_DISPATCH": "digitalocean", "DO_FUNCTIONS_NAMESPACE": "fn-ns",
      "DO_FUNCTIONS_ACTION": "ai-mark/mark", "DO_FUNCTIONS_AUTH": "user:key"}
NOTIFY_SECRET = "whsec_" + "A" * 32
# Each variable the queue's secrets travel to, and what else it needs to load.
SECURE_URLS = {
    "APP_BASE_URL": {},
    "AI_MARKING_FUNCTION_URL": {},
    "DO_FUNCTIONS_API_HOST": DO,
    "QUEUE_NOTIFY_URL": {"QUEUE_NOTIFY_SECRET": NOTIFY_SECRET},
}
VERCEL = {"VERCEL": "1", "DATABASE_URL": "postgresql://u@db.example.org/x",
          "MARKING_QUEUE_SECRET": SECRET, "AI_MARKING_FUNCTION_URL": "https://fn.example.org/m"}


def one_line_naming(name: str, env: dict[str, str], **kw: bool) -> str:
    with pytest.raises(SettingsError) as caught:
        load_settings({"MARKING_QUEUE_SECRET": SECRET, **env}, **kw)
    detail = caught.value.detail
    assert detail.startswith(name) and "\n" not in detail
    return detail


@pytest.mark.parametrize("name", sorted(SECURE_URLS))
def test_http_to_another_host_is_refused_outside_dev(name: str):
    # DO_FUNCTIONS_API_HOST is a host without a path.
    tail = "" if name == "DO_FUNCTIONS_API_HOST" else "/x?token=t0k3n"
    env = {**SECURE_URLS[name], name: f"http://marking.example.org{tail}"}
    detail = one_line_naming(name, env)
    assert "https://" in detail and "marking.example.org" in detail
    # The query (which may hold a token) is not repeated.
    assert "t0k3n" not in detail
    # In production too, and on Vercel.
    one_line_naming(name, {**VERCEL, "VERCEL": "", "AIQUEUE_ENV": "production", **env})
    one_line_naming(name, {**VERCEL, "VERCEL_PROJECT_PRODUCTION_URL": "m.vercel.app", **env})


@pytest.mark.parametrize("name", sorted(SECURE_URLS))
@pytest.mark.parametrize("url", ["https://marking.example.org", "http://127.0.0.1:8001",
                                 "http://localhost:3000", "http://[::1]:9000"])
def test_https_or_a_local_address_is_accepted(name: str, url: str):
    load_settings({"MARKING_QUEUE_SECRET": SECRET, **SECURE_URLS[name], name: url})


@pytest.mark.parametrize("name", sorted(SECURE_URLS))
def test_the_dev_command_and_vercel_dev_may_use_http_anywhere(name: str):
    env = {"MARKING_QUEUE_SECRET": SECRET, **SECURE_URLS[name],
           name: "http://marking.example.org"}
    load_settings(env, dev=True)
    load_settings({**VERCEL, **env, "VERCEL_ENV": "development"})


def test_the_dev_command_reads_the_environment_as_dev(tmp_path):
    env = {"MARKING_QUEUE_SECRET": SECRET, "APP_BASE_URL": "http://192.168.1.5:8000",
           "AI_MARKING_FUNCTION_URL": "http://gpu-box.lan:8001/"}
    s = load_dev(env, 8000, 8001, tmp_path / "secret")
    assert (s.app_base_url, s.function_url) == (env["APP_BASE_URL"], env["AI_MARKING_FUNCTION_URL"])
    one_line_naming("APP_BASE_URL", env)


@pytest.mark.parametrize(("name", "short"), [
    ("MARKING_QUEUE_SECRET", "s" * 15), ("CRON_SECRET", "c" * 15),
    ("METRICS_TOKEN", "m" * 15), ("AI_QUEUE_ADMIN_PASSWORD", "p" * 11),
    # Each value of a rotation list.
    ("MARKING_QUEUE_SECRET", f"{SECRET} short"), ("CRON_SECRET", f"{CRON} short"),
])
def test_a_short_secret_is_refused(name: str, short: str):
    detail = one_line_naming(name, {name: short})
    assert "at least" in detail and short not in detail


def test_secrets_of_the_minimum_length_load():
    s = load_settings({"MARKING_QUEUE_SECRET": "s" * 16, "CRON_SECRET": "c" * 16,
                       "METRICS_TOKEN": "m" * 16, "AI_QUEUE_ADMIN_PASSWORD": "p" * 12})
    assert (s.queue_secret, s.cron_secrets, s.metrics_token, s.admin_password) == (
        "s" * 16, ("c" * 16,), "m" * 16, "p" * 12)
    assert load_settings({"METRICS_TOKEN": METRICS}).metrics_token == METRICS


def test_the_whole_cron_secret_is_accepted_during_a_rotation():
    new, old = "new-cron-secret-0123", "old-cron-secret-4567"
    s = load_settings({"CRON_SECRET": f"  {new}  {old} "})
    # Vercel Cron sends the variable as it is set (outer spaces dropped by HTTP).
    assert s.cron_secrets == (new, old, f"{new}  {old}")
    assert load_settings({"CRON_SECRET": new}).cron_secrets == (new,)


def test_a_preview_deployment_defaults_to_its_own_url():
    preview = {**VERCEL, "VERCEL_ENV": "preview", "VERCEL_URL": "marking-git-x-team.vercel.app",
               "VERCEL_PROJECT_PRODUCTION_URL": "marking.vercel.app"}
    s = load_settings(preview)
    assert s.app_base_url == "https://marking-git-x-team.vercel.app"
    assert s.callback_url == "https://marking-git-x-team.vercel.app/webhooks/ai-mark"
    production = load_settings({**preview, "VERCEL_ENV": "production"})
    assert production.app_base_url == "https://marking.vercel.app"
    chosen = load_settings({**preview, "APP_BASE_URL": "https://preview.example.org"})
    assert chosen.app_base_url == "https://preview.example.org"


def test_a_preview_without_its_url_is_refused_rather_than_sent_to_production():
    with pytest.raises(SettingsError, match="^APP_BASE_URL is a local address"):
        load_settings({**VERCEL, "VERCEL_ENV": "preview",
                       "VERCEL_PROJECT_PRODUCTION_URL": "marking.vercel.app"})


def test_changing_an_own_admin_password_ends_its_sessions():
    s = load_settings({"MARKING_QUEUE_SECRET": SECRET, "AI_QUEUE_ADMIN_PASSWORD": PASSWORD})
    changed = load_settings({"MARKING_QUEUE_SECRET": SECRET,
                             "AI_QUEUE_ADMIN_PASSWORD": PASSWORD + "-new"})
    cookie = Tokens(s.queue_secrets, session_binding=s.session_binding).session("admin", "c")
    same = Tokens(s.queue_secrets, session_binding=s.session_binding)
    assert same.verify_session(cookie, max_age=60) == ("admin", "c")
    other = Tokens(changed.queue_secrets, session_binding=changed.session_binding)
    assert other.verify_session(cookie, max_age=60) is None


def test_a_password_that_falls_back_to_the_secret_keeps_sessions_across_a_rotation():
    old = load_settings({"MARKING_QUEUE_SECRET": SECRET})
    rotated = load_settings({"MARKING_QUEUE_SECRET": f"new-{SECRET} {SECRET}"})
    assert rotated.admin_password == f"new-{SECRET}"
    cookie = Tokens(old.queue_secrets, session_binding=old.session_binding).session("admin", "c")
    after = Tokens(rotated.queue_secrets, session_binding=rotated.session_binding)
    assert after.verify_session(cookie, max_age=60) == ("admin", "c")
