"""Routes described per the contract but not yet in the app (the OpenAPI tests and Schemathesis
leave them out)."""

from __future__ import annotations

# Described per the contract but built on another branch: when the route arrives,
# this test fails until its line is removed here.
PENDING: set[tuple[str, str]] = set()
