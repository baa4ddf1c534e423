"""The one-command local run: dev server and demo data (nothing imports this)."""
