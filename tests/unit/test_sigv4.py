"""Our SigV4 signer against botocore's SigV4Auth, byte for byte: a property over paths,
queries, header whitespace, bodies, credentials and clocks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from unittest import mock
from urllib.parse import quote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiqueue.dispatch.sigv4 import Credentials, sign
from aiqueue.dispatch.targets import lambda_request, lambda_url
from aiqueue.settings.targets import LambdaTarget

EVENT = {"content-type": "application/json", "x-amz-invocation-type": "Event"}


def botocore_headers(url: str, headers: dict[str, str], body: bytes, creds: Credentials,
                     region: str, now: datetime) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, headers=dict(headers), data=body)
    boto = BotoCredentials(creds.access_key_id, creds.secret_access_key, creds.session_token)
    naive_utc = now.astimezone(UTC).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=naive_utc):
        SigV4Auth(boto, "lambda", region).add_auth(request)
    return dict(request.headers.items())


HOSTS = ["https://lambda.eu-west-1.amazonaws.com", "https://LAMBDA.us-east-1.amazonaws.com:443",
         "http://127.0.0.1:45123", "http://localhost:80", "https://lambda.example.test:8443"]
# Text a path segment or a query part is made of (quoted below, as a client sends it).
PIECE = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


def segment() -> st.SearchStrategy[str]:
    """A path segment as a URL carries it: percent-encoded text, some sub-delims left raw,
    or a dot segment / an empty one (a doubled slash)."""
    encoded = st.builds(lambda text, safe: quote(text, safe=safe), PIECE,
                        st.sampled_from(["", ":@", "$!*'()+,;=", "-_.~"]))
    return st.one_of(encoded, st.sampled_from([".", "..", ""]))


paths = st.builds(lambda parts, slash: "/" + "/".join(parts) + ("/" if slash else ""),
                  st.lists(segment(), max_size=6), st.booleans())
pairs = st.lists(st.tuples(st.builds(lambda t: quote(t, safe="-_.~"), PIECE),
                           st.one_of(st.none(), st.builds(lambda t: quote(t, safe="-_.~"), PIECE))),
                 max_size=5)
queries = st.builds(lambda ps: "&".join(k if v is None else f"{k}={v}" for k, v in ps), pairs)
# A header value with whitespace runs before, between and after its words.
spaces = st.text(st.sampled_from(" \t"), max_size=3)
words = st.lists(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1,
                         max_size=8), max_size=4)
header_values = st.builds(lambda ws, gaps: gaps[0] + "".join(w + g for w, g in zip(
    ws, gaps[1:], strict=False)), words, st.lists(spaces, min_size=5, max_size=5))
credentials = st.builds(
    Credentials, st.text(st.characters(min_codepoint=48, max_codepoint=90), min_size=4,
                         max_size=20),
    st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40),
    st.one_of(st.none(), st.text(st.characters(min_codepoint=33, max_codepoint=126),
                                 min_size=1, max_size=60)))
moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31),
                       timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5)),
                                                  timezone(timedelta(hours=13, minutes=45))]))


@settings(max_examples=300, deadline=None)
@given(host=st.sampled_from(HOSTS), path=paths, query=queries, context=header_values,
       body=st.binary(max_size=2048), creds=credentials,
       region=st.sampled_from(["eu-west-1", "us-east-1", "ap-southeast-2"]), now=moments)
@example(host=HOSTS[0], path="/2015-03-31/functions/mark/invocations", query="",
         context="", body=b'{"queue_id": "q"}',
         creds=Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
         region="eu-west-1", now=datetime(2026, 11, 22, 21, 5, 9, tzinfo=UTC))
@example(host=HOSTS[1], path="/2015-03-31/functions/"
         "arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Amark/invocations",
         query="Qualifier=%24LATEST", context="  a\t  b ", body=b"x" * 70_000,
         creds=Credentials("ASIAEXAMPLE", "s3cr3t", "FwoGZXIvYXdzE//session+token/="),
         region="us-east-1", now=datetime(2027, 1, 1, 0, 0, 0, tzinfo=UTC))
def test_signature_equals_botocores(host: str, path: str, query: str, context: str,
                                    body: bytes, creds: Credentials, region: str,
                                    now: datetime):
    url = f"{host}{path}" + (f"?{query}" if query else "")
    headers = {**EVENT, "x-amz-client-context": context}
    ours = sign("POST", url, headers, body, credentials=creds, region=region,
                service="lambda", now=now)
    theirs = botocore_headers(url, headers, body, creds, region, now)
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
