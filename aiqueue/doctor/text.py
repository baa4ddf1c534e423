"""What the doctor says about the function and the probe: each finding and its fix."""

from __future__ import annotations

from typing import Literal

from aiqueue import dispatch
from aiqueue.queue.probes import ProbeResult
from aiqueue.settings.targets import KindTarget

Finding = tuple[Literal["pass", "warn", "fail", "skip"], str, str | None]
DEPLOY_CURRENT = ("deploy the current functions/ai_mark (a function of your own must answer a "
                  "dispatch with \"probe\": true by calling back a \"probe\" item, see its README)")


def cache_finding(pool: str, min_tokens: int, seen: tuple[int, float] | None) -> Finding:
    """Are a pool's recent prompt prefixes long enough for the provider to cache them?"""
    if seen is None:
        return "pass", f"pool {pool}: no prompt prefixes in the last week", None
    count, tokens = seen
    size = f"prefixes of about {round(tokens, -1 if tokens < 1000 else -2):,.0f} tokens"
    if tokens < min_tokens:
        return ("warn", f"pool {pool}: {size}: the model caches none (min_tokens {min_tokens})",
                "a payload (question and rubric) shorter than min_tokens pays full price on "
                "every answer; a longer shared rubric (worked examples, marking notes) is "
                "cached, see docs/prompt-cache.md")
    return "pass", f"pool {pool}: {size} ({count} in the last week), cached", None


def _where(target: KindTarget) -> str:
    """The function as the settings name it (no secret)."""
    if target.dispatch == "digitalocean" and target.digitalocean is not None:
        d = target.digitalocean
        return f"DigitalOcean action {d.package}/{d.action} at {d.api_host}"
    if target.dispatch == "lambda" and target.aws_lambda is not None:
        a = target.aws_lambda
        return f"Lambda function {a.function} in {a.region}"
    return f"AI_MARKING_FUNCTION_URL ({target.function_url})"


def function_finding(target: KindTarget, sent: dispatch.Outcome,
                     aws_env: tuple[str, ...] = ()) -> Finding:
    """Did the function take the probe's dispatch with these credentials?

    `aws_env`: the AWS_* variables present (Settings.aws_env_names), named when AWS refuses.
    """
    where = _where(target)
    if isinstance(sent, dispatch.Accepted):
        ref = f" ({sent.ref})" if sent.ref else ""
        return "pass", f"{where} took the probe{ref}", None
    if isinstance(sent, dispatch.Busy):
        return ("pass", f"{where} answered busy (HTTP {sent.http_status}): reachable, "
                        "but the probe could not run now", None)
    return "fail", *_refusal(target, sent, where, aws_env)


def _refusal(target: KindTarget, sent: dispatch.Failed, where: str,
             aws_env: tuple[str, ...]) -> tuple[str, str]:
    code, status = sent.code, sent.http_status
    platform = target.dispatch
    if code == "dispatch_connect_error":
        return (f"cannot connect to {where}",
                "check the URL/host and that the function is deployed and public")
    if code == "dispatch_timeout":
        return (f"{where} did not answer within QUEUE_DISPATCH_TIMEOUT_SECONDS="
                f"{target.dispatch_timeout_seconds:g}",
                "check the function is up; it must acknowledge at once")
    if code.startswith(("sts_", "oidc_")):
        return _sts_refusal(code, aws_env)
    if platform == "http" and status in (401, 403):
        return (f"{where} refused AI_MARKING_FUNCTION_TOKEN (HTTP {status})",
                "set AI_MARKING_FUNCTION_TOKEN here to the function's own "
                "AI_MARKING_FUNCTION_TOKEN")
    if platform == "digitalocean" and status in (401, 403):
        return (f"DigitalOcean refused DO_FUNCTIONS_AUTH (HTTP {status})",
                "set DO_FUNCTIONS_AUTH to the namespace's access key "
                "(`doctl serverless namespaces list` / the console's Settings → API)")
    if platform == "digitalocean" and status == 404:
        return (f"no such action: {where} (HTTP 404)",
                "check DO_FUNCTIONS_NAMESPACE and DO_FUNCTIONS_ACTION (package/action)")
    if platform == "lambda" and status in (401, 403, 404):
        return _lambda_refusal(target, status, aws_env)
    if status in (400, 422):
        return (f"{where} refused the probe (HTTP {status}): the function may be too old "
                "to know probes", DEPLOY_CURRENT)
    return (f"{where} answered the probe with {code}",
            "check the function's own logs for this request")


def _placeholders(names: tuple[str, ...]) -> str:
    if not names:
        return ""
    return (f" The environment has {', '.join(names)}: on Vercel these may be the platform's "
            "injected placeholders, which grant nothing on your account (and AWS_REGION is "
            "preset to Vercel's own region).")


def _lambda_refusal(target: KindTarget, status: int, aws_env: tuple[str, ...]
                    ) -> tuple[str, str]:
    assert target.aws_lambda is not None
    a = target.aws_lambda
    keys = "the assumed role (AWS_ROLE_ARN)" if a.role_arn else \
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
    if status == 404:
        detail = (f"AWS found no function {a.function} in AWS_REGION={a.region} (HTTP 404)."
                  + _placeholders(aws_env))
        fix = ("set AWS_REGION to the function's region and AI_MARKING_LAMBDA_FUNCTION to its "
               "name or ARN")
    else:
        detail = (f"AWS refused the invoke signed with {keys} (HTTP {status})."
                  + _placeholders(aws_env))
        fix = ("set AWS_ROLE_ARN to a role that trusts Vercel's OIDC provider and may "
               "lambda:InvokeFunction (no static keys), or set your own "
               "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
    return detail, fix


def _sts_refusal(code: str, aws_env: tuple[str, ...]) -> tuple[str, str]:
    if code == "oidc_token_missing":
        return ("AWS_ROLE_ARN is set but no Vercel OIDC token came (no x-vercel-oidc-token "
                "header, no VERCEL_OIDC_TOKEN)" + _placeholders(aws_env),
                "turn on OIDC Federation (Secure backend access) in the Vercel project's "
                "settings, or run the doctor through GET /api/marking/doctor on Vercel")
    return (f"STS refused to exchange Vercel's OIDC token for AWS_ROLE_ARN ({code})."
            + _placeholders(aws_env),
            "check the role's trust policy: it must trust Vercel's OIDC provider with your "
            "team's issuer, audience and project")


def probe_finding(target: KindTarget, result: ProbeResult) -> Finding:
    """Did the function call back through the webhook, and as one that knows probes?"""
    url = target.callback_url
    if result.answer == "probe":
        facts = " ".join(f"{k} {v}" for k, v in sorted(result.detail.items()))
        about = f" ({facts})" if facts else ""
        return ("pass", f"the function called back through {url} in "
                        f"{result.seconds:.2f} s{about}", None)
    if result.answer is not None:
        code = result.detail.get("error")
        said = f"`{result.answer}`" + (f", {code}" if code else "")
        return ("fail", f"the function treated the probe as a job (it answered {said}): it is "
                        "too old to know probes; nothing was marked", DEPLOY_CURRENT)
    if isinstance(result.sent, dispatch.Busy):
        return "fail", "the function was busy: the probe did not run", "run the doctor again"
    waited = f"no callback reached {url} within {result.seconds:.0f} s"
    if result.app_status in (401, 403):
        return ("fail", f"{waited}: the app there rejected a callback signed with this side's "
                        f"MARKING_QUEUE_SECRET (HTTP {result.app_status}), so it rejected the "
                        "probe's too: the two sides hold different secrets",
                "give the app and the doctor the same MARKING_QUEUE_SECRET (beside `python -m "
                "aiqueue dev`, run the doctor from the same folder with MARKING_QUEUE_SECRET "
                "unset: both then use .data/dev-secret)")
    return ("fail", f"{waited}: the function cannot reach the app, or it does not know probes",
            "set APP_BASE_URL (or AI_MARKING_CALLBACK_URL) to a public URL the function can "
            "reach (on Vercel: the production URL, with Deployment Protection off for "
            "/webhooks/ai-mark)")
