"""The entry points' events as the platforms build them: DigitalOcean's web action, Lambda's
function URL."""

from __future__ import annotations

import base64
import json
from typing import Any

TOKEN = "fn-secret"


def web_event(body: Any, *, token: str | None = TOKEN, method: str = "POST") -> dict[str, Any]:
    """A `web: raw` event as DigitalOcean builds it."""
    headers = {"content-type": "application/json", "x-forwarded-for": "10.0.0.1"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    raw = body if isinstance(body, str) else json.dumps(body)
    return {
        "http": {
            "body": raw,
            "headers": headers,
            "method": method,
            "path": "",
            "queryString": "",
        }
    }


def url_event(body: Any, *, token: str | None = TOKEN, method: str = "POST") -> dict[str, Any]:
    """A Lambda function URL (payload format 2.0) event with a base64 body."""
    headers = {"content-type": "application/json", "host": "abc.lambda-url.eu-west-1.on.aws"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "domainName": "abc.lambda-url.eu-west-1.on.aws",
            "http": {"method": method, "path": "/", "protocol": "HTTP/1.1", "sourceIp": "1.2.3.4"},
            "requestId": "r-1",
            "timeEpoch": 1735689600000,
        },
        "body": base64.b64encode(json.dumps(body).encode()).decode(),
        "isBase64Encoded": True,
    }
