"""The dispatch request for each target (http, digitalocean, lambda): pure, no I/O."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from standardwebhooks.webhooks import Webhook

from aiqueue.dispatch.sigv4 import Credentials, sign
from aiqueue.settings.targets import DoTarget, KindTarget, LambdaTarget

# DigitalOcean Functions takes input parameters up to 1 MB; Lambda's Event
# invokes were limited to 256 KB until AWS raised them to 1 MB in October 2025.
# A larger dispatch can never be accepted, so it fails the row at once.
PLATFORM_BODY_LIMIT = 1024 * 1024
JSON = "application/json"


@dataclass(frozen=True)
class Outgoing:
    """One dispatch request: where it goes and the headers it carries."""

    url: str
    headers: dict[str, str]


def http_request(target: KindTarget, body: bytes = b"", now: datetime | None = None,
                 message_id: str | None = None) -> Outgoing:
    """POST to AI_MARKING_FUNCTION_URL, with the bearer token when one is set.

    With AI_MARKING_SIGNING_SECRET (docs/deploying/databases.md) the request is signed per Standard
    Webhooks v1: the signature covers the id, the timestamp and the body, so a
    captured dispatch can be neither altered nor replayed after the tolerance.
    """
    headers = {"content-type": JSON}
    if target.function_token:
        headers["authorization"] = f"Bearer {target.function_token}"
    if target.signing_secret and message_id and now is not None:
        headers |= signature_headers(target.signing_secret, message_id, now, body)
    return Outgoing(target.function_url, headers)


def signature_headers(secret: str, message_id: str, now: datetime, body: bytes
                      ) -> dict[str, str]:
    """`webhook-id`, `webhook-timestamp` and `webhook-signature` (v1) of one message."""
    signature = Webhook(secret).sign(message_id, now, body.decode())
    return {"webhook-id": message_id, "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature}


def do_request(target: DoTarget) -> Outgoing:
    """A non-blocking invoke of the action through the OpenWhisk REST API."""
    ns, package, action = (
        quote(p, safe="") for p in (target.namespace, target.package, target.action))
    url = f"{target.api_host}/api/v1/namespaces/{ns}/actions/{package}/{action}?blocking=false"
    basic = base64.b64encode(f"{target.user}:{target.secret}".encode()).decode()
    return Outgoing(url, {"content-type": JSON, "authorization": f"Basic {basic}"})


def lambda_url(target: LambdaTarget) -> str:
    """The Invoke API's URL, the function name or ARN percent-encoded as the SDKs do."""
    url = f"{target.endpoint}/2015-03-31/functions/{quote(target.function, safe='')}/invocations"
    if target.qualifier:
        url += f"?Qualifier={quote(target.qualifier, safe='-_.~')}"
    return url


def lambda_request(target: LambdaTarget, body: bytes, now: datetime,
                   credentials: Credentials | None = None) -> Outgoing:
    """An asynchronous (`Event`) Invoke, signed with SigV4 for service `lambda`.

    `credentials`: assumed ones (AWS_ROLE_ARN); else the target's static keys.
    """
    url = lambda_url(target)
    creds = credentials or Credentials(
        target.access_key_id, target.secret_access_key, target.session_token)
    headers = sign("POST", url, {"content-type": JSON, "x-amz-invocation-type": "Event"}, body,
                   credentials=creds, region=target.region, service="lambda", now=now)
    return Outgoing(url, headers)


def build_request(target: KindTarget, body: bytes, now: datetime,
                  credentials: Credentials | None = None,
                  message_id: str | None = None) -> Outgoing:
    """The request for the configured target (`message_id`: the signed dispatch's id).

    DigitalOcean and Lambda authenticate the caller themselves (Basic auth,
    SigV4) and pass no request header on to the function: only `http` is signed.
    """
    if target.dispatch == "http":
        return http_request(target, body, now, message_id)
    if target.dispatch == "digitalocean" and target.digitalocean is not None:
        return do_request(target.digitalocean)
    if target.dispatch == "lambda" and target.aws_lambda is not None:
        return lambda_request(target.aws_lambda, body, now, credentials)
    raise ValueError(f"no settings for the {target.dispatch} target")


def body_limit(target: KindTarget) -> int | None:
    """The largest dispatch body the target accepts (None: the http target sets its own)."""
    return None if target.dispatch == "http" else PLATFORM_BODY_LIMIT
