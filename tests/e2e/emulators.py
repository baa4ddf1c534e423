"""Platform emulators for the native dispatch targets, checking credentials as the platforms do.

- `DoFunctions`: an OpenWhisk-shaped DigitalOcean Functions API (Basic auth,
  `blocking=false`, 202 `{"activationId"}`) that then runs the reference
  function's DO entry point with the params, as the platform would, and keeps
  each activation's record (`GET …/activations/<id>`: 404 while it runs, then
  OpenWhisk's record with the action's return value as `response.result`).
- `MotoLambda`: moto in server mode with IAM authentication on (SigV4 checked
  against the IAM user's secret, `lambda:InvokeFunction` checked against its
  policy); moto runs no code without Docker, so `LambdaProxy` forwards each
  invoke to it and, when moto accepted it, runs the reference Lambda handler
  with the event.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import io
import json
import os
import re
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Callable
from typing import Any, Literal

import boto3
import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
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


# How an invocation of the emulated action goes (DoFunctions.fate):
# run: the reference function runs and calls back; lose: it runs, but its callback
# never arrives (the network drops it); crash: the runtime dies (out of memory);
# hang: it runs into the action's time limit.
Fate = Literal["run", "lose", "crash", "hang"]
# Where a lost callback goes: the discard port, which refuses connections.
NOWHERE = "http://127.0.0.1:9/webhooks/ai-mark"


class DoFunctions:
    """The Functions REST API of one namespace with one action, and its activation records."""

    def __init__(self, namespace: str, action: str, auth: str, *,
                 fates: Callable[[int], Fate] | None = None, limit_seconds: float = 600.0,
                 ) -> None:
        self.namespace, self.action = namespace, action
        self.basic = "Basic " + base64.b64encode(auth.encode()).decode()
        self.activations: list[str] = []
        self.refused: list[int] = []
        self.background = Background()
        # The fate of the n-th invocation (1-based); the action's time limit.
        self.fate = fates or (lambda n: "run")
        self.limit_seconds = limit_seconds
        self.records: dict[str, dict[str, Any]] = {}
        self.looks: list[tuple[str, int]] = []  # (activation id, status answered)
        self.app = Starlette(routes=[
            Route("/api/v1/namespaces/{namespace}/actions/{package}/{action}", self.invoke,
                  methods=["POST"]),
            Route("/api/v1/namespaces/{namespace}/activations/{activation}", self.activation,
                  methods=["GET"])])

    async def activation(self, request: Request) -> Response:
        """OpenWhisk's activation record, once the activation has ended; 404 before."""
        if request.headers.get("authorization") != self.basic:
            return self._refuse(401, "The supplied authentication is invalid.")
        ref = request.path_params["activation"]
        record = self.records.get(ref) \
            if request.path_params["namespace"] == self.namespace else None
        self.looks.append((ref, 200 if record else 404))
        if record is None:
            return JSONResponse({"error": "The requested resource does not exist.",
                                 "code": uuid.uuid4().hex}, status_code=404)
        return JSONResponse(record)

    async def _run(self, activation: str, fate: Fate, params: dict[str, Any]) -> None:
        """Run one activation and keep its record, as the platform would."""
        start = time.time()
        status, result = "success", None
        if fate == "crash":
            await asyncio.sleep(0.05)
            status, result = "action developer error", {
                "error": "The action exhausted its memory and was aborted."}
        elif fate == "hang":
            await asyncio.sleep(self.limit_seconds)
            status, result = "action developer error", {
                "error": f"The action exceeded its time limits of "
                         f"{int(self.limit_seconds * 1000)} milliseconds."}
        else:
            if fate == "lose":
                params = {**params, "callback_url": NOWHERE}
            try:
                result = await asyncio.to_thread(do_main.main, params)
            except Exception as exc:  # the runtime reports what the action raised
                status, result = "action developer error", {"error": f"{exc!r}"}
        end = time.time()
        self.records[activation] = {
            "activationId": activation, "namespace": self.namespace,
            "name": self.action.split("/")[1], "start": int(start * 1000),
            "end": int(end * 1000), "duration": int((end - start) * 1000),
            "response": {"status": status, "statusCode": 0 if status == "success" else 2,
                         "success": status == "success", "result": result}}

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
        self.background.runs += 1
        task = asyncio.create_task(
            self._run(activation, self.fate(len(self.activations)), params))
        self.background.tasks.add(task)
        task.add_done_callback(self.background.tasks.discard)
        return JSONResponse({"activationId": activation}, status_code=202)

    def _refuse(self, status: int, error: str) -> Response:
        self.refused.append(status)
        return JSONResponse({"error": error, "code": uuid.uuid4().hex}, status_code=status)


class MotoLambda:
    """`python -m moto.server` on loopback, with an IAM user allowed to invoke one function."""

    def __init__(self, timeout: int = 3, auth: bool = True) -> None:
        # auth=False: moto checks no signature, so its STS can take an unsigned
        # AssumeRoleWithWebIdentity (the call AWS_ROLE_ARN makes) whose keys then invoke.
        self.auth = auth
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.timeout = timeout  # the function's configured timeout, seconds
        self.log = ROOT / "test-artifacts" / f"moto-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.key_id = self.secret = ""
        self.configuration: dict[str, Any] = {}

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
                "Effect": "Allow", "Action": ["lambda:InvokeFunction", "lambda:Invoke",
                                              "lambda:GetFunctionConfiguration"],
                "Resource": "*"}]}))
        key = iam.create_access_key(UserName="aiqueue")["AccessKey"]
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as z:
            z.writestr("lambda_handler.py", "def handler(event, context):\n    return {}\n")
        created = self._client("lambda").create_function(
            FunctionName="ai-mark", Runtime="python3.12", Role=role, Timeout=self.timeout,
            Handler="lambda_handler.handler", Code={"ZipFile": code.getvalue()})
        # GetFunctionConfiguration's answer, as moto stored it (see LambdaProxy).
        self.configuration = {k: v for k, v in created.items() if k != "ResponseMetadata"}

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class LambdaProxy:
    """Forwards every request to moto unchanged; an accepted Event invoke runs the handler.

    `dead`: how many of the first accepted invokes die without a trace (no
    callback), as one killed by its time limit or out of memory would.

    GetFunctionConfiguration (`GET …/configuration`) is answered here, with
    what moto stored: moto's IAM check hashes a GET's path parameters as if they
    were its body, so it refuses every correctly signed GET (boto3's too).  The
    signature is checked here instead, the way moto checks a POST's.
    """

    def __init__(self, moto_url: str, dead: int = 0, moto: MotoLambda | None = None) -> None:
        self.moto_url = moto_url
        self.moto = moto
        self.request_ids: list[str] = []
        self.refused: list[int] = []
        # STS calls passed through (AWS_ENDPOINT_URL_STS pointed here), and the access
        # key each accepted invoke was signed with.
        self.sts_calls = 0
        self.signed_with: list[str] = []
        self.background = Background()
        self.client: httpx.AsyncClient | None = None
        self.dead = dead
        self.configuration_reads: list[int] = []  # GetFunctionConfiguration answers
        # The key id each forwarded GetFunctionConfiguration was signed with.
        self.configuration_signed_with: list[str] = []
        self.app = Starlette(routes=[Route("/{path:path}", self.forward,
                                           methods=["POST", "GET"])])

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
        if request.method == "GET" and self.moto is not None:
            ok = self._signed(request, url)
            self.configuration_reads.append(200 if ok else 403)
            if not ok:
                return JSONResponse({"message": "SignatureDoesNotMatch"}, status_code=403)
            return JSONResponse(self.moto.configuration)
        answer = await self.client.request(request.method, url, content=body, headers=headers)
        if request.method == "GET":
            self.configuration_reads.append(answer.status_code)
            credential = request.headers.get("authorization", "").partition("Credential=")[2]
            self.configuration_signed_with.append(credential.split("/")[0])
        elif body.startswith(b"Action="):
            self.sts_calls += 1
        elif answer.status_code == 202 \
                and request.headers.get("x-amz-invocation-type") == "Event":
            self.request_ids.append(answer.headers["x-amzn-requestid"])
            credential = request.headers.get("authorization", "").partition("Credential=")[2]
            self.signed_with.append(credential.split("/")[0])
            if len(self.request_ids) > self.dead:
                self.background.start(lambda_handler.handler, json.loads(body))
        else:
            self.refused.append(answer.status_code)
        keep = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
        return Response(answer.content, status_code=answer.status_code, headers=keep)

    def _signed(self, request: Request, url: str) -> bool:
        """A bodiless request signed (SigV4, service lambda) by the IAM user's key."""
        assert self.moto is not None
        found = re.fullmatch(
            r"AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/([^/]+)/lambda/aws4_request, "
            r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})",
            request.headers.get("authorization", ""))
        if found is None or found[1] != self.moto.key_id or "x-amz-date" not in request.headers:
            return False
        signed = {name: request.headers.get(name, "") for name in found[3].split(";")}
        aws = AWSRequest(method=request.method, url=url, data=b"", headers=signed)
        aws.context["timestamp"] = request.headers["x-amz-date"]
        auth = SigV4Auth(BotoCredentials(self.moto.key_id, self.moto.secret), "lambda",
                         found[2])
        expected = auth.signature(auth.string_to_sign(aws, auth.canonical_request(aws)), aws)
        return hmac.compare_digest(expected, found[4])
