"""An OTLP/HTTP sink for the traces benchmark: takes /v1/traces in protobuf, counts spans.

Run as its own process (`python -m bench.otlpsink PORT`), like bench/fnserver.py, so
decoding the exports does not share the app's or the measuring process's GIL.
"""

from __future__ import annotations

import sys

import uvicorn
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class Counts:
    def __init__(self) -> None:
        self.requests = 0
        self.spans = 0

    async def traces(self, request: Request) -> Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        self.requests += 1
        self.spans += sum(len(scope.spans) for rs in message.resource_spans
                          for scope in rs.scope_spans)
        return Response(ExportTraceServiceResponse().SerializeToString(),
                        media_type="application/x-protobuf")

    async def stats(self, request: Request) -> Response:
        return JSONResponse({"requests": self.requests, "spans": self.spans})


def main(port: int) -> None:
    counts = Counts()
    app = Starlette(routes=[Route("/v1/traces", counts.traces, methods=["POST"]),
                            Route("/stats", counts.stats)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main(int(sys.argv[1]))
