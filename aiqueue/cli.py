"""python -m aiqueue serve | migrate [up|down] | dev | doctor [--json] | erase"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence

from aiqueue import logs
from aiqueue.db.embedded import database_for
from aiqueue.db.migrate import may_migrate, migrate
from aiqueue.dev.defaults import DEV_FUNCTION_PORT, dev_settings
from aiqueue.errors import AiQueueError, SettingsError
from aiqueue.settings import Settings, load_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m aiqueue")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="apply migrations and serve every route")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    mig = sub.add_parser("migrate", help="apply or roll back migrations")
    mig.add_argument("direction", nargs="?", choices=["up", "down"], default="up")
    mig.add_argument("--runtime-role", metavar="ROLE",
                     help="up: grant ROLE exactly what the running app needs")
    dev = sub.add_parser("dev", help="embedded PostgreSQL, demo data, app, function, ticker")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8000)
    dev.add_argument("--function-port", type=int, default=DEV_FUNCTION_PORT)
    doctor = sub.add_parser("doctor", help="check the deployment the environment points at")
    doctor.add_argument("--json", action="store_true", help="the report as JSON")
    doctor.add_argument("--probe-timeout", type=float, default=30.0, help=argparse.SUPPRESS)
    erase = sub.add_parser("erase", help="erase a student's data from every queue table")
    which = erase.add_mutually_exclusive_group(required=True)
    which.add_argument("--submission", metavar="ID", help="one submission's id (a UUID)")
    which.add_argument("--assignment", metavar="ID", help="every submission of an assignment")
    return parser


def run_erase(submission: str | None, assignment: str | None) -> int:
    """Erase, then print {"erased": {table: rows}} as the API answers it."""
    from uuid import UUID

    from aiqueue.records import erasure
    from aiqueue.runtime import Runtime

    ids: list[UUID] = []
    if submission is not None:
        try:
            ids = [UUID(submission)]
        except ValueError:
            raise SettingsError(f"--submission must be a UUID, got {submission[:64]!r}") from None

    async def go() -> dict[str, int]:
        settings, _handle = database_for(load_settings())
        assert settings.database_url
        rt = await Runtime.create(settings, settings.database_url)
        try:
            await rt.require_schema()
            if assignment is not None:
                return await erasure.erase_assignment(rt, assignment, "cli")
            return await erasure.erase_submissions(rt, ids, "cli")
        finally:
            await rt.close()

    print(json.dumps({"erased": asyncio.run(go())}, indent=2))
    return 0


def run_doctor(as_json: bool, probe_timeout: float) -> int:
    """Print the doctor's report; 0 unless a check failed (a warning still exits 0)."""
    from aiqueue.doctor.checks import run_doctor as run
    from aiqueue.doctor.report import settings_failed

    try:
        settings = doctor_settings(load_doctor(os.environ), os.environ)
    except SettingsError as exc:
        report = settings_failed(exc)
    else:
        settings, _handle = database_for(settings)
        report = asyncio.run(run(settings, probe_timeout=probe_timeout))
    print(json.dumps(report.to_json(), indent=2) if as_json else report.text())
    return 0 if report.ok else 1


def load_doctor(env: Mapping[str, str]) -> Settings:
    """The environment as the doctor reads it: without DATABASE_URL it checks what `dev`
    runs, so it reads the environment as `dev` does (http:// to any host allowed)."""
    return load_settings(env, dev=not env.get("DATABASE_URL", "").strip())


def doctor_settings(settings: Settings, env: Mapping[str, str]) -> Settings:
    """With DATABASE_URL unset the doctor checks what `python -m aiqueue dev` runs: its
    embedded database, its secret (.data/dev-secret) and its bundled function."""
    if settings.database_url:
        return settings
    return dev_settings(settings, env, DEV_FUNCTION_PORT)


def serve(settings: Settings, host: str, port: int) -> None:
    import uvicorn

    from aiqueue.vercel.oidc import read_oidc_header
    from aiqueue.web.app import create_app

    settings, _handle = database_for(settings)
    assert settings.database_direct_url
    if asyncio.run(may_migrate(settings.database_direct_url)):
        applied = asyncio.run(migrate(settings.database_direct_url, "up"))
        logs.event("migrate", count=len(applied))
    else:
        # The runtime role owns nothing and may create nothing: the owner migrates.
        logs.event("migrate_skipped", reason="not_owner")
    # Start-up refuses a time zone the database does not know, with one line.
    asyncio.run(refuse_unknown_zone(settings))
    if settings.secret_generated:
        print(f"MARKING_QUEUE_SECRET (generated for this run): {settings.queue_secret}",
              file=sys.stderr)
    app = read_oidc_header(create_app(settings, ticker=True))
    # log_config=None: uvicorn's records go through logs.setup's content-free
    # formatter instead of its own (which prints exception texts).
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                loop="auto", http="auto", timeout_graceful_shutdown=5, log_config=None)


async def refuse_unknown_zone(settings: Settings) -> None:
    """Raise ZoneUnknown (one line) when the database lacks a time zone the settings name."""
    from aiqueue.runtime import Runtime, unknown_zone

    assert settings.database_url
    rt = await Runtime.create(settings, settings.database_url)
    try:
        found = await unknown_zone(rt.store, settings)
    finally:
        await rt.close()
    if found is not None:
        raise found


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logs.setup()
    try:
        if args.command == "serve":
            serve(load_settings(port=args.port), args.host, args.port)
        elif args.command == "doctor":
            return run_doctor(args.json, args.probe_timeout)
        elif args.command == "erase":
            return run_erase(args.submission, args.assignment)
        elif args.command == "migrate":
            if args.runtime_role is not None and args.direction != "up":
                raise SettingsError("--runtime-role goes with `migrate up`")
            settings, _handle = database_for(load_settings())
            assert settings.database_direct_url
            done = asyncio.run(migrate(settings.database_direct_url, args.direction,
                                       runtime_role=args.runtime_role))
            print(f"migrate {args.direction}: {', '.join(done) or 'nothing to do'}")
        else:
            from aiqueue.dev.server import run_dev

            run_dev(args.host, args.port, args.function_port)
    except AiQueueError as exc:
        print(f"aiqueue: {exc.detail}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
