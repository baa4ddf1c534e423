"""An emulator of OpenAI's Files and Batch APIs (`/v1/files`, `/v1/batches`).

As documented: a JSONL file is uploaded with `purpose=batch` (≤ 50,000
requests, ≤ 200 MB, one model, unique `custom_id`s), a batch is created from
it, moves `validating` → `in_progress` → `finalizing` → `completed` (or
`failed`, `expired`, `cancelling` → `cancelled`), and its results are two
files in no order: an output file (answered lines) and an error file (lines
that errored or expired). Batches can't be deleted; files can.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.batchapi.common import (
    Behaviour,
    Clock,
    EmulatorBase,
    Handler,
    LineFate,
    line_times,
    new_id,
)
from tests.batchapi.openai_lines import answer_line, errored_line, validate

WINDOW_SECONDS = 24 * 3600
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
TERMINAL = {"failed", "completed", "expired", "cancelled"}


@dataclass
class File:
    id: str
    purpose: str
    filename: str
    data: bytes
    created_at: int

    def json(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.data),
                "created_at": self.created_at, "filename": self.filename,
                "purpose": self.purpose, "status": "processed", "status_details": None}


@dataclass
class Batch:
    id: str
    input_file_id: str
    endpoint: str
    created_at: float
    behaviour: Behaviour
    lines: list[dict[str, Any]]
    model: str | None
    invalid: list[dict[str, Any]]
    metadata: dict[str, str] | None = None
    status: str = "validating"
    times: list[float | None] = field(default_factory=list)
    stamps: dict[str, int] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    done: int = 0
    failed: int = 0
    cancel_at: float = 0.0


class OpenAIBatchAPI(EmulatorBase):
    """The emulated API; `behaviours(n)` programs the n-th batch (1-based)."""

    def __init__(self, key: str = "sk-test-batch", *,
                 behaviours: Callable[[int], Behaviour] | None = None,
                 clock: Clock | None = None, window_seconds: float = WINDOW_SECONDS,
                 max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> None:
        self.files: dict[str, File] = {}
        self.batches: dict[str, Batch] = {}
        self.list_calls = 0  # how many pages of batches were asked for
        self.deleted_files: list[str] = []
        super().__init__(key, behaviours=behaviours, clock=clock,
                         window_seconds=window_seconds, max_requests=max_requests,
                         max_bytes=max_bytes)

    def routes(self) -> list[tuple[str, list[str], Handler]]:
        return [
            ("/v1/files", ["POST"], self.upload),
            ("/v1/files", ["GET"], self.list_files),
            ("/v1/files/{file_id}", ["GET", "DELETE"], self.file),
            ("/v1/files/{file_id}/content", ["GET"], self.content),
            ("/v1/batches", ["POST"], self.create),
            ("/v1/batches", ["GET"], self.list_batches),
            ("/v1/batches/{batch_id}", ["GET"], self.retrieve),
            ("/v1/batches/{batch_id}/cancel", ["POST"], self.cancel),
        ]

    def forget(self) -> None:
        self.batches.clear()

    def held(self) -> dict[str, list[str]]:
        """What the provider still keeps: files, and batches not yet ended."""
        open_batches = [b.id for b in self.batches.values() if b.status not in TERMINAL]
        return {"files": sorted(self.files), "open_batches": sorted(open_batches)}

    def made_elsewhere(self, n: int) -> None:
        """Another deployment on the same account makes `n` batches now (already ended)."""
        for _ in range(n):
            batch = Batch(new_id("batch_"), "file-elsewhere", "/v1/chat/completions",
                          self.clock(), Behaviour(), [], None, [], {"app": "elsewhere"},
                          status="completed")
            self.batches[batch.id] = batch

    # -- files ---------------------------------------------------------------

    async def upload(self, request: Request) -> Response:
        async with request.form(max_part_size=MAX_BYTES + 1) as form:
            purpose, upload = form.get("purpose"), form.get("file")
            if purpose not in {"batch", "assistants", "fine-tune", "vision", "user_data"}:
                return _error(400, "Invalid value for 'purpose'.", "invalid_request_error",
                              "purpose")
            if upload is None or isinstance(upload, str):
                return _error(400, "Missing file.", "invalid_request_error", "file")
            data = await upload.read()
            name = upload.filename or "upload.jsonl"
        file = File(new_id("file-"), str(purpose), name, data, int(self.clock()))
        self.files[file.id] = file
        self.received += [json.loads(raw).get("custom_id", "") for raw in
                          data.decode(errors="replace").splitlines() if raw.strip()]
        await self.late(self.faults.upload_delay)
        return JSONResponse(file.json())

    async def list_files(self, request: Request) -> Response:
        purpose = request.query_params.get("purpose")
        files = [f.json() for f in self.files.values() if purpose in (None, f.purpose)]
        return JSONResponse({"object": "list", "data": files,
                             "has_more": False, "first_id": None, "last_id": None})

    async def file(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        file = self.files.get(file_id)
        if file is None:
            return _error(404, f"No such File object: {file_id}", "invalid_request_error", "id")
        if request.method == "DELETE":
            del self.files[file_id]
            self.deleted_files.append(file_id)
            return JSONResponse({"id": file_id, "object": "file", "deleted": True})
        return JSONResponse(file.json())

    async def content(self, request: Request) -> Response:
        file = self.files.get(request.path_params["file_id"])
        if file is None:
            return _error(404, "No such File object.", "invalid_request_error", "id")
        if (broken := self.broken()) is not None and file.purpose == "batch_output":
            return broken
        return Response(file.data, media_type="application/octet-stream")

    # -- batches -------------------------------------------------------------

    async def create(self, request: Request) -> Response:
        if self.faults.refuse_create:
            return _error(400, "Enqueued token limit reached.", "invalid_request_error", None)
        body = await request.json()
        file = self.files.get(body.get("input_file_id", ""))
        if file is None or file.purpose != "batch":
            return _error(400, "Invalid input_file_id.", "invalid_request_error",
                          "input_file_id")
        endpoint = body.get("endpoint")
        if endpoint not in {"/v1/chat/completions", "/v1/responses", "/v1/embeddings",
                            "/v1/completions"}:
            return _error(400, "Invalid endpoint.", "invalid_request_error", "endpoint")
        if body.get("completion_window") != "24h":
            return _error(400, "Invalid completion_window.", "invalid_request_error",
                          "completion_window")
        metadata = body.get("metadata")
        if metadata is not None and not (isinstance(metadata, dict) and len(metadata) <= 16 and all(
                isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512
                for k, v in metadata.items())):
            return _error(400, "Invalid metadata.", "invalid_request_error", "metadata")
        lines, model, invalid = validate(file.data, endpoint, self.max_requests,
                                         self.max_bytes)
        now = self.clock()
        behaviour = self.next_behaviour()
        batch = Batch(new_id("batch_"), file.id, endpoint, now, behaviour, lines, model,
                      invalid, metadata, times=line_times(now, behaviour, len(lines)))
        self.batches[batch.id] = batch
        await self.late(self.faults.create_delay)
        return JSONResponse(self._json(batch))

    async def retrieve(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "No batch found.", "invalid_request_error", "batch_id")
        self._advance(batch)
        return JSONResponse(self._json(batch))

    async def cancel(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "No batch found.", "invalid_request_error", "batch_id")
        self._advance(batch)
        if batch.status in TERMINAL:
            return _error(409, f"Cannot cancel a batch with status '{batch.status}'.",
                          "invalid_request_error", None)
        if batch.status != "cancelling":
            batch.status = "cancelling"
            batch.stamps["cancelling_at"] = int(self.clock())
            batch.cancel_at = self.clock()
        return JSONResponse(self._json(batch))

    async def list_batches(self, request: Request) -> Response:
        """Newest first, a page of `limit` (1–100, default 20) after the id `after`."""
        for batch in self.batches.values():
            self._advance(batch)
        ordered = list(reversed(self.batches.values()))
        after = request.query_params.get("after")
        if after is not None:
            ids = [b.id for b in ordered]
            ordered = ordered[ids.index(after) + 1:] if after in ids else []
        limit = max(1, min(int(request.query_params.get("limit", "20")), 100))
        data = [self._json(b) for b in ordered[:limit]]
        self.list_calls += 1
        return JSONResponse({"object": "list", "data": data, "has_more": len(ordered) > limit,
                             "first_id": data[0]["id"] if data else None,
                             "last_id": data[-1]["id"] if data else None})

    # -- the batch's course --------------------------------------------------

    def _advance(self, batch: Batch) -> None:
        """Move `batch` along by the clock, as the provider would between two looks."""
        if batch.status in TERMINAL:
            return
        now = self.clock()
        if batch.status == "validating":
            if batch.invalid or batch.behaviour.fail:
                return self._fail(batch)
            batch.status = "in_progress"
            batch.stamps["in_progress_at"] = int(now)
        if batch.status == "cancelling":
            if now >= batch.cancel_at + batch.behaviour.cancel_delay:
                self._finish(batch, "cancelled", now, leftover=None)
            return None
        if now >= batch.created_at + self.window_seconds:
            return self._finish(batch, "expired", now, leftover="batch_expired")
        ready = [t is not None and t <= now and self._fate(batch, i) != "expire"
                 for i, t in enumerate(batch.times)]
        batch.done = sum(ready)
        if all(ready):
            self._finish(batch, "completed", now, leftover=None)

    def _fate(self, batch: Batch, index: int) -> LineFate:
        line = batch.lines[index]
        return batch.behaviour.line(line["custom_id"], line["body"])

    def _fail(self, batch: Batch) -> None:
        batch.status = "failed"
        batch.stamps["failed_at"] = int(self.clock())
        batch.errors = batch.invalid or [{
            "code": "token_limit_exceeded",
            "message": "Enqueued token limit reached for this model in the organization."}]

    def _finish(self, batch: Batch, status: str, now: float, leftover: str | None) -> None:
        """End `batch`: lines done by now go to the output/error files; the rest per `leftover`."""
        output, errors = [], []
        for index, line in enumerate(batch.lines):
            when = batch.times[index]
            fate = self._fate(batch, index)
            if when is not None and when <= now and fate != "expire":
                self.answered(line["custom_id"])
                if fate == "ok":
                    output.append(answer_line(line))
                else:
                    errors.append(errored_line(line))
            elif leftover is not None:
                errors.append({"id": new_id("batch_req_"), "custom_id": line["custom_id"],
                               "response": None, "error": {
                                   "code": leftover,
                                   "message": "This request could not be executed before "
                                              "the completion window expired."}})
        batch.done, batch.failed = len(output), len(errors)
        batch.output_file_id = self._result_file(batch, "output", output)
        batch.error_file_id = self._result_file(batch, "errors", errors)
        batch.status = status
        stamp = {"completed": "completed_at", "expired": "expired_at",
                 "cancelled": "cancelled_at"}[status]
        batch.stamps["finalizing_at"] = int(now)
        batch.stamps[stamp] = int(now)

    def _result_file(self, batch: Batch, kind: str, lines: list[dict[str, Any]]) -> str | None:
        if not lines:
            return None  # OpenAI makes no empty file
        random.shuffle(lines)  # results come in no order
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        file = File(new_id("file-"), "batch_output", f"{batch.id}_{kind}.jsonl", data,
                    int(self.clock()))
        self.files[file.id] = file
        return file.id

    def _json(self, batch: Batch) -> dict[str, Any]:
        total = len(batch.lines)
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.endpoint,
            "errors": None if batch.errors is None else {"object": "list",
                                                          "data": batch.errors},
            "input_file_id": batch.input_file_id, "completion_window": "24h",
            "status": batch.status, "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id, "created_at": int(batch.created_at),
            "in_progress_at": batch.stamps.get("in_progress_at"),
            "expires_at": int(batch.created_at + self.window_seconds),
            "finalizing_at": batch.stamps.get("finalizing_at"),
            "completed_at": batch.stamps.get("completed_at"),
            "failed_at": batch.stamps.get("failed_at"),
            "expired_at": batch.stamps.get("expired_at"),
            "cancelling_at": batch.stamps.get("cancelling_at"),
            "cancelled_at": batch.stamps.get("cancelled_at"),
            "request_counts": {"total": total, "completed": batch.done,
                               "failed": batch.failed},
            "metadata": batch.metadata, "model": batch.model,
        }

    def refuse(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {self.key}":
            return _error(401, "Incorrect API key provided.", "invalid_request_error", None,
                          code="invalid_api_key")
        return None


def _error(status: int, message: str, kind: str, param: str | None,
           code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": code}}, status_code=status)
