"""The overnight lane: pack rows into a provider's batch, poll it, apply, fall back.

`openai.py` and `anthropic.py` speak the providers' batch APIs through their
official SDKs, behind the one `Provider` interface of `provider.py`.
"""
