"""AWS_ROLE_ARN: Vercel's OIDC token exchanged through STS, cached until shortly before expiry."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import respx

from aiqueue.dispatch.aws import (
    AwsCredentials,
    CredentialsError,
    OidcToken,
    jwt_expiry,
    parse_assumed,
)
from aiqueue.settings.targets import LambdaTarget

STS = "https://sts.eu-west-1.amazonaws.com/"
ROLE = "arn:aws:iam::123456789012:role/aiqueue-dispatch"
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def answer(key: str, expires: datetime) -> str:
    stamp = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult><Credentials>
    <AccessKeyId>{key}</AccessKeyId><SecretAccessKey>s-{key}</SecretAccessKey>
    <SessionToken>t-{key}</SessionToken><Expiration>{stamp}</Expiration>
  </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"""


def jwt(claims: dict[str, Any], header: Any = None) -> str:
    """A token shaped as Vercel's (the signature is not checked here: STS does that)."""
    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return ".".join([part(header or {"alg": "RS256", "typ": "JWT"}), part(claims), "c2ln"])


def vercel(exp: datetime, iss: str = "https://oidc.vercel.com/acme") -> str:
    return jwt({"iss": iss, "sub": "owner:acme:project:p:environment:production",
                "aud": "https://vercel.com/acme", "exp": int(exp.timestamp())})


def target(role: str | None = ROLE) -> LambdaTarget:
    keys = ("", "") if role else ("AKIDSTATIC", "static-secret")
    return LambdaTarget("eu-west-1", *keys, None, "ai-mark", None,
                        "https://lambda.eu-west-1.amazonaws.com", role, STS.rstrip("/"))


async def test_static_keys_need_no_exchange():
    creds = await AwsCredentials(target(None), OidcToken()).get(httpx.AsyncClient())
    assert (creds.access_key_id, creds.session_token) == ("AKIDSTATIC", None)


@respx.mock
async def test_the_token_is_exchanged_once_and_renewed_before_expiry():
    calls: list[httpx.Request] = []
    keys = iter(["ASIA1", "ASIA2"])

    def sts(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200, text=answer(next(keys), NOW + timedelta(hours=1)))

    respx.post(STS).mock(side_effect=sts)
    oidc = OidcToken("env-token")
    aws = AwsCredentials(target(), oidc)
    async with httpx.AsyncClient() as http:
        first = await aws.get(http, NOW)
        header_token = vercel(NOW + timedelta(hours=1))
        assert oidc.seen(header_token, now=NOW.timestamp())
        again = await aws.get(http, NOW + timedelta(minutes=50))
        renewed = await aws.get(http, NOW + timedelta(minutes=56))
    assert (first.access_key_id, first.session_token) == ("ASIA1", "t-ASIA1")
    assert again == first and renewed.access_key_id == "ASIA2"
    form = [dict(httpx.QueryParams(c.content.decode())) for c in calls]
    assert [f["WebIdentityToken"] for f in form] == ["env-token", header_token]
    assert form[0]["Action"] == "AssumeRoleWithWebIdentity" and form[0]["RoleArn"] == ROLE
    # The exchange is not signed: no long-lived key is involved.
    assert "authorization" not in calls[0].headers


@respx.mock
async def test_a_refusal_or_no_token_is_a_short_code():
    respx.post(STS).mock(return_value=httpx.Response(403, text="<ErrorResponse/>"))
    async with httpx.AsyncClient() as http:
        with pytest.raises(CredentialsError) as refused:
            await AwsCredentials(target(), OidcToken("tok")).get(http, NOW)
        with pytest.raises(CredentialsError) as missing:
            await AwsCredentials(target(), OidcToken()).get(http, NOW)
    assert refused.value.code == "sts_http_403"
    assert missing.value.code == "oidc_token_missing"


@pytest.mark.parametrize("xml", ["not xml", "<a/>", answer("K", NOW).replace(
    "2026-11-23T12:00:00Z", "tomorrow")])
def test_a_malformed_answer_is_refused(xml):
    with pytest.raises(CredentialsError, match="sts_bad_answer"):
        parse_assumed(xml)


JUNK = ["", "junk", "a.b.c", "a.b", "x" * 10000,
        jwt({"iss": "https://evil.example", "exp": 4102444800}),
        jwt({"iss": "https://oidc.vercel.com.evil.example", "exp": 4102444800}),
        jwt({"iss": "https://oidc.vercel.com/acme/../x", "exp": 4102444800}),
        jwt({"iss": "https://oidc.vercel.com", "exp": "tomorrow"}),
        jwt({"iss": "https://oidc.vercel.com"}),
        jwt({"iss": "https://oidc.vercel.com", "exp": 4102444800}, header=["not", "a", "map"]),
        "ey\u00e9.ey.sig"]


@pytest.mark.parametrize("junk", JUNK)
def test_a_junk_header_never_replaces_the_kept_token(junk: str):
    """The header comes before auth; only a fresher Vercel JWT is kept."""
    env = vercel(NOW + timedelta(minutes=30))
    oidc = OidcToken(env)
    assert not oidc.seen(junk, now=NOW.timestamp())
    assert oidc.value == env


def test_only_a_later_expiring_vercel_token_replaces_the_kept_one():
    now = NOW.timestamp()
    oidc = OidcToken(vercel(NOW + timedelta(minutes=30)))
    older = vercel(NOW + timedelta(minutes=10))
    expired = vercel(NOW - timedelta(minutes=1))
    newer = vercel(NOW + timedelta(minutes=45), iss="https://oidc.vercel.com")
    assert not oidc.seen(older, now=now) and not oidc.seen(expired, now=now)
    assert oidc.seen(newer, now=now) and oidc.value == newer
    # ...and once kept, an earlier one (a replayed header) does not win it back.
    assert not oidc.seen(vercel(NOW + timedelta(minutes=40)), now=now)
    assert oidc.value == newer and jwt_expiry(newer) == (NOW + timedelta(minutes=45)).timestamp()


@respx.mock
async def test_a_junk_header_does_not_break_dispatch_credentials():
    seen: list[str] = []

    def sts(request: httpx.Request) -> httpx.Response:
        seen.append(dict(httpx.QueryParams(request.content.decode()))["WebIdentityToken"])
        return httpx.Response(200, text=answer("ASIA1", NOW + timedelta(hours=1)))

    respx.post(STS).mock(side_effect=sts)
    env = vercel(datetime.now(UTC) + timedelta(minutes=30))
    oidc = OidcToken(env)
    for junk in JUNK:
        oidc.seen(junk)
    async with httpx.AsyncClient() as http:
        creds = await AwsCredentials(target(), oidc).get(http, NOW)
    assert creds.access_key_id == "ASIA1" and seen == [env]


@respx.mock
async def test_a_well_formed_header_token_sts_refuses_falls_back_to_the_environments():
    """Only structure, issuer and expiry are checked here; should STS refuse a header's
    token (forged), it is forgotten and the environment's is used: dispatch goes on."""
    env = vercel(datetime.now(UTC) + timedelta(minutes=30))
    forged = vercel(datetime.now(UTC) + timedelta(hours=2))
    tried: list[str] = []

    def sts(request: httpx.Request) -> httpx.Response:
        token = dict(httpx.QueryParams(request.content.decode()))["WebIdentityToken"]
        tried.append(token)
        if token == forged:
            return httpx.Response(400, text="<ErrorResponse>InvalidIdentityToken</ErrorResponse>")
        return httpx.Response(200, text=answer("ASIA1", NOW + timedelta(hours=1)))

    respx.post(STS).mock(side_effect=sts)
    oidc = OidcToken(env)
    assert oidc.seen(forged)
    async with httpx.AsyncClient() as http:
        creds = await AwsCredentials(target(), oidc).get(http, NOW)
    assert creds.access_key_id == "ASIA1" and tried == [forged, env]
    assert oidc.value == env
