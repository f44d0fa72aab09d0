from __future__ import annotations

from elasticityops.api.entropy import BufferedEntropy
from elasticityops.domain.invocations import new_invocation_id


def test_buffered_entropy_never_repeats_a_slice() -> None:
    entropy = BufferedEntropy(block=64)
    chunks = [entropy(10) for _ in range(100)]
    assert all(len(c) == 10 for c in chunks)
    assert len(set(chunks)) == 100
    assert len(entropy(100)) == 100, "a request larger than the block is served too"


def test_ids_from_buffered_entropy_are_unique_and_time_ordered() -> None:
    entropy = BufferedEntropy()
    ids = [new_invocation_id(now_ns=i * 1_000_000, random_bytes=entropy) for i in range(1000)]
    assert len(set(ids)) == 1000
    assert ids == sorted(ids)
