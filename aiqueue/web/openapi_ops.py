"""How one operation of the OpenAPI description is built: its answers, errors, parameters.

openapi_paths.py says which route has which; the JSON errors' shared answers
(`ERRORS`, one per status) are referenced from components by `error_response`.
"""

from __future__ import annotations

from aiqueue.wire.schema import Schema, ref

BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
PUBLIC: list[dict[str, list[str]]] = []

ERRORS = {
    400: "The body is not JSON, or a header (Idempotency-Key, Content-Length) is malformed.",
    401: "Missing or wrong credentials.",
    404: "No such row, submission or route.",
    409: "The row is not in a state that allows the action.",
    413: "The body is too large.",
    422: "Valid JSON (or query) with wrong or missing fields.",
    503: "The database is unavailable or its schema is behind this code (`schema_behind`, "
         "with `expected` and `found`); nothing was applied. Retry after Retry-After.",
}


def error_response(code: int) -> Schema:
    """A JSON error's shared answer (components' E<code>), with its headers."""
    answer: Schema = {"description": ERRORS[code],
                      "content": {"application/json": {"schema": ref("Error")}}}
    if code == 401:
        answer["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
    if code == 503:
        answer["headers"] = {"Retry-After": {"schema": {"type": "string"}}}
    return answer


def reply(schema: str, description: str = "OK", **headers: Schema) -> Schema:
    """A JSON answer of the named component schema."""
    answer: Schema = {"description": description,
                      "content": {"application/json": {"schema": ref(schema)}}}
    if headers:
        answer["headers"] = headers
    return answer


def op(op_id: str, summary: str, ok: dict[int, Schema], errors: tuple[int, ...], *,
       security: list[dict[str, list[str]]] | None = None, body: str | None = None,
       optional_body: bool = False, no_body: bool = False, params: tuple[Schema, ...] = (),
       tag: str = "marking") -> Schema:
    """One operation: its answers (success and JSON errors), body, parameters, auth.

    `no_body`: the route takes none; an empty body or `{}`, any field a 422 (web.gate.no_body).
    """
    if no_body:
        errors = tuple(sorted({*errors, 400, 413, 422}))
    operation: Schema = {"operationId": op_id, "summary": summary, "tags": [tag],
                         "security": BEARER if security is None else security,
                         "responses": {**{str(c): a for c, a in ok.items()},
                                       **{str(c): {"$ref": f"#/components/responses/E{c}"}
                                          for c in errors}}}
    if body is not None:
        operation["requestBody"] = {"required": not optional_body,
                                    "content": {"application/json": {"schema": ref(body)}}}
    if no_body:
        operation["requestBody"] = {"required": False, "content": {"application/json": {
            "schema": {"type": "object", "maxProperties": 0}}}}
    if params:
        operation["parameters"] = list(params)
    return operation


def parameter(name: str, where: str, schema: Schema, description: str = "",
           required: bool = False) -> Schema:
    param: Schema = {"name": name, "in": where, "required": required or where == "path",
                     "schema": schema}
    if where == "query" and not required:
        param["allowEmptyValue"] = True  # an empty value means the default, as if absent
    if description:
        param["description"] = description
    return param
