"""Asking the platform about an invocation (docs/guarantees.md): never raises, never long.

DigitalOcean keeps an activation record once an action ends (OpenWhisk's
activations API; 404 while it still runs); Lambda's configured timeout bounds
how long an invocation can live.  Only content-free codes leave this module:
an activation's result is handed on as the action's `callback` items, whose
tokens the caller checks.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

import httpx

from aiqueue.dispatch.aws import AwsCredentials, CredentialsError
from aiqueue.dispatch.sigv4 import Credentials, sign
from aiqueue.dispatch.targets import lambda_url
from aiqueue.settings.targets import DoTarget, LambdaTarget

# A look is housekeeping: it must never hold a process step for long.
LOOKUP_TIMEOUT_SECONDS = 5.0
# A failed read of Lambda's configuration is tried again after this long.
CONFIG_RETRY_SECONDS = 300.0
# ... and sooner when only the credentials were missing (AWS_ROLE_ARN: the first
# request with Vercel's OIDC token may come any moment).
CREDENTIALS_RETRY_SECONDS = 15.0

ActivationState = Literal["finished", "failed", "not_found", "unknown"]
# OpenWhisk's response.status of an activation that did not succeed, as a code.
_FAILED_STATUS = {
    "application error": "activation_error",
    "action developer error": "activation_crashed",
    "whisk internal error": "activation_platform_error",
}


@dataclass(frozen=True)
class Activation:
    """What DigitalOcean said about one activation.

    finished: the action returned; `items` are its `callback` items (unverified).
    failed: it ended with an error or a timeout; `code` says which, content-free.
    not_found: no record (yet): the action may still be running.
    unknown: the platform could not be asked; `code` says why.
    """

    state: ActivationState
    items: tuple[Any, ...] = ()
    code: str | None = None


def read_activation(record: object) -> Activation:
    """Classify an activation record (OpenWhisk's shape: response.success/status/result)."""
    response = record.get("response") if isinstance(record, dict) else None
    if not isinstance(response, dict):
        return Activation("unknown", code="activation_unreadable")
    result = response.get("result")
    result = result if isinstance(result, dict) else {}
    if response.get("success") is True or response.get("status") == "success":
        items = result.get("callback")
        return Activation("finished", tuple(items) if isinstance(items, list) else ())
    return Activation("failed", code=_failure_code(response.get("status"), result.get("error")))


def _failure_code(status: object, error: object) -> str:
    """A code for a failed activation; the platform's own words only pick among codes."""
    text = error.lower() if isinstance(error, str) else ""
    # "The action exceeded its time limits of 600000 milliseconds."
    if "time limit" in text:
        return "activation_timeout"
    # "The action exhausted its memory and was aborted."
    if "exhausted its memory" in text:
        return "activation_out_of_memory"
    return _FAILED_STATUS.get(status, "activation_failed") if isinstance(status, str) \
        else "activation_failed"


def activation_url(target: DoTarget, activation_id: str) -> str:
    """GET <host>/api/v1/namespaces/<ns>/activations/<id>."""
    ns, ref = quote(target.namespace, safe=""), quote(activation_id, safe="")
    return f"{target.api_host}/api/v1/namespaces/{ns}/activations/{ref}"


async def activation(http: httpx.AsyncClient, target: DoTarget, activation_id: str
                     ) -> Activation:
    """Read one activation record with the namespace's key (Basic auth, as dispatch)."""
    basic = base64.b64encode(f"{target.user}:{target.secret}".encode()).decode()
    try:
        response = await http.get(activation_url(target, activation_id),
                                  headers={"authorization": f"Basic {basic}"},
                                  timeout=httpx.Timeout(LOOKUP_TIMEOUT_SECONDS))
    except httpx.TimeoutException:
        return Activation("unknown", code="lookup_timeout")
    except Exception:
        # Whatever went wrong, the look is housekeeping: the row is asked about again.
        return Activation("unknown", code="lookup_error")
    if response.status_code == 404:
        return Activation("not_found")
    if response.status_code != 200:
        return Activation("unknown", code=f"lookup_http_{response.status_code}")
    try:
        return read_activation(response.json())
    except ValueError:
        return Activation("unknown", code="activation_unreadable")


def configuration_url(target: LambdaTarget) -> str:
    """GetFunctionConfiguration: GET /2015-03-31/functions/<name>/configuration."""
    return lambda_url(target).replace("/invocations", "/configuration", 1)


async def lambda_timeout(http: httpx.AsyncClient, target: LambdaTarget, now: datetime,
                         credentials: Credentials | None = None) -> float | None:
    """The function's configured timeout in seconds, or None when it cannot be read.

    `credentials`: the assumed role's (AWS_ROLE_ARN), as for dispatch; else the
    target's static keys.
    """
    url = configuration_url(target)
    creds = credentials or Credentials(
        target.access_key_id, target.secret_access_key, target.session_token)
    headers = sign("GET", url, {}, b"", credentials=creds, region=target.region,
                   service="lambda", now=now)
    try:
        response = await http.get(url, headers=headers,
                                  timeout=httpx.Timeout(LOOKUP_TIMEOUT_SECONDS))
        value = response.json().get("Timeout") if response.status_code == 200 else None
    except Exception:
        # Unreadable: the stuck timeout stays in charge until the next read.
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


@dataclass
class LambdaTimeout:
    """The Lambda function's timeout, read once per instance; a failed read waits a while."""

    value: float | None = None
    retry_at: float = 0.0  # monotonic
    # Steps run concurrently (the ticker, requests): one of them reads, the rest wait.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    async def get(self, http: httpx.AsyncClient, target: LambdaTarget,
                  aws: AwsCredentials | None = None) -> float | None:
        """`aws`: the assumed role's credentials (AWS_ROLE_ARN), which sign the read."""
        if self.value is not None:
            return self.value
        async with self.lock:
            if self.value is None and time.monotonic() >= self.retry_at:
                self.value, wait = await self._read(http, target, aws)
                if self.value is None:
                    self.retry_at = time.monotonic() + wait
        return self.value

    @staticmethod
    async def _read(http: httpx.AsyncClient, target: LambdaTarget,
                    aws: AwsCredentials | None) -> tuple[float | None, float]:
        """The timeout, or None and how long to wait before the next read."""
        try:
            credentials = await aws.get(http) if aws is not None else None
        except CredentialsError:
            return None, CREDENTIALS_RETRY_SECONDS
        value = await lambda_timeout(http, target, datetime.now(UTC), credentials)
        return value, CONFIG_RETRY_SECONDS
