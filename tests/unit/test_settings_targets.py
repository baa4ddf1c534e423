"""AI_MARKING_DISPATCH and its targets' settings: valid ones load, bad ones name the variable."""

from __future__ import annotations

import pytest

from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings
from aiqueue.settings.targets import DoTarget, LambdaTarget, split_function

DO = {
    "AI_MARKING_DISPATCH": "digitalocean",
    "DO_FUNCTIONS_API_HOST": "https://faas-nyc1-2ef2e6cc.doserverless.co/",
    "DO_FUNCTIONS_NAMESPACE": "fn-0d1e6ab4-43a2-4a4e-9c1b-1f0ee4c5e8a2",
    "DO_FUNCTIONS_ACTION": "ai-mark/mark",
    "DO_FUNCTIONS_AUTH": "0d1e6ab4-43a2-4a4e-9c1b-1f0ee4c5e8a2:s3cr3t:with:colons",
}
LAMBDA = {
    "AI_MARKING_DISPATCH": "lambda",
    "AWS_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AI_MARKING_LAMBDA_FUNCTION": "ai-mark",
}


def test_http_is_the_default_target():
    s = load_settings({})
    assert s.dispatch_target == "http" and s.digitalocean is None and s.aws_lambda is None


def test_digitalocean_settings_load():
    s = load_settings(DO)
    assert s.dispatch_target == "digitalocean"
    assert s.digitalocean == DoTarget(
        "https://faas-nyc1-2ef2e6cc.doserverless.co", DO["DO_FUNCTIONS_NAMESPACE"], "ai-mark",
        "mark", "0d1e6ab4-43a2-4a4e-9c1b-1f0ee4c5e8a2", "s3cr3t:with:colons")


def test_lambda_settings_load_with_the_default_endpoint_and_a_session_token():
    s = load_settings({**LAMBDA, "AWS_SESSION_TOKEN": "tok",
                       "AI_MARKING_LAMBDA_FUNCTION": "ai-mark:live"})
    assert s.aws_lambda == LambdaTarget("eu-west-1", "AKIDEXAMPLE", "secret", "tok", "ai-mark",
                                        "live", "https://lambda.eu-west-1.amazonaws.com",
                                        None, "https://sts.eu-west-1.amazonaws.com")
    s = load_settings({**LAMBDA, "AWS_ENDPOINT_URL_LAMBDA": "http://127.0.0.1:5000"})
    assert s.aws_lambda is not None and s.aws_lambda.endpoint == "http://127.0.0.1:5000"
    assert s.aws_lambda.session_token is None


def test_production_needs_no_function_url_with_a_native_target():
    env = {"VERCEL": "1", "VERCEL_PROJECT_PRODUCTION_URL": "q.vercel.app",
           "DATABASE_URL": "postgresql://db/x",
           "MARKING_QUEUE_SECRET": "s" * 20}
    with pytest.raises(SettingsError, match="AI_MARKING_FUNCTION_URL"):
        load_settings(env)
    assert load_settings({**env, **LAMBDA}).dispatch_target == "lambda"


@pytest.mark.parametrize(("raw", "expected"), [
    ("ai-mark", ("ai-mark", None)),
    ("ai-mark:prod", ("ai-mark", "prod")),
    ("ai-mark:$LATEST", ("ai-mark", "$LATEST")),
    ("arn:aws:lambda:eu-west-1:123456789012:function:ai-mark",
     ("arn:aws:lambda:eu-west-1:123456789012:function:ai-mark", None)),
    ("arn:aws:lambda:eu-west-1:123456789012:function:ai-mark:7",
     ("arn:aws:lambda:eu-west-1:123456789012:function:ai-mark", "7")),
    ("123456789012:function:ai-mark:prod", ("123456789012:function:ai-mark", "prod")),
])
def test_function_name_arn_and_qualifier(raw: str, expected: tuple[str, str | None]):
    assert split_function(raw, "eu-west-1") == expected


@pytest.mark.parametrize(("env", "names"), [
    ({"AI_MARKING_DISPATCH": "gcp"}, "AI_MARKING_DISPATCH"),
    ({**DO, "AI_MARKING_FUNCTION_MODE": "sync"}, "AI_MARKING_FUNCTION_MODE"),
    ({**LAMBDA, "AI_MARKING_FUNCTION_MODE": "sync"}, "AI_MARKING_FUNCTION_MODE"),
    ({**DO, "DO_FUNCTIONS_API_HOST": ""}, "DO_FUNCTIONS_API_HOST"),
    ({**DO, "DO_FUNCTIONS_API_HOST": "faas.example"}, "DO_FUNCTIONS_API_HOST"),
    ({**DO, "DO_FUNCTIONS_API_HOST": "https://faas.example/api"}, "DO_FUNCTIONS_API_HOST"),
    ({**DO, "DO_FUNCTIONS_NAMESPACE": ""}, "DO_FUNCTIONS_NAMESPACE"),
    ({**DO, "DO_FUNCTIONS_NAMESPACE": "a/b"}, "DO_FUNCTIONS_NAMESPACE"),
    ({**DO, "DO_FUNCTIONS_ACTION": "mark"}, "DO_FUNCTIONS_ACTION"),
    ({**DO, "DO_FUNCTIONS_ACTION": "a/b/c"}, "DO_FUNCTIONS_ACTION"),
    ({**DO, "DO_FUNCTIONS_AUTH": "no-colon"}, "DO_FUNCTIONS_AUTH"),
    ({**DO, "DO_FUNCTIONS_AUTH": ":secret"}, "DO_FUNCTIONS_AUTH"),
    ({**LAMBDA, "AWS_REGION": ""}, "AWS_REGION"),
    ({**LAMBDA, "AWS_REGION": "Europe"}, "AWS_REGION"),
    ({**LAMBDA, "AWS_ACCESS_KEY_ID": ""}, "AWS_ACCESS_KEY_ID"),
    ({**LAMBDA, "AWS_SECRET_ACCESS_KEY": " "}, "AWS_SECRET_ACCESS_KEY"),
    ({**LAMBDA, "AI_MARKING_LAMBDA_FUNCTION": ""}, "AI_MARKING_LAMBDA_FUNCTION"),
    ({**LAMBDA, "AI_MARKING_LAMBDA_FUNCTION": "a:b:c"}, "AI_MARKING_LAMBDA_FUNCTION"),
    ({**LAMBDA, "AI_MARKING_LAMBDA_FUNCTION": "bad name"}, "AI_MARKING_LAMBDA_FUNCTION"),
    ({**LAMBDA, "AI_MARKING_LAMBDA_FUNCTION": "arn:aws:lambda:us-east-1:123456789012:function:x"},
     "AI_MARKING_LAMBDA_FUNCTION"),
    ({**LAMBDA, "AI_MARKING_LAMBDA_FUNCTION": "arn:aws:s3:eu-west-1:123456789012:function:x"},
     "AI_MARKING_LAMBDA_FUNCTION"),
    ({**LAMBDA, "AWS_ENDPOINT_URL_LAMBDA": "localhost:5000"}, "AWS_ENDPOINT_URL_LAMBDA"),
])
def test_bad_target_settings_stop_start_up_naming_the_variable(env: dict[str, str], names: str):
    with pytest.raises(SettingsError) as info:
        load_settings(env)
    message = str(info.value)
    assert message.startswith(names) and "\n" not in message


ROLE = "arn:aws:iam::123456789012:role/aiqueue-dispatch"


def test_a_role_replaces_static_keys_and_ignores_placeholders():
    # Vercel may inject AWS_ACCESS_KEY_ID & co. that grant nothing: with a role they are unused.
    s = load_settings({**LAMBDA, "AWS_ROLE_ARN": ROLE, "AWS_SESSION_TOKEN": "placeholder",
                       "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:5001"})
    assert s.aws_lambda is not None and s.aws_lambda.role_arn == ROLE
    assert (s.aws_lambda.access_key_id, s.aws_lambda.secret_access_key) == ("", "")
    assert s.aws_lambda.session_token is None
    assert s.aws_lambda.sts_endpoint == "http://127.0.0.1:5001"
    assert s.aws_env_names == ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                               "AWS_SESSION_TOKEN", "AWS_REGION")
    keyless = {k: v for k, v in LAMBDA.items() if not k.startswith("AWS_") or k == "AWS_REGION"}
    assert load_settings({**keyless, "AWS_ROLE_ARN": ROLE}).aws_lambda is not None
    with pytest.raises(SettingsError, match="AWS_ACCESS_KEY_ID is required"):
        load_settings(keyless)


@pytest.mark.parametrize("bad", ["aiqueue-dispatch", "arn:aws:iam::12:role/x",
                                 "arn:aws:lambda:eu-west-1:123456789012:function:x"])
def test_a_malformed_role_arn_is_named(bad):
    with pytest.raises(SettingsError, match="AWS_ROLE_ARN"):
        load_settings({**LAMBDA, "AWS_ROLE_ARN": bad})
