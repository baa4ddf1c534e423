"""Sending a job to its marking function: the target's request, the answer's outcome, the chain.

Only `aiqueue.queue.loop` uses this package. The targets' *settings* stay a leaf
(`aiqueue/target_settings.py`) because `aiqueue.settings` reads them.
"""

from aiqueue.dispatch.invoke import (
    Accepted,
    Busy,
    Failed,
    Outcome,
    chain,
    classify,
    dispatch_body,
    post,
    probe_body,
    send,
    too_large,
)

__all__ = [
    "Accepted", "Busy", "Failed", "Outcome", "chain", "classify", "dispatch_body", "post",
    "probe_body", "send", "too_large",
]
