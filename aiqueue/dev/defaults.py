"""What `python -m aiqueue dev` sets on top of the environment, and where its secret lives.

`doctor` reads the same (with DATABASE_URL unset), so in a second terminal
beside `dev` it checks the embedded database with the secret and the function
that `dev` is using (docs/deploying/index.md).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from aiqueue.settings import Settings, load_settings

SECRET_FILE = Path(".data") / "dev-secret"
DEV_STUCK_AFTER_SECONDS = 60.0
DEV_FUNCTION_PORT = 8001


def load_dev(env: Any, port: int, function_port: int, secret_file: Path = SECRET_FILE
             ) -> Settings:
    """The environment read as the `dev` command (http:// to any host allowed) plus its defaults."""
    return dev_settings(load_settings(env, port=port, dev=True), env, function_port, secret_file)


def dev_settings(
    settings: Settings, env: Any, function_port: int, secret_file: Path = SECRET_FILE
) -> Settings:
    """The dev command's defaults on top of the environment (which always wins)."""
    changes: dict[str, Any] = {}
    if not given(env, "AI_MARKING_FUNCTION_URL"):
        changes["function_url"] = f"http://127.0.0.1:{function_port}/"
    if not given(env, "QUEUE_STUCK_AFTER_SECONDS"):
        changes["stuck_after_seconds"] = DEV_STUCK_AFTER_SECONDS
    if settings.secret_generated:
        # Kept across runs, so sessions and callback tokens outlive a restart.
        secret = dev_secret(secret_file)
        changes["queue_secrets"] = (secret,)
        if not given(env, "AI_QUEUE_ADMIN_PASSWORD"):
            changes["admin_password"] = secret
    return settings.with_overrides(**changes)


def given(env: Any, name: str) -> bool:
    # As load_settings reads it: an empty variable means the default.
    return bool(env.get(name, "").strip())


def dev_secret(path: Path) -> str:
    """The dev secret stored at `path`, created on first use."""
    if path.exists():
        secret = path.read_text().strip()
        if len(secret) >= 16:
            return secret
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(24)
    path.touch(mode=0o600)
    path.write_text(secret + "\n")
    return secret
