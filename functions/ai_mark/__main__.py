"""Run the reference marking function locally: `python -m functions.ai_mark`."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from .errors import SettingsError
from .server import create_app
from .settings import Settings, is_local_host, require_closed


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, read the settings, serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m functions.ai_mark")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        # Open (no token, no secret) only where no one else can reach it.
        require_closed(settings, local=is_local_host(args.host))
    except SettingsError as exc:
        print(f"ai_mark: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s %(message)s")
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
