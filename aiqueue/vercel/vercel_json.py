"""vercel.json, read in one place: its rewrites both ways, and each function's maxDuration."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote_plus

from aiqueue.paths import VERCEL_JSON

# `:name` is one path segment, `:name*` the rest of the path (zero or more segments):
# the subset of path-to-regexp our rewrites use; anything else is refused at load.
_PARAM = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)(\*?)")


@dataclass(frozen=True)
class Rewrite:
    """One `{"source", "destination"}` pair of vercel.json."""

    source: str
    destination: str
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    params: tuple[str, ...] = field(init=False, repr=False, compare=False)
    fixed: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        regex, params = _compile(self.source)
        dest_path, _, dest_query = self.destination.partition("?")
        if ":" in dest_path or not dest_path.startswith("/"):
            raise ValueError(f"unsupported rewrite destination {self.destination!r}")
        object.__setattr__(self, "pattern", regex)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "fixed", tuple(parse_qsl(dest_query, keep_blank_values=True)))

    @property
    def dest_path(self) -> str:
        """The destination without its query: the function's path."""
        return self.destination.partition("?")[0]


def _compile(source: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A source path (`/a/:id/:rest*`) as a full-match regex and its parameter names."""
    parts, params = [], []
    segments = source.strip("/").split("/")
    for i, segment in enumerate(segments):
        match = _PARAM.fullmatch(segment)
        if match is None:
            if not re.fullmatch(r"[A-Za-z0-9._~-]+", segment):
                raise ValueError(f"unsupported rewrite source {source!r}")
            parts.append("/" + re.escape(segment))
        elif match.group(2) and i < len(segments) - 1:
            raise ValueError(f"`:{match.group(1)}*` must end the source {source!r}")
        else:
            name = match.group(1)
            params.append(name)
            parts.append(f"(?:/(?P<{name}>.+))?" if match.group(2) else f"/(?P<{name}>[^/]+)")
    return re.compile("".join(parts) or "/"), tuple(params)


def route(rewrites: list[Rewrite], path: str, query: str = "") -> tuple[str, str] | None:
    """What Vercel's edge does: a public path to (function path, query), or None."""
    for rw in rewrites:
        match = rw.pattern.fullmatch(path)
        if match is None:
            continue
        # Captures the destination does not mention travel as query parameters.
        pairs = [*rw.fixed, *((name, match.group(name) or "") for name in rw.params)]
        added = "&".join(f"{quote(k)}={quote(v, safe='/')}" for k, v in pairs)
        return rw.dest_path, "&".join(q for q in (added, query) if q)
    return None


def restore(rewrites: list[Rewrite], path: str, query: str = "") -> tuple[str, str]:
    """A request that arrived on a rewrite's destination, back on its public path and query.

    `path` is percent-decoded (as in an ASGI scope), `query` raw. A public path is returned
    unchanged: it equals no destination, except `/api/marking`,
    which maps onto itself.
    """
    pieces = [p for p in query.split("&") if p]
    # The rewrite that explains the most of the query wins (`?route=metrics` over none).
    for rw in sorted(rewrites, key=lambda r: -len(r.fixed) - len(r.params)):
        if rw.dest_path != path:
            continue
        restored = _public(rw, pieces)
        if restored is not None:
            return restored
    return path, query


def _public(rw: Rewrite, pieces: list[str]) -> tuple[str, str] | None:
    """The public path of `rw` rebuilt from the query pieces, or None if they do not fit."""
    rest = list(pieces)
    for key, value in rw.fixed:
        if not _take(rest, key, value):
            return None
    values: dict[str, str] = {}
    for name in rw.params:
        found = _take(rest, name, None)
        values[name] = found[0] if found else ""
    path = rw.source
    for name in rw.params:
        star = f":{name}*" in path
        value = values[name]
        if not value and not star:
            return None
        if not star and "/" in value:
            return None
        # ASGI paths are percent-decoded, and so are query values: no quoting here.
        token = f"/:{name}*" if star else f":{name}"
        path = path.replace(token, f"/{value}" if star and value else value)
    return path or "/", "&".join(rest)


def _take(pieces: list[str], key: str, want: str | None) -> list[str]:
    """Remove the first `key=…` piece (with value `want`, if given); return [value] or []."""
    for i, piece in enumerate(pieces):
        k, _, v = piece.partition("=")
        value = unquote_plus(v)
        if unquote_plus(k) == key and want in (None, value):
            del pieces[i]
            return [value]
    return []


@dataclass(frozen=True)
class VercelConfig:
    """The parts of vercel.json the app reads."""

    rewrites: list[Rewrite]
    max_durations: dict[str, float]

    def function_of(self, public_path: str) -> str | None:
        """The entry file (`api/enqueue.py`) that serves a public path."""
        routed = route(self.rewrites, public_path)
        return None if routed is None else routed[0].lstrip("/") + ".py"

    def max_duration(self, entry: str) -> float | None:
        """The `maxDuration` vercel.json gives the function in `entry`, if any."""
        return self.max_durations.get(entry)


def load(path: Path = VERCEL_JSON) -> VercelConfig:
    """Read vercel.json; raise ValueError on a rewrite this module cannot invert."""
    data = json.loads(path.read_text())
    rewrites = [Rewrite(r["source"], r["destination"]) for r in data.get("rewrites", [])]
    durations = {
        entry: float(conf["maxDuration"])
        for entry, conf in data.get("functions", {}).items()
        if "maxDuration" in conf
    }
    return VercelConfig(rewrites, durations)
