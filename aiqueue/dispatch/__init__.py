"""Sending a job to its marking function: the target's request, the answer's outcome, the chain.

The queue's rules send through it (queue/: the loop's handout, the doctor's probe,
recovery's platform looks, the overnight lane's request bodies); the batch lane
calls the function with its HTTP requests, the doctor words its outcomes, and the
runtime holds its AWS credentials. Each send takes the kind's `KindTarget`
(`Settings.target(kind)`, aiqueue/settings/targets.py), not the whole settings.
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
