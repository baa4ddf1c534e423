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


@dataclass(frozen=True)
class AppRole:
    """The powers of the role the app logs in as (docs/deploying/index.md)."""

    role: str
    superuser: bool
    bypassrls: bool
    # Of pg_read_all_data, pg_write_all_data, neon_superuser: those it is a member of.
    wide_roles: tuple[str, ...]
    # It owns the queue (or acts as its owner through a membership).
    owner: bool
    owner_role: str | None
    runtime_role: str | None

    @classmethod
    def from_row(cls, row: Row) -> AppRole:
        return cls(row["role"], row["superuser"], row["bypassrls"], tuple(row["wide_roles"]),
                   row["owner"], row["owner_role"], row["runtime_role"])


@dataclass(frozen=True)
class Reader:
    """A role (or PUBLIC) that can read the host's `submissions` rows."""

    role: str
    row_security: bool
