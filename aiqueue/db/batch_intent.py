"""What the overnight lane records before each create, and reconciles by: one method per
named query of sql/batch_intent.sql."""

from __future__ import annotations

from collections.abc import Sequence

from aiqueue.db.gateway import Gateway
from aiqueue.models.batch import LaneBatch


class BatchIntentQueries(Gateway):
    """The tag, the intent before a create, a lost answer, clearing, withdrawing."""

    async def batch_tag(self, batch_id: int) -> str:
        return str(await self._fetchval("batch_tag", batch_id))

    async def batch_intent(self, batch_id: int, lines: int, files: Sequence[str]) -> bool:
        return bool(await self._write("batch_intent", batch_id, lines, list(files)))

    async def batch_unsure(self, batch_id: int, error: str) -> None:
        await self._write("batch_unsure", batch_id, error, idempotent=True)

    async def batch_clear(self, batch_id: int, error: str, files: Sequence[str],
                          look_in: float) -> bool:
        return bool(await self._write("batch_clear", batch_id, error, list(files), look_in,
                                      idempotent=True))

    async def batch_withdrawn(self, batch_id: int, provider_batch_id: str,
                              files: Sequence[str]) -> None:
        await self._write("batch_withdrawn", batch_id, provider_batch_id, list(files),
                          idempotent=True)

    async def batch_known(self, pool: str) -> set[str]:
        """The provider ids of the pool's batches the lane recorded (the last two days)."""
        return {r["provider_batch_id"] for r in await self._fetch("batch_known", pool)}

    async def batches_stale(self, pool: str, older_than: float) -> list[LaneBatch]:
        return [LaneBatch.from_row(r) for r in await self._fetch("batches_stale", pool,
                                                                 older_than)]
