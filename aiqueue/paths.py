"""Where the checkout's top-level folders are: the one place code finds them.

`templates/` and `migrations/` stay at the top of the repository (where the
product's users look for them, and where Vercel bundles them beside `api/`).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = ROOT / "templates"
MIGRATIONS_DIR = ROOT / "migrations"
VERCEL_JSON = ROOT / "vercel.json"
