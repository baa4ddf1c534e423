"""A dead invocation gives its slot back fast, and nothing is paid twice (docs/guarantees.md).

A row whose function went quiet is recovered: after the heartbeat timeout once
it sent a heartbeat, after QUEUE_STUCK_AFTER_SECONDS otherwise, and never later
than the platform's time limit plus a grace (Lambda's configured timeout,
DigitalOcean's action limit).  On DigitalOcean the platform is asked first, and
early (docs/deploying/index.md): at the earliest of the heartbeat timeout, the action's
limit plus the grace, and 3x the recent p95 processing time (at least 10 s).
A finished activation's result is applied as if it had been called back (no
second model call), a failed one fails the attempt now, and one not found yet
is still running: it is asked about again later, and recovered once the
action's limit plus the grace has passed.

The platform is asked outside any transaction: a short statement takes a few
quiet dispatches (SKIP LOCKED, then `look_after` keeps other instances off
them), the HTTP calls follow, and each decision is applied by statements that
only act while that dispatch is still the row's current one.

Each row is recovered by its kind's platform (docs/concepts.md: a kind of
aiqueue.toml may dispatch to DigitalOcean or Lambda beside an http default):
the kinds are grouped by the platform they dispatch to, and each group has
its own thresholds and its own looks.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from aiqueue import logs
from aiqueue.dispatch.platform import Activation, LambdaTimeout, activation
from aiqueue.errors import Invalid
from aiqueue.models import Lookup
from aiqueue.ports import RecoveryStore
from aiqueue.queue import fallback
from aiqueue.queue.results import ResultItem, apply_item, fail_attempt, parse_item
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import DEFAULT_KIND
from aiqueue.settings.targets import DoTarget, KindTarget, LambdaTarget

# Looks per process step and instance: a step stays short, the rest wait a second.
LOOKS_PER_STEP = 3
# How long a look taken by one instance is left alone by the others.
LOOK_HOLD_SECONDS = 30.0
# A quiet dispatch is asked about once quiet for this many times the recent p95
# processing time, but never sooner than the floor: a job is rarely that slow,
# and a look that finds it still running only costs one more look later.
P95_FACTOR = 3.0
P95_FLOOR_SECONDS = 10.0
# The recent p95 is read again this often per instance (one short query); while
# there is no result yet, sooner, so that the first results count at once.
P95_REFRESH_SECONDS = 60.0
P95_UNKNOWN_REFRESH_SECONDS = 5.0


@dataclass
class RecentP95:
    """The recent p95 processing time (seconds; None: no recent result), kept per
    instance (Runtime.own) and read again once a minute (every few seconds while None)."""

    value: float | None = None
    due: float = 0.0  # monotonic
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    async def get(self, rt: Runtime[RecoveryStore]) -> float | None:
        if time.monotonic() < self.due:
            return self.value
        async with self.lock:
            if time.monotonic() >= self.due:
                self.value = await rt.store.recent_processing_tail()
                self.due = time.monotonic() + (
                    P95_UNKNOWN_REFRESH_SECONDS if self.value is None else P95_REFRESH_SECONDS)
        return self.value


@dataclass(frozen=True)
class Thresholds:
    """When quiet rows are recovered, for the configured target."""

    stuck: float
    heartbeat: float
    # Seconds after the dispatch by which the platform has ended the invocation
    # for sure (its time limit plus the grace); None when unknown.
    bound: float | None
    # The platform is asked before a row with an invocation id is recovered.
    ask: bool
    # The recent p95 processing time, when the platform is asked and there are results.
    p95: float | None = None

    @property
    def quiet(self) -> float:
        """How long an asked-about dispatch stays quiet before the platform is asked.

        The earlier of the heartbeat timeout and 3x the recent p95 (at least
        10 s); the bound (the action's limit plus the grace) caps it in SQL.
        The dispatch counts as the first sign of life: a short job sends no
        heartbeat, and its lost callback should not hold the slot for long.
        Before any result the p95 term is the floor: the first job's lost
        callback is found as fast as a later one's, and a slow first job only
        costs a look every 10 s ("still running").
        """
        p95 = 0.0 if self.p95 is None else self.p95
        return min(self.heartbeat, max(P95_FLOOR_SECONDS, P95_FACTOR * p95))


@dataclass(frozen=True)
class Platform:
    """The kinds that dispatch to one platform, and that platform (one kind's target).

    `kinds` None: every kind but `others` (the default kind's platform, which
    also takes rows of kinds no longer declared).
    """

    target: KindTarget
    kinds: tuple[str, ...] | None = None
    others: tuple[str, ...] = ()


def platforms(rt: Runtime[RecoveryStore]) -> list[Platform]:
    """The kinds grouped by the platform they dispatch to; one group without aiqueue.toml."""
    s = rt.settings
    groups: dict[object, tuple[KindTarget, list[str]]] = {}
    for name in s.queue.kinds:
        k = s.target(name)
        key = (k.dispatch, k.digitalocean, k.aws_lambda)
        groups.setdefault(key, (k, []))[1].append(name)
    if len(groups) == 1:
        return [Platform(next(iter(groups.values()))[0])]
    found = []
    for k, names in groups.values():
        if DEFAULT_KIND in names:
            others = tuple(n for n in s.queue.kinds if n not in names)
            found.append(Platform(k, None, others))
        else:
            found.append(Platform(k, tuple(names)))
    return found


@dataclass
class LambdaTimeouts:
    """Each Lambda function's timeout (a kind may dispatch to its own), kept per instance."""

    by_function: dict[LambdaTarget, LambdaTimeout] = field(default_factory=dict)


def _lambda_timeout(rt: Runtime[RecoveryStore], target: LambdaTarget) -> LambdaTimeout:
    if target == rt.settings.aws_lambda:
        return rt.own(LambdaTimeout)
    return rt.own(LambdaTimeouts).by_function.setdefault(target, LambdaTimeout())


async def thresholds(rt: Runtime[RecoveryStore], target: KindTarget | None = None
                     ) -> Thresholds:
    """The recovery thresholds of a platform (default: the default kind's; Lambda's timeout
    read once)."""
    s = rt.settings
    t = s.target() if target is None else target
    bound: float | None = None
    if t.dispatch == "digitalocean" and t.digitalocean is not None:
        bound = t.digitalocean.action_timeout_seconds + s.platform_grace_seconds
    elif t.dispatch == "lambda" and t.aws_lambda is not None:
        timeout = await _lambda_timeout(rt, t.aws_lambda).get(rt.http, t.aws_lambda, rt.aws)
        bound = None if timeout is None else timeout + s.platform_grace_seconds
    ask = t.dispatch == "digitalocean" and t.digitalocean is not None
    # QUEUE_STUCK_AFTER_SECONDS still holds for "no result or heartbeat for this long"
    # (docs/configuration.md): the heartbeat timeout can shorten the wait, never lengthen it.
    heartbeat = min(s.heartbeat_timeout_seconds, s.stuck_after_seconds)
    p95 = await rt.own(RecentP95).get(rt) if ask else None
    return Thresholds(s.stuck_after_seconds, heartbeat, bound, ask, p95)


async def recover(rt: Runtime[RecoveryStore]) -> int:
    """Recover quiet rows, each by its kind's platform (asking the platform first where it
    can tell); how many were freed."""
    freed = 0
    for p in platforms(rt):
        t = await thresholds(rt, p.target)
        freed += await rt.store.recover_stuck(t.stuck, rt.settings.max_attempts,
                                              heartbeat=t.heartbeat, bound=t.bound, ask=t.ask,
                                              attempts=rt.settings.queue.attempts,
                                              kinds=p.kinds, others=p.others)
        target = p.target.digitalocean
        if t.ask and t.bound is not None and target is not None:
            freed += await ask_digitalocean(rt, target, t.quiet, t.bound, p)
    return freed


async def next_wakeup(rt: Runtime[RecoveryStore]) -> float | None:
    """Seconds until the process step has something to do (the ticker's sleep): the
    earliest by any platform's thresholds (an early wake-up finds nothing and sleeps)."""
    plan = fallback.plan(rt)
    waits = []
    for p in platforms(rt):
        t = await thresholds(rt, p.target)
        waits.append(await rt.store.next_wakeup(
            plan, t.stuck, heartbeat=t.heartbeat, bound=t.bound, ask=t.ask, look=t.quiet))
    known = [w for w in waits if w is not None]
    return min(known) if known else None


async def ask_digitalocean(rt: Runtime[RecoveryStore], target: DoTarget, quiet: float,
                           bound: float, platform: Platform | None = None) -> int:
    """Look at the activations of a few quiet dispatches and act on each; how many ended."""
    p = platform or Platform(rt.settings.target())
    looks = await rt.store.take_lookups(quiet, bound, LOOKS_PER_STEP, LOOK_HOLD_SECONDS,
                                        kinds=p.kinds, others=p.others)
    if not looks:
        return 0
    answers = await asyncio.gather(*(activation(rt.http, target, look.ref) for look in looks))
    ended = 0
    for look, answer in zip(looks, answers, strict=True):
        ended += await decide(rt, look, answer, quiet, bound)
    return ended


async def decide(rt: Runtime[RecoveryStore], look: Lookup, answer: Activation, quiet: float,
                 bound: float) -> int:
    """Act on what DigitalOcean said about one dispatch; 1 if it ended the dispatch."""
    if answer.state == "finished":
        ended = await _apply_activation(rt, look, answer)
    elif answer.state == "failed":
        code = answer.code or "activation_failed"
        said = "timed_out" if code == "activation_timeout" else "activation_failed"
        ended = await _end(rt, look, code, said, outcome="activation_failed", retry_now=False)
    elif look.past_bound:
        # Still no record after the action's limit and the grace: the invocation is gone.
        ended = await _end(rt, look, "platform_timeout", "timed_out", outcome="stuck",
                           retry_now=True)
    else:
        said = "still_running" if answer.state == "not_found" else "lookup_failed"
        await rt.store.platform_waits(look.queue_id, look.dispatch_seq, said, quiet, bound)
        ended = False
    logs.event("activation", queue_id=look.queue_id, attempt=look.attempt,
               outcome=answer.state, code=answer.code, status="ended" if ended else "waiting")
    return int(ended)


async def _apply_activation(rt: Runtime[RecoveryStore], look: Lookup, answer: Activation) -> bool:
    """Apply the action's callback items of this very dispatch, as the webhook would."""
    items = [item for item in (_verified(rt, raw, look) for raw in answer.items)
             if item is not None and item.status != "progress"]
    if not items:
        # It ended without a result this queue can trust: a failed attempt.
        return await _end(rt, look, "activation_no_result", "activation_failed",
                          outcome="activation_failed", retry_now=False)
    applied = False
    for item in items:
        applied = await apply_item(rt, item) or applied
    if applied:
        await rt.store.platform_said(look.queue_id, look.dispatch_seq, "applied_from_activation")
    return applied


def _verified(rt: Runtime[RecoveryStore], raw: object, look: Lookup) -> ResultItem | None:
    """An item whose token is valid for this row and this dispatch, else None."""
    try:
        item = parse_item(raw, rt.tokens)
    except Invalid:
        return None
    if item is None or item.claim.queue_id != look.queue_id \
            or item.claim.dispatch_seq != look.dispatch_seq:
        return None
    return item


async def _end(rt: Runtime[RecoveryStore], look: Lookup, code: str, said: str, *, outcome: str,
               retry_now: bool) -> bool:
    """Fail the dispatch (retry by the normal rules, or at once after a long wait)."""
    status: str | None
    if retry_now:
        status = await rt.store.attempt_failed(
            look.queue_id, look.dispatch_seq, delay=0, retryable=True,
            max_attempts=rt.settings.max_attempts, error=code, outcome=outcome,
            attempts=rt.settings.queue.attempts)
    else:
        status = await fail_attempt(rt, look.queue_id, look.dispatch_seq, look.attempt,
                                    code=code, retryable=True, outcome=outcome)
    if status is not None:
        await rt.store.platform_said(look.queue_id, look.dispatch_seq, said)
    return status is not None
