"""Shards balanced by audio duration: items (clips, or whole batches of clips) dealt longest first to the
lightest shard, so every shard carries about the same seconds of audio. Deterministic for given weights.

Whole batches are coarse: a sign-off set of 84 utterances makes 16 batches of up to 8, so 16 shards for 8 workers
are about one batch each and cannot weigh the same. The pool therefore hands shards out heaviest first
(``heaviest_first``) to whichever worker is free, so the light ones fill in at the end (``dispatch_bound`` gives
the efficiency a plan of shards allows)."""

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


def heaviest_first(weights: Sequence[float]) -> list[int]:
    """The order to hand tasks out in: heaviest first (ties in index order), so the last to start are the
    lightest and the workers finish together (longest processing time first)."""
    return sorted(range(len(weights)), key=lambda i: (-float(weights[i]), i))


def shard_weights(shards: Sequence[Sequence[int]], weights: Sequence[float]) -> list[float]:
    """Each shard's summed item ``weights``."""
    return [sum(float(weights[i]) for i in shard) for shard in shards]


def dispatch_bound(weights: Sequence[float], workers: int, order: Sequence[int] | None = None) -> float:
    """The parallel efficiency tasks of ``weights`` allow on ``workers`` when each goes, in ``order`` (default:
    heaviest first), to the first free worker: total weight / (workers x the busiest worker's weight)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    busy = [0.0] * workers
    for i in heaviest_first(weights) if order is None else order:
        k = min(range(workers), key=lambda j: (busy[j], j))
        busy[k] += float(weights[i])
    return sum(busy) / (workers * max(busy)) if max(busy) > 0 else 1.0
