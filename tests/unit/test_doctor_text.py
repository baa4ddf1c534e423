"""What the doctor says for each refusal and each probe outcome: the mistake and its fix."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from uuid import uuid4

import pytest

from aiqueue import dispatch
from aiqueue.cli import doctor_settings, load_doctor
from aiqueue.dev.defaults import DEV_FUNCTION_PORT, dev_settings
from aiqueue.doctor.checks import check_vercel
from aiqueue.doctor.report import Check, Doctor, Report, settings_failed
from aiqueue.doctor.roles import check_lockdown, cron_period_seconds
from aiqueue.doctor.text import function_finding, probe_finding
from aiqueue.errors import SettingsError
from aiqueue.models import Exposure
from aiqueue.queue.probes import ProbeResult, parse_probe
from aiqueue.settings import load_settings
from aiqueue.tokens import Tokens
from tests.conftest import CRON

SECRET = "unit-secret-0123456789abcdef"
BASE = {"MARKING_QUEUE_SECRET": SECRET, "AI_MARKING_FUNCTION_URL": "https://fn.example.org/m"}
DO = {**BASE, "AI_MARKING_DISPATCH": "digitalocean",
      "DO_FUNCTIONS_API_HOST": "https://faas-nyc1-2ef2e6cc.doserverless.co",
      "DO_FUNCTIONS_NAMESPACE": "fn-1", "DO_FUNCTIONS_ACTION": "ai-mark/mark",
      "DO_FUNCTIONS_AUTH": "u:s"}
LAMBDA = {**BASE, "AI_MARKING_DISPATCH": "lambda", "AWS_REGION": "us-east-1",
          "AWS_ACCESS_KEY_ID": "ASIAPLACEHOLDER", "AWS_SECRET_ACCESS_KEY": "x",
          "AWS_SESSION_TOKEN": "y", "AI_MARKING_LAMBDA_FUNCTION": "ai-mark"}


@pytest.mark.parametrize(("env", "failed", "says", "fix"), [
    (BASE, dispatch.Failed("function_http_401", 401), "refused AI_MARKING_FUNCTION_TOKEN",
     "AI_MARKING_FUNCTION_TOKEN"),
    (BASE, dispatch.Failed("dispatch_connect_error"), "cannot connect to AI_MARKING_FUNCTION_URL",
     "deployed"),
    (BASE, dispatch.Failed("function_http_422", 422), "too old to know probes",
     "functions/ai_mark"),
    (DO, dispatch.Failed("do_http_401", 401), "DO_FUNCTIONS_AUTH", "access key"),
    (DO, dispatch.Failed("do_http_404", 404), "no such action", "DO_FUNCTIONS_ACTION"),
    (LAMBDA, dispatch.Failed("lambda_http_404", 404), "AWS_REGION=us-east-1", "AWS_REGION"),
    (LAMBDA, dispatch.Failed("lambda_http_403", 403),
     "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION", "AWS_ROLE_ARN"),
    ({**LAMBDA, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/r"},
     dispatch.Failed("sts_http_403"), "STS refused", "trust policy"),
    ({**LAMBDA, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/r"},
     dispatch.Failed("oidc_token_missing"), "no Vercel OIDC token", "OIDC Federation"),
])
def test_each_refusal_names_the_mistake_and_the_fix(env, failed, says, fix):
    s = load_settings(env)
    status, detail, how = function_finding(s.target(), failed, s.aws_env_names)
    assert status == "fail" and says in detail and how is not None and fix in how


def test_an_accepted_or_busy_function_is_reachable():
    s = load_settings(DO)
    assert function_finding(s.target(), dispatch.Accepted(ref="act-1"))[:2] == (
        "pass", "DigitalOcean action ai-mark/mark at "
                "https://faas-nyc1-2ef2e6cc.doserverless.co took the probe (act-1)")
    assert function_finding(s.target(), dispatch.Busy(None, 429))[0] == "pass"


def test_probe_outcomes():
    s = load_settings(BASE)
    sent = dispatch.Accepted()
    ok = probe_finding(s.target(), ProbeResult(sent, "probe", {"function": "ai_mark"}, 0.25))
    assert ok[0] == "pass" and "0.25 s (function ai_mark)" in ok[1]
    old = probe_finding(s.target(),
                        ProbeResult(sent, "failed", {"error": "function:invalid_input"}, 1))
    assert old[0] == "fail" and "too old" in old[1] and "function:invalid_input" in old[1]
    lost = probe_finding(s.target(), ProbeResult(sent, None, {}, 30))
    assert lost[0] == "fail" and "no callback reached http://127.0.0.1:8000/webhooks/ai-mark" \
        in lost[1] and lost[2] is not None and "APP_BASE_URL" in lost[2]


def test_probe_answers_keep_no_content():
    tokens, probe_id = Tokens(SECRET), uuid4()
    item = {"queue_id": str(probe_id), "token": tokens.probe(probe_id), "status": "probe",
            "probe": {"function": "ai_mark", "version": "has spaces: student text",
                      "other": "x"}}
    answer = parse_probe(item, tokens)
    assert answer is not None and answer.detail == {"function": "ai_mark"}
    assert parse_probe({**item, "queue_id": str(uuid4())}, tokens) is None
    assert parse_probe({**item, "token": tokens.callback(probe_id, 1, 1)}, tokens) is None
    done = parse_probe({**item, "status": "completed", "result": {"feedback": "quote"}}, tokens)
    assert done is not None and (done.answer, done.detail) == ("completed", {})


def test_the_report_prints_one_line_per_check_and_a_fix_under_a_failure():
    report = Report([Check("settings", "pass", "valid"), Check("function", "fail", "refused",
                                                                "set the token")])
    assert report.text().splitlines() == [
        "PASS  settings    valid", "FAIL  function    refused", f"{'':18}fix: set the token",
        "some checks failed"]
    assert not report.ok and report.to_json()["checks"][1]["fix"] == "set the token"


def test_a_warning_keeps_the_report_ok_and_prints_its_fix():
    report = Report([Check("settings", "pass", "valid"),
                     Check("role", "warn", "the app connects as the owner", "use a runtime role"),
                     Check("cron", "skip", "not on Vercel")])
    assert report.ok and report.warnings == 1
    assert report.text().splitlines() == [
        "PASS  settings    valid", "WARN  role        the app connects as the owner",
        f"{'':18}fix: use a runtime role", "SKIP  cron        not on Vercel",
        "all checks passed, 1 with a warning"]
    assert report.to_json()["ok"] is True
    assert report.to_json()["checks"][1]["status"] == "warn"
    bad = settings_failed(SettingsError("MARKING_QUEUE_SECRET: too short"))
    assert [c.status for c in bad.checks] == ["fail"] and not bad.ok


VERCEL = {**BASE, "VERCEL": "1", "DATABASE_URL": "postgresql://u@db.example.org/x",
          "VERCEL_PROJECT_PRODUCTION_URL": "marking.vercel.app"}


@pytest.mark.parametrize(("env", "status", "says"), [
    (BASE, "skip", "not on Vercel"),
    ({**VERCEL, "CRON_SECRET": "cron-secret-0123456789"}, "pass",
     "APP_BASE_URL https://marking.vercel.app, CRON_SECRET set"),
    (VERCEL, "fail", "CRON_SECRET is not set"),
    ({**VERCEL, "VERCEL_ENV": "development", "APP_BASE_URL": "http://127.0.0.1:3000",
      "CRON_SECRET": CRON}, "pass", "vercel dev"),
])
async def test_the_vercel_check(env, status, says):
    doc = Doctor(load_settings(env), None)
    await check_vercel(doc)
    (check,) = doc.report.checks
    assert check.status == status and says in check.detail
    assert (check.fix is not None) is (status == "fail")


def test_the_doctor_beside_dev_uses_devs_secret_and_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    env: dict[str, str] = {}  # no DATABASE_URL, no MARKING_QUEUE_SECRET: the dev defaults
    dev = dev_settings(load_settings(env), env, DEV_FUNCTION_PORT)  # what `dev` runs with
    doctor = doctor_settings(load_settings(env), env)  # a second terminal, same folder
    assert doctor.queue_secrets == dev.queue_secrets
    assert (tmp_path / ".data" / "dev-secret").read_text().strip() == doctor.queue_secret
    assert doctor.function_url == dev.function_url == "http://127.0.0.1:8001/"
    assert doctor.callback_url == dev.callback_url
    # A deployment's doctor (DATABASE_URL set) keeps its own settings.
    deployed = load_settings({**BASE, "DATABASE_URL": "postgresql://u@db.example.org/x",
                              "MARKING_QUEUE_SECRET": "deployed-secret-0123456789"})
    assert doctor_settings(deployed, {}) is deployed


def test_a_probe_callback_the_app_rejected_names_the_two_secrets():
    s = load_settings(BASE)
    rejected = probe_finding(s.target(),
                             ProbeResult(dispatch.Accepted(), None, {}, 30, app_status=401))
    assert rejected[0] == "fail" and "rejected" in rejected[1]
    assert "the two sides hold different secrets" in rejected[1]
    assert rejected[2] is not None and "MARKING_QUEUE_SECRET" in rejected[2]
    assert "APP_BASE_URL" not in rejected[2]


@pytest.mark.parametrize(("schedule", "seconds"), [
    ("* * * * *", 60), ("*/5 * * * *", 300), ("0 * * * *", 3600), ("0 */6 * * *", 21600),
    ("0 3 * * *", 86400), ("0 3 * * 1", 7 * 86400), ("15 3 1 * *", 31 * 86400)])
def test_the_cron_period_of_a_schedule(schedule: str, seconds: float):
    assert cron_period_seconds(schedule) == seconds


class _Store:
    """What check_lockdown reads: exposures, the platform's roles, the wide members."""

    def __init__(self, exposures: list[Exposure], wide: list[str]) -> None:
        self.exposures, self.wide = exposures, wide

    async def queue_exposures(self) -> list[Exposure]:
        return self.exposures

    async def platform_roles(self) -> list[str]:
        return ["supabase_admin", "supabase_read_only_user"]

    async def wide_members(self) -> list[str]:
        return self.wide


async def _lockdown(exposures: list[Exposure], wide: list[str]) -> Check:
    rt = SimpleNamespace(store=_Store(exposures, wide))
    doc = Doctor(load_settings(BASE), rt, schema_current=True)  # type: ignore[arg-type]
    await check_lockdown(doc)
    return doc.report.checks[0]


async def test_the_lockdown_fix_names_a_membership_no_migration_takes_away():
    clean = await _lockdown([], [])
    assert clean.status == "pass" and "note" in clean.detail
    assert "supabase_admin, supabase_read_only_user" in clean.detail
    granted = await _lockdown([Exposure("anon", "ai_marking_queue", "table", "SELECT")], [])
    assert granted.status == "fail" and granted.fix is not None
    assert "migrate up" in granted.fix and "pg_read_all_data" not in granted.fix
    member = await _lockdown([Exposure("app_admin", "ai_marking_queue", "table", "SELECT")],
                             ["app_admin"])
    assert member.fix is not None and "app_admin reach every table through" in member.fix
    assert "neon_superuser" in member.fix and "no migration takes away" in member.fix


def test_the_doctor_reads_the_environment_as_dev_only_beside_dev():
    lan = {"APP_BASE_URL": "http://192.168.1.5:8000", "MARKING_QUEUE_SECRET": "x" * 20}
    # No DATABASE_URL: the doctor checks what `dev` runs, which may use http:// anywhere.
    assert load_doctor(lan).app_base_url == "http://192.168.1.5:8000"
    # A deployment's doctor refuses it, as `serve` does.
    with pytest.raises(SettingsError, match="^APP_BASE_URL must be an https:// URL"):
        load_doctor({**lan, "DATABASE_URL": "postgresql://u@db.example.org/x"})
