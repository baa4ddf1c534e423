"""AWS_ROLE_ARN: Vercel's OIDC token exchanged through STS, cached until shortly before expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
import respx

from aiqueue.dispatch.aws import AwsCredentials, CredentialsError, OidcToken, parse_assumed
from aiqueue.target_settings import LambdaTarget

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
        oidc.seen("header-token")
        again = await aws.get(http, NOW + timedelta(minutes=50))
        renewed = await aws.get(http, NOW + timedelta(minutes=56))
    assert (first.access_key_id, first.session_token) == ("ASIA1", "t-ASIA1")
    assert again == first and renewed.access_key_id == "ASIA2"
    form = [dict(httpx.QueryParams(c.content.decode())) for c in calls]
    assert [f["WebIdentityToken"] for f in form] == ["env-token", "header-token"]
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
