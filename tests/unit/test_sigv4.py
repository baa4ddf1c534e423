"""Our SigV4 signer against botocore's SigV4Auth, byte for byte."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from aiqueue.dispatch.sigv4 import Credentials, sign
from aiqueue.dispatch.targets import lambda_request, lambda_url
from aiqueue.target_settings import LambdaTarget

EVENT = {"content-type": "application/json", "x-amz-invocation-type": "Event"}


def botocore_headers(url: str, headers: dict[str, str], body: bytes, creds: Credentials,
                     region: str, now: datetime) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, headers=dict(headers), data=body)
    boto = BotoCredentials(creds.access_key_id, creds.secret_access_key, creds.session_token)
    naive_utc = now.astimezone(UTC).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=naive_utc):
        SigV4Auth(boto, "lambda", region).add_auth(request)
    return dict(request.headers.items())


CASES = [
    ("https://lambda.eu-west-1.amazonaws.com/2015-03-31/functions/mark/invocations",
     b'{"queue_id": "q"}', Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
     "eu-west-1", datetime(2026, 11, 22, 21, 5, 9, tzinfo=UTC)),
    ("https://lambda.us-east-1.amazonaws.com/2015-03-31/functions/"
     "arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Amark/invocations"
     "?Qualifier=%24LATEST",
     '{"content": "Grüße, ünïcode ✓"}'.encode(),
     Credentials("ASIAEXAMPLE", "s3cr3t", "FwoGZXIvYXdzE//session+token/="),
     "us-east-1", datetime(2027, 1, 1, 0, 0, 0, tzinfo=UTC)),
    ("http://127.0.0.1:45123/2015-03-31/functions/mark/invocations?Qualifier=live",
     b"", Credentials("AKID", "secret"), "ap-southeast-2",
     datetime(2026, 2, 28, 23, 59, 59, tzinfo=timezone(timedelta(hours=-5)))),
    ("https://lambda.eu-central-1.amazonaws.com/2015-03-31/functions/a-b_c/invocations",
     b"x" * 70_000, Credentials("AKID2", "another/secret+", "tok"), "eu-central-1",
     datetime(2026, 6, 30, 12, 0, 0, tzinfo=UTC)),
]


@pytest.mark.parametrize(("url", "body", "creds", "region", "now"), CASES)
def test_signature_equals_botocores(url: str, body: bytes, creds: Credentials, region: str,
                                    now: datetime):
    ours = sign("POST", url, EVENT, body, credentials=creds, region=region, service="lambda",
                now=now)
    theirs = botocore_headers(url, EVENT, body, creds, region, now)
    assert ours.pop("host")  # botocore signs the host too but leaves it to the HTTP client
    assert ours == theirs


def test_lambda_request_is_signed_like_botocore_for_name_arn_and_qualifier():
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    for function, qualifier in [("mark", None), ("mark", "prod"),
                                ("arn:aws:lambda:eu-west-1:123456789012:function:mark", "7")]:
        target = LambdaTarget("eu-west-1", "AKID", "secret", "tok", function, qualifier,
                              "https://lambda.eu-west-1.amazonaws.com")
        request = lambda_request(target, b"{}", now)
        creds = Credentials("AKID", "secret", "tok")
        theirs = botocore_headers(request.url, EVENT, b"{}", creds, "eu-west-1", now)
        assert request.headers["Authorization"] == theirs["Authorization"]
        assert request.headers["X-Amz-Security-Token"] == "tok"
        assert request.headers["x-amz-invocation-type"] == "Event"
        assert request.url == lambda_url(target)


def test_lambda_url_encodes_the_arn_and_the_qualifier_as_the_sdks_do():
    target = LambdaTarget("eu-west-1", "k", "s", None,
                          "arn:aws:lambda:eu-west-1:123456789012:function:mark", "$LATEST",
                          "https://lambda.eu-west-1.amazonaws.com")
    assert lambda_url(target) == (
        "https://lambda.eu-west-1.amazonaws.com/2015-03-31/functions/"
        "arn%3Aaws%3Alambda%3Aeu-west-1%3A123456789012%3Afunction%3Amark/invocations"
        "?Qualifier=%24LATEST")
