"""A pool's batch provider, built from its settings (the SDKs are imported only when used)."""

from __future__ import annotations

from aiqueue.batch.provider import Provider, ProviderName


def connect(provider: ProviderName, base_url: str, api_key: str, timeout: float = 60.0
            ) -> Provider:
    """The provider client for one pool; close it with `aclose()`."""
    # Imported here: the SDKs take a while to import, and most invocations never batch.
    if provider == "openai":
        from aiqueue.batch.openai import OpenAIBatches
        return OpenAIBatches(base_url, api_key, timeout)
    from aiqueue.batch.anthropic import AnthropicBatches
    return AnthropicBatches(base_url, api_key, timeout)
