"""One row from the outside: one method per named query of sql/one_row.sql."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import RowResult


class OneRowQueries(Gateway):
    """A row's result status, and the operator's cancel and fail of one row."""

    async def row_result(self, queue_id: UUID) -> RowResult | None:
        row = await self._fetchrow("row_result", queue_id, page=True)
        return RowResult.from_row(row) if row else None

    async def cancel_one(self, queue_id: UUID, actor: str
                         ) -> Literal["pending", "processing"] | None:
        """Cancel a pending or processing row: the status it had, None when it had ended."""
        was: Literal["pending", "processing"] | None = await self._write_val(
            "cancel_one", queue_id, actor, page=True)
        return was

    async def fail_one(self, queue_id: UUID, note: str, actor: str) -> bool:
        """End a pending row as failed (`operator`), `note` in its history; False when it was
        not pending."""
        return await self._write_val("fail_one", queue_id, note, actor, page=True) is not None
