"""What the lane needs from a provider's batch API, and the shapes it answers in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from aiqueue.errors import AiQueueError

ProviderName = Literal["openai", "anthropic"]
# How a batch stands: still running; ended with results to read (completed,
# or cancelled / expired with partial results); or failed as a whole.
State = Literal["running", "ended", "failed"]
# How one line ended; a line missing from the results of an ended batch did not run.
LineKind = Literal["succeeded", "errored", "expired", "canceled"]


class ProviderError(AiQueueError):
    """A call to the provider failed; `code` is short and content-free."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class Line:
    """One request of a batch: its `custom_id` and the provider's request body."""

    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Handle:
    """A batch at the provider: its id and every file the provider keeps for it."""

    batch_id: str
    files: tuple[str, ...] = ()

    def with_files(self, *more: str | None) -> Handle:
        known = list(self.files)
        known += [f for f in more if f and f not in known]
        return Handle(self.batch_id, tuple(known))


@dataclass(frozen=True)
class Polled:
    """What one look at a batch found. `missing` is how lines absent from results ended."""

    state: State
    handle: Handle
    missing: LineKind = "errored"
    # OpenAI's output and error files (None once read or when there is none).
    output_file: str | None = None
    error_file: str | None = None


@dataclass(frozen=True)
class Outcome:
    """How one line ended: a response to parse, or a content-free error code."""

    custom_id: str
    kind: LineKind
    response: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class Limits:
    """The provider's documented limits on one batch."""

    max_requests: int
    max_bytes: int
    one_model: bool = field(default=False)


class Provider(Protocol):
    """A provider's batch API, as the lane uses it."""

    @property
    def name(self) -> ProviderName: ...

    @property
    def limits(self) -> Limits: ...

    async def submit(self, lines: Sequence[Line], tag: str) -> Handle:
        """Create a batch of `lines`; `tag` (the lane's id) helps find it after a crash."""
        ...

    async def find(self, tag: str, count: int, since: float) -> Handle | None:
        """A batch this app created with `tag` whose creation was never recorded."""
        ...

    async def poll(self, handle: Handle) -> Polled:
        """Look at a batch once."""
        ...

    async def results(self, polled: Polled) -> list[Outcome]:
        """Every line's outcome of an ended batch (lines that never ran may be absent)."""
        ...

    async def cancel(self, handle: Handle) -> None:
        """Ask the provider to stop the batch (lines already running may still finish)."""
        ...

    async def delete(self, handle: Handle) -> bool:
        """Delete what the provider keeps; False while it can't yet (still cancelling)."""
        ...

    async def aclose(self) -> None:
        """Close the SDK's connections."""
        ...
