"""An embedded PostgreSQL (the pgserver wheel) for dev and tests when DATABASE_URL is unset."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from aiqueue.errors import SettingsError

DEFAULT_DIR = Path(".data") / "pg"


def start_embedded(directory: Path = DEFAULT_DIR) -> tuple[str, Any]:
    """Start (or join) the embedded server under `directory`; return (dsn, handle)."""
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError:
        raise SettingsError(
            "DATABASE_URL is unset and the embedded PostgreSQL (pip install pgserver) is missing"
        ) from None
    directory.mkdir(parents=True, exist_ok=True)
    get_server = pgserver.get_server  # type: ignore[attr-defined]
    server = get_server(directory.resolve(), cleanup_mode="stop")
    return str(server.get_uri()), server
