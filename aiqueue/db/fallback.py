"""Ordered fallback: one method per named query of sql/fallback.sql."""

from __future__ import annotations

from collections.abc import Sequence

from aiqueue.db.gateway import Gateway


class FallbackQueries(Gateway):
    """Whether pools are down, and moving a kind's pending rows to its fallback and back."""

    async def pools_down(self, pools: Sequence[str]
                         ) -> dict[str, tuple[bool, float | None, float | None]]:
        """{pool: (circuit open, seconds since the last refusal's hold ended, seconds every
        call was refused)}."""
        rows = await self._fetch("pools_down", list(pools))
        return {r["pool"]: (r["circuit_open"], _seconds(r["hold_ended"]),
                            _seconds(r["refusing_seconds"])) for r in rows}

    async def fallback_move(self, moves: str) -> int:
        """Move pending rows per `moves` (jsonb text); how many moved."""
        return int(await self._write_val("fallback_move", moves, idempotent=True) or 0)


def _seconds(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]
