"""Read a /metrics body back with prometheus_client's own parser (label order is not meaning)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """{(sample name, its labels): value} of every sample in the exposition."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(text: str, name: str, **labels: str) -> float | None:
    """The sample's value, or None when the exposition has no such sample."""
    return samples(text).get((name, frozenset(labels.items())))
