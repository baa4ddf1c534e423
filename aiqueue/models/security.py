"""What the lockdown check reports: a role that reaches a queue object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aiqueue.models.queue import Row

ObjectKind = Literal["table", "view", "sequence", "function"]
# A role that names nobody: the object itself is open (RLS off, a view with
# its owner's rights, a SECURITY DEFINER routine without a pinned search_path).
ANY_ROLE = "*"


@dataclass(frozen=True)
class Exposure:
    """`role` (or PUBLIC, or ANY_ROLE) holds `privilege` on the queue object `object`."""

    role: str
    object: str
    kind: ObjectKind
    privilege: str

    @classmethod
    def from_row(cls, row: Row) -> Exposure:
        return cls(row["role"], row["object"], row["kind"], row["privilege"])
