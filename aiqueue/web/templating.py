"""Jinja2 templates (autoescaped) from templates/; they only render what they are given."""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.responses import HTMLResponse

from aiqueue.paths import TEMPLATES_DIR


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def render(name: str, status_code: int = 200, headers: dict[str, str] | None = None,
           **context: Any) -> HTMLResponse:
    html = environment().get_template(name).render(**context)
    return HTMLResponse(html, status_code=status_code,
                        headers={**PAGE_HEADERS, **(headers or {})})


# Every HTML answer, a whole page or a fragment of one: never framed (clickjacking).
PAGE_HEADERS = {
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}
