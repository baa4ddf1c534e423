"""Platform emulators for the native dispatch targets, checking credentials as the platforms do.

- `DoFunctions`: an OpenWhisk-shaped DigitalOcean Functions API (Basic auth,
  `blocking=false`, 202 `{"activationId"}`) that then runs the reference
  function's DO entry point with the params, as the platform would.
- `MotoLambda`: moto in server mode with IAM authentication on (SigV4 checked
  against the IAM user's secret, `lambda:InvokeFunction` checked against its
  policy); moto runs no code without Docker, so `LambdaProxy` forwards each
  invoke to it and, when moto accepted it, runs the reference Lambda handler
  with the event.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
import time
import uuid
import zipfile
from typing import Any

import boto3
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from functions.ai_mark import do_main, lambda_handler
from tests.e2e.servers import ROOT, free_port

REGION = "eu-west-1"
ACCOUNT = "123456789012"  # moto's default account
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length",
              "accept-encoding"}


class Background:
    """Runs the reference function in worker threads (it starts its own event loop)."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.runs = 0

    def start(self, fn: Any, event: dict[str, Any]) -> None:
        self.runs += 1
        task = asyncio.create_task(asyncio.to_thread(fn, event))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


class DoFunctions:
    """The Functions REST API of one namespace with one action."""

    def __init__(self, namespace: str, action: str, auth: str) -> None:
        self.namespace, self.action = namespace, action
        self.basic = "Basic " + base64.b64encode(auth.encode()).decode()
        self.activations: list[str] = []
        self.refused: list[int] = []
        self.background = Background()
        self.app = Starlette(routes=[Route(
            "/api/v1/namespaces/{namespace}/actions/{package}/{action}", self.invoke,
            methods=["POST"])])

    async def invoke(self, request: Request) -> Response:
        # OpenWhisk authenticates before it looks at anything else.
        if request.headers.get("authorization") != self.basic:
            return self._refuse(401, "The supplied authentication is invalid.")
        p = request.path_params
        if p["namespace"] != self.namespace or f"{p['package']}/{p['action']}" != self.action:
            return self._refuse(404, "The requested resource does not exist.")
        if request.query_params.get("blocking") != "false":
            return self._refuse(400, "This emulator takes non-blocking invokes only.")
        try:
            params = json.loads(await request.body())
        except ValueError:
            return self._refuse(400, "The request content was malformed.")
        if not isinstance(params, dict):
            return self._refuse(400, "The request content was malformed.")
        activation = uuid.uuid4().hex
        self.activations.append(activation)
        self.background.start(do_main.main, params)
        return JSONResponse({"activationId": activation}, status_code=202)

    def _refuse(self, status: int, error: str) -> Response:
        self.refused.append(status)
        return JSONResponse({"error": error, "code": uuid.uuid4().hex}, status_code=status)


class MotoLambda:
    """`python -m moto.server` on loopback, with an IAM user allowed to invoke one function."""

    def __init__(self, auth: bool = True) -> None:
        # auth=False: moto checks no signature, so its STS can take an unsigned
        # AssumeRoleWithWebIdentity (the call AWS_ROLE_ARN makes) whose keys then invoke.
        self.auth = auth
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = ROOT / "test-artifacts" / f"moto-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.key_id = self.secret = ""

    def start(self) -> None:
        self.log.parent.mkdir(exist_ok=True)
        env = {**os.environ, "AWS_DEFAULT_REGION": REGION}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            try:
                httpx.get(f"{self.url}/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                if self.proc.poll() is not None or time.time() > deadline:
                    tail = self.log.read_text()[-2000:]
                    raise RuntimeError(f"moto did not start: {tail}") from None
                time.sleep(0.1)
        # No Docker here: moto's simple Lambda accepts invokes without running code.
        httpx.post(f"{self.url}/moto-api/config",
                   json={"lambda": {"use_docker": False}}).raise_for_status()
        self._provision()
        if self.auth:
            # From now on every request must be signed by a known key with the right policy.
            httpx.post(f"{self.url}/moto-api/reset-auth", content=b"0").raise_for_status()

    def _client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=self.url,
                            aws_access_key_id="setup", aws_secret_access_key="setup")

    def _provision(self) -> None:
        iam = self._client("iam")
        role = iam.create_role(RoleName="ai-mark-exec", AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
        iam.create_user(UserName="aiqueue")
        # moto authorises its own action name (lambda:Invoke, AWS: lambda:InvokeFunction)
        # against the resource "*" (AWS: the function's ARN, as the README's policy says).
        iam.put_user_policy(UserName="aiqueue", PolicyName="invoke", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": ["lambda:InvokeFunction", "lambda:Invoke"],
                "Resource": "*"}]}))
        key = iam.create_access_key(UserName="aiqueue")["AccessKey"]
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as z:
            z.writestr("lambda_handler.py", "def handler(event, context):\n    return {}\n")
        self._client("lambda").create_function(
            FunctionName="ai-mark", Runtime="python3.12", Role=role,
            Handler="lambda_handler.handler", Code={"ZipFile": code.getvalue()})

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class LambdaProxy:
    """Forwards every request to moto unchanged; an accepted Event invoke runs the handler."""

    def __init__(self, moto_url: str) -> None:
        self.moto_url = moto_url
        self.request_ids: list[str] = []
        self.refused: list[int] = []
        # STS calls passed through (AWS_ENDPOINT_URL_STS pointed here), and the access
        # key each accepted invoke was signed with.
        self.sts_calls = 0
        self.signed_with: list[str] = []
        self.background = Background()
        self.client: httpx.AsyncClient | None = None
        self.app = Starlette(routes=[Route("/{path:path}", self.forward, methods=["POST"])])

    async def forward(self, request: Request) -> Response:
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=30)
        body = await request.body()
        # The Host header is signed: moto must see the one the app sent.
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        # The path as sent (an ARN stays percent-encoded): it is part of the signature.
        url = f"{self.moto_url}{request.scope['raw_path'].decode()}"
        if request.url.query:
            url += f"?{request.url.query}"
        answer = await self.client.post(url, content=body, headers=headers)
        if body.startswith(b"Action="):
            self.sts_calls += 1
        elif answer.status_code == 202 and request.headers.get("x-amz-invocation-type") == "Event":
            self.request_ids.append(answer.headers["x-amzn-requestid"])
            credential = request.headers.get("authorization", "").partition("Credential=")[2]
            self.signed_with.append(credential.split("/")[0])
            self.background.start(lambda_handler.handler, json.loads(body))
        else:
            self.refused.append(answer.status_code)
        keep = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
        return Response(answer.content, status_code=answer.status_code, headers=keep)
