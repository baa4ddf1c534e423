"""The dispatch target's settings (AI_MARKING_DISPATCH, DO_FUNCTIONS_*, AWS_*), validated once,
and each kind's `KindTarget`: what dispatch needs to reach that kind's function."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from aiqueue.errors import SettingsError
from aiqueue.settings.safety import require_https

DispatchTarget = Literal["http", "digitalocean", "lambda"]
FunctionMode = Literal["async", "sync"]
TARGETS: tuple[DispatchTarget, ...] = ("http", "digitalocean", "lambda")

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
_FUNCTION = re.compile(r"[A-Za-z0-9_-]{1,64}")
_QUALIFIER = re.compile(r"[A-Za-z0-9$_-]{1,128}")
_ACCOUNT = re.compile(r"\d{12}")
_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}")
# The action's time limit that functions/ai_mark/project.yml ships (limits.timeout,
# 300000 ms); a test keeps the two equal.  DigitalOcean's own ceiling is 900 s.
DEFAULT_ACTION_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class DoTarget:
    """A DigitalOcean Functions action, invoked through the OpenWhisk REST API."""

    api_host: str
    namespace: str
    package: str
    action: str
    user: str
    secret: str
    # DO_FUNCTIONS_ACTION_TIMEOUT_SECONDS: the action's time limit (docs/guarantees.md); an
    # activation still not found this long (plus a grace) after its dispatch is gone.
    action_timeout_seconds: float = DEFAULT_ACTION_TIMEOUT_SECONDS


@dataclass(frozen=True)
class LambdaTarget:
    """An AWS Lambda function, invoked asynchronously and signed with SigV4."""

    region: str
    access_key_id: str
    secret_access_key: str
    session_token: str | None
    function: str
    qualifier: str | None
    endpoint: str
    # AWS_ROLE_ARN: assume this role with Vercel's OIDC token (no static keys then).
    role_arn: str | None = None
    sts_endpoint: str = "https://sts.amazonaws.com"


@dataclass(frozen=True)
class KindTarget:
    """One kind's function as dispatch reaches it (`Settings.target(kind)`): the platform,
    the function's URL and credentials, and what every dispatch carries."""

    kind: str
    dispatch: DispatchTarget
    # The http target's URL; a DigitalOcean or Lambda kind's web URL (the batch lane's).
    function_url: str
    function_token: str | None = field(repr=False)
    function_mode: FunctionMode
    digitalocean: DoTarget | None
    aws_lambda: LambdaTarget | None
    callback_url: str
    signing_secret: str | None = field(repr=False)
    dispatch_timeout_seconds: float


def _required(env: Mapping[str, str], name: str, target: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise SettingsError(f"{name} is required with AI_MARKING_DISPATCH={target}")
    return value


def _base_url(env: Mapping[str, str], name: str, default: str | None, target: str) -> str:
    raw = env.get(name, "").strip() or default or _required(env, name, target)
    if not re.fullmatch(r"https?://[^/?#\s]+/?", raw):
        raise SettingsError(f"{name} must be an http(s) URL without a path, got {raw!r}")
    return raw.rstrip("/")


def load_digitalocean(env: Mapping[str, str], *, local_run: bool = False) -> DoTarget:
    """DO_FUNCTIONS_API_HOST, _NAMESPACE, _ACTION (package/action) and _AUTH (uuid:secret)."""
    host = _base_url(env, "DO_FUNCTIONS_API_HOST", None, "digitalocean")
    # The namespace's key and the callback token travel to it.
    require_https("DO_FUNCTIONS_API_HOST", host, local_run=local_run)
    namespace = _required(env, "DO_FUNCTIONS_NAMESPACE", "digitalocean")
    if not _NAME.fullmatch(namespace):
        raise SettingsError("DO_FUNCTIONS_NAMESPACE must be a namespace id like fn-1234abcd-…")
    package, _, action = _required(env, "DO_FUNCTIONS_ACTION", "digitalocean").partition("/")
    if not (_NAME.fullmatch(package) and _NAME.fullmatch(action)):
        raise SettingsError("DO_FUNCTIONS_ACTION must be package/action, e.g. ai-mark/mark")
    user, sep, secret = _required(env, "DO_FUNCTIONS_AUTH", "digitalocean").partition(":")
    if not (sep and user and secret):
        raise SettingsError("DO_FUNCTIONS_AUTH must be the namespace's access key <uuid>:<secret>")
    return DoTarget(host, namespace, package, action, user, secret, _action_timeout(env))


def _action_timeout(env: Mapping[str, str]) -> float:
    """DO_FUNCTIONS_ACTION_TIMEOUT_SECONDS: seconds, default the shipped project.yml's limit."""
    raw = env.get("DO_FUNCTIONS_ACTION_TIMEOUT_SECONDS", "").strip()
    if not raw:
        return DEFAULT_ACTION_TIMEOUT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0.1 <= value <= 86400:
        raise SettingsError("DO_FUNCTIONS_ACTION_TIMEOUT_SECONDS must be a number of seconds "
                            f"between 0.1 and 86400, got {raw!r}")
    return value


def split_function(raw: str, region: str) -> tuple[str, str | None]:
    """(function name or ARN, qualifier) from `name[:qualifier]` or an ARN; raise if malformed."""
    bad = SettingsError(
        "AI_MARKING_LAMBDA_FUNCTION must be a function name or ARN, optionally :qualifier")
    parts = raw.split(":")
    # arn:aws:lambda:<region>:<account>:function:<name>[:q], or <account>:function:<name>[:q]
    if "function" in parts:
        at = parts.index("function")
        head, rest = parts[:at], parts[at + 1:]
        if head and head[0] == "arn":
            if len(head) != 5 or head[2] != "lambda" or not _ACCOUNT.fullmatch(head[4]):
                raise bad
            if head[3] != region:
                raise SettingsError(f"AI_MARKING_LAMBDA_FUNCTION is in region {head[3]!r}, "
                                    f"AWS_REGION is {region!r}")
        elif len(head) != 1 or not _ACCOUNT.fullmatch(head[0]):
            raise bad
        name = ":".join(parts[:at + 2])
    else:
        rest, name = parts, parts[0]
    if not 1 <= len(rest) <= 2 or not _FUNCTION.fullmatch(rest[0]):
        raise bad
    qualifier = rest[1] if len(rest) == 2 else None
    if qualifier is not None and not _QUALIFIER.fullmatch(qualifier):
        raise bad
    return name, qualifier


def load_lambda(env: Mapping[str, str], *, local_run: bool = False) -> LambdaTarget:
    """AWS_REGION, credentials, AI_MARKING_LAMBDA_FUNCTION and AWS_ENDPOINT_URL_LAMBDA."""
    region = _required(env, "AWS_REGION", "lambda")
    if not _REGION.fullmatch(region):
        raise SettingsError(f"AWS_REGION must be a region like eu-west-1, got {region!r}")
    role_arn = env.get("AWS_ROLE_ARN", "").strip() or None
    if role_arn is not None and not _ROLE_ARN.fullmatch(role_arn):
        raise SettingsError("AWS_ROLE_ARN must be an IAM role ARN like "
                            "arn:aws:iam::123456789012:role/aiqueue-dispatch")
    if role_arn is None:
        key_id = _required(env, "AWS_ACCESS_KEY_ID", "lambda")
        secret = _required(env, "AWS_SECRET_ACCESS_KEY", "lambda")
        session = env.get("AWS_SESSION_TOKEN", "").strip() or None
    else:
        # The role replaces static keys: on Vercel the AWS_* keys present are the
        # platform's own placeholders and must not be used.
        key_id = secret = ""
        session = None
    function, qualifier = split_function(
        _required(env, "AI_MARKING_LAMBDA_FUNCTION", "lambda"), region)
    suffix = ".cn" if region.startswith("cn-") else ""
    endpoint = _base_url(env, "AWS_ENDPOINT_URL_LAMBDA",
                         f"https://lambda.{region}.amazonaws.com{suffix}", "lambda")
    sts = _base_url(env, "AWS_ENDPOINT_URL_STS",
                    f"https://sts.{region}.amazonaws.com{suffix}", "lambda")
    # The signed calls (and the answers they carry) and Vercel's OIDC token travel to them.
    require_https("AWS_ENDPOINT_URL_LAMBDA", endpoint, local_run=local_run)
    require_https("AWS_ENDPOINT_URL_STS", sts, local_run=local_run)
    return LambdaTarget(region, key_id, secret, session, function, qualifier, endpoint,
                        role_arn, sts)


def load_target(
    env: Mapping[str, str], mode: str, *, local_run: bool = False
) -> tuple[DispatchTarget, DoTarget | None, LambdaTarget | None]:
    """AI_MARKING_DISPATCH and the chosen target's settings; sync mode only for http.

    `local_run` (the `dev` command, `vercel dev`) lets the targets' hosts use http://.
    """
    raw = env.get("AI_MARKING_DISPATCH", "").strip().lower() or "http"
    target = next((t for t in TARGETS if t == raw), None)
    if target is None:
        raise SettingsError(
            f"AI_MARKING_DISPATCH must be http, digitalocean or lambda, got {raw!r}")
    if target != "http" and mode == "sync":
        raise SettingsError(
            f"AI_MARKING_FUNCTION_MODE=sync works only with AI_MARKING_DISPATCH=http "
            f"({target} always calls back)")
    if target == "digitalocean":
        return target, load_digitalocean(env, local_run=local_run), None
    if target == "lambda":
        return target, None, load_lambda(env, local_run=local_run)
    return target, None, None
