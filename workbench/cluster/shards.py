"""Shards balanced by audio duration: items (clips, or whole batches of clips) dealt longest first to the
lightest shard, so every shard carries about the same seconds of audio. Deterministic for given weights."""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def balanced(weights: Sequence[float], count: int) -> list[list[int]]:
    """Indices of ``weights`` in at most ``count`` non-empty shards of about equal total weight; each shard's
    indices ascending, shards in order of their first index."""
    if count < 1:
        raise ValueError(f"shard count must be at least 1, got {count}")
    heap = [(0.0, k) for k in range(min(count, len(weights)))]
    shards: list[list[int]] = [[] for _ in heap]
    for i in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        load, k = heapq.heappop(heap)
        shards[k].append(i)
        heapq.heappush(heap, (load + float(weights[i]), k))
    return sorted((sorted(s) for s in shards if s), key=lambda s: s[0])


def balanced_groups(groups: Sequence[Sequence[int]], weights: Sequence[float], count: int) -> list[list[int]]:
    """Whole ``groups`` of item indices (e.g. evaluation batches) dealt into shards balanced by the groups'
    summed ``weights``; each shard the ascending indices of its groups."""
    totals = [sum(float(weights[i]) for i in g) for g in groups]
    return [sorted(i for k in shard for i in groups[k]) for shard in balanced(totals, count)]
