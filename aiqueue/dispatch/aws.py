"""AWS credentials for the Lambda target: static keys, or a role assumed with Vercel's OIDC token.

With AWS_ROLE_ARN set, no long-lived key is used: Vercel's OIDC token (the
`x-vercel-oidc-token` request header, else VERCEL_OIDC_TOKEN) is exchanged for
short-lived credentials through STS AssumeRoleWithWebIdentity — a call that
needs no signature, made over httpx with STS's query API — and they are kept
until shortly before they expire.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import httpx

from aiqueue.dispatch.sigv4 import Credentials
from aiqueue.settings.targets import LambdaTarget

# Renew this long before STS's expiry: a dispatch signed just before expiry
# may still be in flight when it passes.
REFRESH_BEFORE = timedelta(minutes=5)
SESSION_SECONDS = 3600
_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class CredentialsError(Exception):
    """No usable credentials; `code` is short and content-free (e.g. sts_http_403)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class OidcToken:
    """The Vercel OIDC token to exchange: the best a request header brought, else the env's.

    The header comes with any request, before it is authenticated
    (docs/deploying/index.md): a header replaces the kept token only when it is a well-formed JWT
    from Vercel's issuer, not expired, that expires later than the kept one.
    A junk header is ignored and never breaks dispatch.  (STS checks the
    signature; a structural check is all that is needed to keep junk out.)
    """

    def __init__(self, from_env: str | None = None) -> None:
        self.from_env = from_env
        self.from_request: str | None = None
        self._expires = jwt_expiry(from_env) or 0.0

    def seen(self, token: str | None, now: float | None = None) -> bool:
        """Keep `token` if it is a fresher Vercel token; whether it was kept."""
        expires = jwt_expiry(token) if token else None
        now = time.time() if now is None else now
        if expires is None or expires <= now or expires <= self._expires:
            return False
        self.from_request, self._expires = token, expires
        return True

    @property
    def value(self) -> str | None:
        return self.from_request or self.from_env

    def refused(self, token: str) -> None:
        """STS refused `token`: a header's (a forged one, say) is dropped for the env's."""
        if token is self.from_request:  # the very value handed out, not a look-alike
            self.from_request, self._expires = None, jwt_expiry(self.from_env) or 0.0


# Vercel's issuer: https://oidc.vercel.com, or with the team's slug (the "team" issuer mode).
_VERCEL_ISSUER = re.compile(r"https://oidc\.vercel\.com(/[A-Za-z0-9_-]{1,100})?")
_JWT_PART = re.compile(r"[A-Za-z0-9_-]+")
_JWT_MAX = 8192


def jwt_expiry(token: str | None) -> float | None:
    """A Vercel OIDC JWT's `exp` (epoch seconds), or None when it is not one.

    Structure only: three base64url parts, a JSON header and payload, the
    issuer Vercel's, a numeric `exp`.  The signature is left to STS.
    """
    if not token or len(token) > _JWT_MAX:
        return None
    parts = token.split(".")
    if len(parts) != 3 or not all(_JWT_PART.fullmatch(p) for p in parts):
        return None
    header, payload = _json_part(parts[0]), _json_part(parts[1])
    if header is None or payload is None or not isinstance(header.get("alg"), str):
        return None
    issuer, expires = payload.get("iss"), payload.get("exp")
    if not (isinstance(issuer, str) and _VERCEL_ISSUER.fullmatch(issuer)):
        return None
    if not isinstance(expires, int | float) or isinstance(expires, bool):
        return None
    return float(expires)


def _json_part(part: str) -> dict[str, object] | None:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Temporary:
    credentials: Credentials
    expires: datetime


class AwsCredentials:
    """The Lambda target's credentials: static, or assumed and cached per instance."""

    def __init__(self, target: LambdaTarget, oidc: OidcToken) -> None:
        self.target, self.oidc = target, oidc
        self._cached: Temporary | None = None
        self._lock = asyncio.Lock()
        self.exchanges = 0

    async def get(self, http: httpx.AsyncClient, now: datetime | None = None) -> Credentials:
        """Credentials to sign with now; raise CredentialsError when none can be had."""
        t = self.target
        if t.role_arn is None:
            return Credentials(t.access_key_id, t.secret_access_key, t.session_token)
        now = now or datetime.now(UTC)
        async with self._lock:
            if self._cached is None or now >= self._cached.expires - REFRESH_BEFORE:
                self._cached = await self._assume(http)
            return self._cached.credentials

    async def _assume(self, http: httpx.AsyncClient) -> Temporary:
        token = self.oidc.value
        if not token:
            raise CredentialsError("oidc_token_missing")
        try:
            return await self._exchange(http, token)
        except CredentialsError as exc:
            if not exc.code.startswith("sts_http_4") or token is self.oidc.from_env:
                raise
            # A header's token STS would not take (the header comes before auth):
            # forget it, and use the environment's if there is one.
            self.oidc.refused(token)
            if not self.oidc.value:
                raise
            return await self._exchange(http, self.oidc.value)

    async def _exchange(self, http: httpx.AsyncClient, token: str) -> Temporary:
        t = self.target
        form = {"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15",
                "RoleArn": t.role_arn or "", "RoleSessionName": "aiqueue",
                "WebIdentityToken": token, "DurationSeconds": str(SESSION_SECONDS)}
        try:
            response = await http.post(t.sts_endpoint + "/", data=form,
                                       timeout=httpx.Timeout(10.0))
        except httpx.HTTPError:
            raise CredentialsError("sts_unreachable") from None
        self.exchanges += 1
        if response.status_code != 200:
            raise CredentialsError(f"sts_http_{response.status_code}")
        return parse_assumed(response.text)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def parse_assumed(xml: str) -> Temporary:
    """The Credentials element of an AssumeRoleWithWebIdentity answer."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        raise CredentialsError("sts_bad_answer") from None
    fields = {_local(e.tag): (e.text or "").strip() for e in root.iter()
              if _local(e.tag) in ("AccessKeyId", "SecretAccessKey", "SessionToken",
                                   "Expiration")}
    if len(fields) != 4 or not all(fields.values()):
        raise CredentialsError("sts_bad_answer")
    try:
        expires = datetime.fromisoformat(fields["Expiration"].replace("Z", "+00:00"))
    except ValueError:
        raise CredentialsError("sts_bad_answer") from None
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    return Temporary(Credentials(fields["AccessKeyId"], fields["SecretAccessKey"],
                                 fields["SessionToken"]), expires)
