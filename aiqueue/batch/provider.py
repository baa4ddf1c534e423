"""What the lane needs from a provider's batch API, and the shapes it answers in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

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


def answered(custom_id: str, response: dict[str, Any]) -> Outcome:
    """A line the model answered."""
    return Outcome(custom_id, "succeeded", response=response)


def unanswered(custom_id: str, kind: LineKind, detail: object = None) -> Outcome:
    """A line without an answer, with a stored code the client makes (never the provider's
    message, which may quote the request): `batch_expired` and `batch_canceled` for lines
    the window or a cancel stopped, else `provider_<detail>` when `detail` is an HTTP status
    or an error type that is an identifier, else `provider_line_error`."""
    if kind in ("expired", "canceled"):
        return Outcome(custom_id, kind, error=f"batch_{kind}")
    if isinstance(detail, int) and not isinstance(detail, bool):
        code = f"provider_line_{detail}"
    elif isinstance(detail, str) and detail.isidentifier() and len(detail) <= 40:
        code = f"provider_{detail}"
    else:
        code = "provider_line_error"
    return Outcome(custom_id, "errored", error=code)


@dataclass(frozen=True)
class SdkErrors:
    """An official SDK's exception classes, from the most to the least specific."""

    status: type[Exception]  # an HTTP error answer; has `status_code`
    timeout: type[Exception]
    connection: type[Exception]
    other: type[Exception]


T = TypeVar("T")


async def sdk_call(make: Callable[[], Awaitable[T]], errors: SdkErrors) -> T:
    """Run one SDK call; its failures become a content-free ProviderError.

    The SDKs' errors carry the provider's message, which may quote a request,
    so only the status (or the kind of failure) reaches the lane.
    """
    try:
        return await make()
    except errors.status as exc:
        raise ProviderError(f"provider_http_{getattr(exc, 'status_code', 0)}") from None
    except errors.timeout:
        raise ProviderError("provider_timeout") from None
    except errors.connection:
        raise ProviderError("provider_unreachable") from None
    except (errors.other, ValueError):
        raise ProviderError("provider_bad_answer") from None


@dataclass(frozen=True)
class Limits:
    """The provider's documented limits on one batch."""

    max_requests: int
    max_bytes: int
    one_model: bool = field(default=False)


# A failed call after which the provider may still have done it (the answer was
# lost): what it made is looked for by its tag, never assumed absent.
UNSURE = frozenset({"provider_timeout", "provider_unreachable", "provider_http_500",
                    "provider_http_502", "provider_http_503", "provider_http_504",
                    "provider_http_529"})


class Provider(Protocol):
    """A provider's batch API, as the lane uses it.

    Creating a batch is two steps, each recorded before it is asked for:
    `upload` (OpenAI's input file; nothing for Anthropic) and `create`.
    Neither is retried by the SDK (a retry without an idempotency key could make a
    second file or batch): a lost answer is reconciled by the tag instead.
    """

    @property
    def name(self) -> ProviderName: ...

    @property
    def limits(self) -> Limits: ...

    async def upload(self, lines: Sequence[Line], tag: str) -> tuple[str, ...]:
        """Store the requests where the provider needs them first; the files made."""
        ...

    async def create(self, lines: Sequence[Line], tag: str, files: Sequence[str]) -> Handle:
        """Create a batch of `lines` (already in `files`, if the provider takes files)."""
        ...

    async def find(self, tag: str, count: int, since: float,
                   known: Collection[str] = ()) -> Handle | None:
        """A batch this deployment created with `tag` whose creation was never recorded
        (`known`: the provider ids the lane has recorded, never one of them)."""
        ...

    async def leftovers(self, tag: str) -> tuple[str, ...]:
        """Files kept with `tag` that no batch record knows (an upload whose answer was lost)."""
        ...

    async def delete_files(self, files: Sequence[str]) -> None:
        """Delete these files (gone already counts as deleted)."""
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

    async def check(self) -> None:
        """One read-only call that needs the key (the doctor's); raises ProviderError."""
        ...

    async def aclose(self) -> None:
        """Close the SDK's connections."""
        ...


async def submit(provider: Provider, lines: Sequence[Line], tag: str) -> Handle:
    """Upload and create in one go, with no record kept (the providers' own checks)."""
    files = await provider.upload(lines, tag)
    return await provider.create(lines, tag, files)
