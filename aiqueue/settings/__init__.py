"""Every setting: the environment, its safety checks, dispatch targets, pools and aiqueue.toml.

Read once at start-up into a frozen `Settings` (table.py); a bad value stops
start-up with one line that names its variable or key (`SettingsError`).

- env.py: how one variable is read, and the table's entries (`number`, `optional`)
- safety.py: https:// where secrets travel, secrets' lengths, Vercel's URLs
- targets.py: AI_MARKING_DISPATCH's targets, and each kind's `KindTarget`
- kinds.py: the kinds and pools (and how the file's join the default ones)
- toml_load.py, toml_values.py: reading aiqueue.toml, each value checked
- pools.py: aiqueue.toml checked against the environment
- money.py: each pool's spend caps and prices, as the SQL rules take them
- plan.py: the claim plan, everything the claim's SQL reads of these settings
- reference.py: `env_fields()` and `toml_keys()`, every variable and key (the
  configuration reference is generated from them)
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from aiqueue.errors import SettingsError
from aiqueue.settings.env import Env, ModelPrice, env_db_url, env_whsec
from aiqueue.settings.pools import batch_reaches_function, caps_priced, queue_file
from aiqueue.settings.reference import EnvField, env_fields, toml_keys
from aiqueue.settings.safety import (
    AWS_ENV_NAMES,
    MIN_PASSWORD,
    app_base_url,
    secret_values,
    secure_url,
    single_secret,
    vercel_dev,
)
from aiqueue.settings.table import DEV_FUNCTION_URL, Settings
from aiqueue.settings.targets import load_target

__all__ = ["EnvField", "ModelPrice", "Settings", "env_fields", "load_settings", "toml_keys"]


def load_settings(
    env: Mapping[str, str] | None = None, *, port: int = 8000, dev: bool = False
) -> Settings:
    """Read and validate the environment; raise SettingsError naming the bad variable.

    `dev` is the `dev` command, which (like `vercel dev`) may use http:// to any host.
    """
    env = os.environ if env is None else env
    local_run = dev or vercel_dev(env)
    production = bool(env.get("VERCEL")) or env.get("AIQUEUE_ENV", "").lower() == "production"
    database_url = env_db_url(env, "DATABASE_URL", None)
    if production and database_url is None:
        raise SettingsError("DATABASE_URL is required in production")
    queue_secrets = secret_values(env, "MARKING_QUEUE_SECRET")
    generated = not queue_secrets
    if generated:
        if production:
            raise SettingsError("MARKING_QUEUE_SECRET is required in production")
        queue_secrets = (secrets.token_urlsafe(24),)
    mode = env.get("AI_MARKING_FUNCTION_MODE", "async").strip().lower() or "async"
    if mode not in ("async", "sync"):
        raise SettingsError(f"AI_MARKING_FUNCTION_MODE must be 'async' or 'sync', got {mode!r}")
    base = app_base_url(env, port, secure_url(env, "APP_BASE_URL", local_run))
    target, digitalocean, aws_lambda = load_target(env, mode, local_run=local_run)
    function_url = secure_url(env, "AI_MARKING_FUNCTION_URL", local_run)
    if function_url is None and production and target == "http":
        raise SettingsError("AI_MARKING_FUNCTION_URL is required in production")
    notify_url = secure_url(env, "QUEUE_NOTIFY_URL", local_run)
    table = _table(env)
    file = queue_file(env, mode, local_run, table["model_prices"])
    batch_reaches_function(file, target, function_url)
    settings = Settings(
        database_url=database_url,
        database_direct_url=env_db_url(env, "DATABASE_DIRECT_URL", database_url),
        queue_secrets=queue_secrets,
        admin_password=(single_secret(env, "AI_QUEUE_ADMIN_PASSWORD", MIN_PASSWORD)
                        or queue_secrets[0]),
        app_base_url=base,
        function_url=function_url or DEV_FUNCTION_URL,
        function_mode="sync" if mode == "sync" else "async",
        dispatch_target=target, digitalocean=digitalocean, aws_lambda=aws_lambda,
        # Each dispatch's callback token comes back to it: https like APP_BASE_URL.
        callback_url=secure_url(env, "AI_MARKING_CALLBACK_URL", local_run)
        or f"{base}/webhooks/ai-mark",
        production=production,
        secret_generated=generated,
        notify_url=notify_url,
        notify_secret=_notify_secret(env, notify_url),
        on_vercel=bool(env.get("VERCEL")),
        vercel_dev=vercel_dev(env),
        aws_env_names=tuple(n for n in AWS_ENV_NAMES if env.get(n, "").strip()),
        queue_file=file,
        environment=dict(env),
        **table,
    )
    caps_priced(settings.queue)
    return settings


def _table(env: Env) -> dict[str, Any]:
    """Every field the table reads from one variable, by field name."""
    return {f.name: f.metadata["read"](env) for f in fields(Settings) if "read" in f.metadata}


def _notify_secret(env: Env, url: str | None) -> str | None:
    """QUEUE_NOTIFY_SECRET: a Standard Webhooks secret, required with QUEUE_NOTIFY_URL."""
    secret = env_whsec(env, "QUEUE_NOTIFY_SECRET")
    if secret is None and url is not None:
        raise SettingsError("QUEUE_NOTIFY_SECRET is required with QUEUE_NOTIFY_URL "
                            "(a Standard Webhooks secret, whsec_...)")
    if secret is not None and url is None:
        raise SettingsError("QUEUE_NOTIFY_SECRET is set but QUEUE_NOTIFY_URL is not")
    return secret
