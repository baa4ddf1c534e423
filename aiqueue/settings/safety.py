"""Settings that keep a real deployment safe (docs/operating/doctor.md, docs/deploying/index.md).

Where the secrets travel (https outside a local run), how long a secret must
be, and Vercel's defaults for APP_BASE_URL. Each rule refuses a value with
one line that names the variable.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

from aiqueue.errors import SettingsError
from aiqueue.settings.env import env_url

# What Vercel may put in a function's environment by itself (they grant nothing).
AWS_ENV_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_REGION", "AWS_DEFAULT_REGION")
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
# The shortest secret (MARKING_QUEUE_SECRET, CRON_SECRET, METRICS_TOKEN) and admin password.
MIN_SECRET = 16
MIN_PASSWORD = 12


def vercel_dev(env: Mapping[str, str]) -> bool:
    """`vercel dev`: VERCEL is set and VERCEL_ENV is development."""
    return bool(env.get("VERCEL")) and env.get("VERCEL_ENV", "").strip() == "development"


def is_local_url(url: str) -> bool:
    """Whether a URL's host is this machine (loopback, unspecified, localhost)."""
    host = (urlsplit(url).hostname or "").lower()
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def require_https(name: str, url: str, *, local_run: bool) -> None:
    """Refuse an http:// URL to another machine: the queue's secrets travel to it.

    `local_run` is the `dev` command or `vercel dev`, where plain http is the norm.
    """
    if local_run or not url.lower().startswith("http://") or is_local_url(url):
        return
    # The host only: a URL may carry a token in its query.
    host = urlsplit(url).hostname or "?"
    raise SettingsError(
        f"{name} must be an https:// URL outside `dev` (http:// to {host} would send "
        "the queue's secrets in clear text); only a local address may use http://")


def secure_url(env: Mapping[str, str], name: str, local_run: bool) -> str | None:
    """An http(s) URL the queue's secrets travel to: https:// unless local."""
    url = env_url(env, name)
    if url is not None:
        require_https(name, url, local_run=local_run)
    return url


def secret_values(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """Space-separated values, newest first (rotation); each at least MIN_SECRET characters."""
    values = tuple(env.get(name, "").split())
    if any(len(v) < MIN_SECRET for v in values):
        raise SettingsError(f"{name}: each value must be at least {MIN_SECRET} characters")
    return values


def cron_values(env: Mapping[str, str], name: str = "CRON_SECRET") -> tuple[str, ...]:
    """CRON_SECRET's values, and the whole value as set when it holds several.

    Vercel Cron sends `Authorization: Bearer <CRON_SECRET>` with the variable as it
    is, so during a rotation (`new old`) it sends both words: accept that too.
    """
    values = secret_values(env, name)
    whole = env.get(name, "").strip()
    return (*values, whole) if len(values) > 1 else values


def single_secret(env: Mapping[str, str], name: str, minimum: int = MIN_SECRET) -> str | None:
    """One secret value (METRICS_TOKEN, AI_QUEUE_ADMIN_PASSWORD), at least `minimum` long."""
    value = env.get(name, "").strip()
    if value and len(value) < minimum:
        raise SettingsError(f"{name} must be at least {minimum} characters")
    return value or None


def app_base_url(env: Mapping[str, str], port: int, url: str | None) -> str:
    """APP_BASE_URL (`url`), else Vercel's own URL of this deployment; never a local one there.

    A preview deployment defaults to its own URL (VERCEL_URL), not production's:
    its chain and callbacks must come back to the code that sent them.
    """
    default = f"http://127.0.0.1:{port}"
    if env.get("VERCEL"):
        preview = env.get("VERCEL_ENV", "").strip() == "preview"
        variable = "VERCEL_URL" if preview else "VERCEL_PROJECT_PRODUCTION_URL"
        host = env.get(variable, "").strip().strip("/").removeprefix("https://")
        if host:
            default = f"https://{host}"
    base = (url or default).rstrip("/")
    if env.get("VERCEL") and not vercel_dev(env) and is_local_url(base):
        raise SettingsError(
            f"APP_BASE_URL is a local address ({base}) on Vercel: set APP_BASE_URL to the "
            "deployment's public URL (the chain and the function's callbacks use it)")
    return base
