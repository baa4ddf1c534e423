"""The app's probe (`"probe": true`): answered by calling back, without calling a model.

`aiqueue doctor` sends one to prove that the function is reachable with its
credentials and that it can reach the app's webhook.  A probe carries no
submission; the answer is a `probe` item with the probe's own token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .prompt import PROMPT_VERSION

if TYPE_CHECKING:
    from .items import Item

NAME, VERSION = "ai_mark", "2026.11"
# What a result's usage reports as `function_version`: the release and its prompt's text,
# so a changed prompt under the same model starts a drift canary (docs/canaries.md).
FUNCTION_VERSION = f"{VERSION}+{PROMPT_VERSION}"


def is_probe(dispatch: Mapping[str, Any]) -> bool:
    """A probe says so with `"probe": true` (nothing else makes one)."""
    return isinstance(dispatch, Mapping) and dispatch.get("probe") is True


def probe_item(dispatch: Mapping[str, Any]) -> Item:
    """The webhook item that answers a probe: ids and this function's name, nothing else."""
    return {
        "queue_id": dispatch.get("queue_id"),
        "token": dispatch.get("callback_token"),
        "status": "probe",
        "probe": {"function": NAME, "version": VERSION},
    }
