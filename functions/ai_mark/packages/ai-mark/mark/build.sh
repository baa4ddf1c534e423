#!/bin/bash
# doctl runs this in the function's directory before zipping it: it vendors the
# ai_mark package (relative imports make it importable under that name) and httpx.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../../.."
cd "$here"
rm -rf ai_mark virtualenv __main__.py
mkdir ai_mark
cp "$src"/*.py ai_mark/
# The local ASGI server needs starlette/uvicorn, which a function never uses.
rm -f ai_mark/server.py ai_mark/__main__.py
printf 'from ai_mark.do_main import main\n\n__all__ = ["main"]\n' > __main__.py
virtualenv --without-pip virtualenv
pip install -r "$src/requirements.txt" --target virtualenv/lib/python3.11/site-packages
