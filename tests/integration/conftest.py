"""The integration tests' shared fixtures (the database ones are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import respx

from aiqueue.db.store import Store, connect_pool

# The store's pool opens connections as they are needed, up to this many
# (a module that races more callers asks for more: `pytest.mark.store_pool(n)`).
STORE_POOL = 10


@pytest.fixture
async def store(db_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """The Store on the test's fresh database."""
    mark = request.node.get_closest_marker("store_pool")
    s = Store(await connect_pool(db_url, max_size=mark.args[0] if mark else STORE_POOL))
    yield s
    await s.close()


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    """Outgoing HTTP answered by respx; a route the test adds need not be called."""
    with respx.mock(assert_all_called=False) as router:
        yield router
