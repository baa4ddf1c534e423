"""AWS Signature Version 4 for one request, as botocore's SigV4Auth computes it.

Pure and small on purpose: botocore would add ~33 MB and ~50 ms of import to
every serverless bundle for one header.  tests/unit/test_sigv4.py proves the
output byte for byte equal to botocore's for several requests.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Credentials:
    """An access key, its secret and an optional session token."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def _normal_path(path: str) -> str:
    """RFC 3986 dot-segment removal and no empty segments, as AWS expects."""
    out: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if out:
                out.pop()
        elif part and part != ".":
            out.append(part)
    trailing = "/" if path.endswith("/") and out else ""
    return "/" + "/".join(out) + trailing


def _host(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


def _query(raw: str) -> str:
    pairs = sorted(pair.partition("=")[::2] for pair in raw.split("&")) if raw else []
    return "&".join(f"{k}={v}" for k, v in pairs)


def canonical_request(method: str, url: str, headers: Mapping[str, str], body: bytes
                      ) -> tuple[str, str]:
    """(canonical request, signed header names) over every header given."""
    parts = urlsplit(url)
    signed = {name.lower(): " ".join(value.split()) for name, value in headers.items()}
    names = sorted(signed)
    lines = [
        method.upper(),
        quote(_normal_path(parts.path), safe="/~"),
        _query(parts.query),
        "".join(f"{name}:{signed[name]}\n" for name in names),
        ";".join(names),
        hashlib.sha256(body).hexdigest(),
    ]
    return "\n".join(lines), ";".join(names)


def sign(method: str, url: str, headers: Mapping[str, str], body: bytes, *,
         credentials: Credentials, region: str, service: str, now: datetime
         ) -> dict[str, str]:
    """The headers to send: the given ones plus host, X-Amz-Date, the token and Authorization."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = {"host": _host(url), **headers, "X-Amz-Date": stamp}
    if credentials.session_token:
        out["X-Amz-Security-Token"] = credentials.session_token
    request, signed = canonical_request(method, url, out, body)
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        [ALGORITHM, stamp, scope, hashlib.sha256(request.encode()).hexdigest()])
    key = _hmac(f"AWS4{credentials.secret_access_key}".encode(), stamp[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = (f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
                            f"SignedHeaders={signed}, Signature={signature}")
    return out
