"""Latency and throughput of one Runner: percentiles over repeats after warm-up, per batch size and
duration bucket, with the peak resident memory sampled while it runs.

Inputs are real clips of the set's bucket, cropped or tiled to the bucket's median duration so that a
batch is one rectangular [batch, samples] array, each row normalised like in transcription.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from workbench.backends.base import Runner
from workbench.config import SAMPLE_RATE
from workbench.evaluate.transcribe import logits_of
from workbench.model.features import normalise_audio


@dataclass(frozen=True)
class LatencyConfig:
    """``point_budget_s``: when set, a (batch, bucket) point whose warm-up shows that ``repeats`` runs would
    take longer than this many seconds gets fewer repeats, never fewer than ``min_repeats``."""

    batch_sizes: tuple[int, ...] = (1, 8, 32)
    warmup: int = 2
    repeats: int = 10
    point_budget_s: float | None = None
    min_repeats: int = 3

    def __post_init__(self) -> None:
        if not self.batch_sizes or any(b < 1 for b in self.batch_sizes):
            raise ValueError(f"batch sizes must be positive integers, got {self.batch_sizes}")
        if self.warmup < 0 or self.repeats < 1:
            raise ValueError("warmup must be >= 0 and repeats >= 1")
        if self.point_budget_s is not None and (self.point_budget_s <= 0 or self.min_repeats < 1):
            raise ValueError("point_budget_s must be > 0 and min_repeats >= 1")

    def repeats_for(self, seconds_per_run: float | None) -> int:
        """Repeats for a point whose runs take ``seconds_per_run`` (unknown: the full ``repeats``)."""
        if self.point_budget_s is None or not seconds_per_run:
            return self.repeats
        fit = int(self.point_budget_s // seconds_per_run)
        return max(min(self.repeats, self.min_repeats), min(self.repeats, fit))


@dataclass(frozen=True)
class LatencyPoint:
    batch: int
    bucket: str
    clip_seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    repeats: int
    audio_seconds_per_second: float  # throughput: seconds of audio processed per wall second at p50
    clips_per_second: float | None = None  # throughput: batch / p50
    peak_rss_mb: float | None = None  # this process's peak resident memory while the point ran
    samples_ms: list[float] | None = (
        None  # every timed run, in round order (paired across interleaved runners)
    )


@dataclass
class LatencyResult:
    candidate: str
    backend: dict[str, str]
    machine: dict
    points: list[LatencyPoint]
    peak_rss_mb: float
    rss_before_mb: float
    config: dict = field(default_factory=dict)
    activation_mb: float | None = None  # resident memory the runner's activation (session, engine) added

    def point(self, batch: int, bucket: str) -> LatencyPoint | None:
        return next((p for p in self.points if p.batch == batch and p.bucket == bucket), None)

    def to_json(self) -> dict:
        return {
            "candidate": self.candidate,
            "backend": self.backend,
            "machine": self.machine,
            "points": [asdict(p) for p in self.points],
            "peak_rss_mb": self.peak_rss_mb,
            "rss_before_mb": self.rss_before_mb,
            "config": self.config,
            "activation_mb": self.activation_mb,
        }


class PeakRss:
    """Samples this process's resident set size in a thread; ``peak_mb`` is the largest seen."""

    def __init__(self, interval_s: float = 0.005) -> None:
        import psutil

        self._proc = psutil.Process()
        self.interval_s = interval_s
        self.before_mb = self._proc.memory_info().rss / 2**20
        self.peak_mb = self.before_mb
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self._proc.memory_info().rss / 2**20)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self._proc.memory_info().rss / 2**20)


def _fit(audio: np.ndarray, samples: int) -> np.ndarray:
    if audio.size >= samples:
        return audio[:samples]
    return np.tile(audio, int(np.ceil(samples / max(audio.size, 1))))[:samples]


def bucket_clips(speech_set, max_clips: int = 32) -> dict[str, tuple[float, list[np.ndarray]]]:
    """Bucket -> (median duration, up to ``max_clips`` clips). Utterances without a bucket go to 'all'."""
    groups: dict[str, list] = {}
    for utt in speech_set.utterances:
        groups.setdefault(utt.bucket or "all", []).append(utt)
    out = {}
    for name, utts in sorted(groups.items()):
        median = float(statistics.median(u.duration_s for u in utts))
        out[name] = (median, [speech_set.audio(u) for u in utts[:max_clips]])
    return out


def make_batch(
    clips: list[np.ndarray],
    batch: int,
    seconds: float,
    prepare: Callable[[np.ndarray], np.ndarray] = normalise_audio,
) -> np.ndarray:
    """[batch, samples] float32: clips cropped or tiled to ``seconds``, each row made ``input_values`` by
    ``prepare`` (the model's feature settings; every row is all signal, so no attention mask is needed)."""
    samples = max(int(round(seconds * SAMPLE_RATE)), 400)
    rows = [prepare(_fit(clips[i % len(clips)], samples)) for i in range(batch)]
    return np.stack(rows).astype(np.float32)


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def current_rss_mb() -> float:
    """This process's resident set size now (MB)."""
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _timed_ms(runner: Runner, feed: np.ndarray) -> float:
    """One inference; the runner's own time (CUDA events on TensorRT) or else the wall time, in ms."""
    start = time.perf_counter()
    logits_of(runner, feed)
    return 1000.0 * (runner.last_inference_time() or (time.perf_counter() - start))


def _point(batch: int, bucket: str, seconds: float, ms: list[float], peak_mb: float) -> LatencyPoint:
    p50 = _percentile(ms, 50)
    return LatencyPoint(
        batch,
        bucket,
        round(seconds, 3),
        p50,
        _percentile(ms, 90),
        _percentile(ms, 99),
        float(statistics.fmean(ms)),
        len(ms),
        batch * seconds / (p50 / 1000.0) if p50 > 0 else float("inf"),
        batch / (p50 / 1000.0) if p50 > 0 else float("inf"),
        round(peak_mb, 1),
        [round(t, 4) for t in ms],
    )


def measure_interleaved(
    runners: Mapping[str, Runner],
    buckets: dict[str, tuple[float, list[np.ndarray]]],
    config: LatencyConfig = LatencyConfig(),
    machine: dict | None = None,
    prepare: Callable[[np.ndarray], np.ndarray] = normalise_audio,
) -> dict[str, LatencyResult]:
    """Time every runner at every (batch size, bucket) point with the repeats interleaved.

    All runners are activated first (``activation_mb``: what each one's activation added to this process's
    resident memory). At each point every runner gets ``warmup`` untimed runs, then round ``r`` runs each
    runner once in an order rotated by ``r`` (A B C, B C A, C A B, ...): a load drift on the machine hits
    every candidate alike, and round ``r`` of one candidate is paired with round ``r`` of the others
    (``LatencyPoint.samples_ms``, read by ``workbench.evaluate.verdict``). Peak memory per point and overall
    is the process's, all sessions together."""
    from workbench.evaluate.machine import machine_info

    names = list(runners)
    points: dict[str, list[LatencyPoint]] = {n: [] for n in names}
    activation: dict[str, float] = {}
    with PeakRss() as rss, contextlib.ExitStack() as stack:
        for name in names:
            before = current_rss_mb()
            stack.enter_context(runners[name])
            activation[name] = round(current_rss_mb() - before, 1)
        for batch in config.batch_sizes:
            for bucket, (seconds, clips) in buckets.items():
                feed = make_batch(clips, batch, seconds, prepare)
                with PeakRss() as point_rss:
                    warm = {n: [_timed_ms(runners[n], feed) for _ in range(config.warmup)] for n in names}
                    per_round = sum(min(w) for w in warm.values()) / 1000.0 if config.warmup else None
                    times: dict[str, list[float]] = {n: [] for n in names}
                    for r in range(config.repeats_for(per_round)):
                        for name in names[r % len(names) :] + names[: r % len(names)]:
                            times[name].append(_timed_ms(runners[name], feed))
                for name in names:
                    points[name].append(_point(batch, bucket, seconds, times[name], point_rss.peak_mb))
        described = {n: runners[n].describe() for n in names}
    machine = machine or machine_info()
    settings = {
        "batch_sizes": list(config.batch_sizes),
        "warmup": config.warmup,
        "repeats": config.repeats,
        "point_budget_s": config.point_budget_s,
        "min_repeats": config.min_repeats,
        "interleaved_with": names,
        "timer": "runner.last_inference_time (CUDA events on TensorRT, else wall perf_counter)",
    }
    return {
        n: LatencyResult(
            n,
            described[n],
            machine,
            points[n],
            round(rss.peak_mb, 1),
            round(rss.before_mb, 1),
            dict(settings),
            activation[n],
        )
        for n in names
    }


def measure_latency(
    runner: Runner,
    buckets: dict[str, tuple[float, list[np.ndarray]]],
    config: LatencyConfig = LatencyConfig(),
    name: str | None = None,
    machine: dict | None = None,
    prepare: Callable[[np.ndarray], np.ndarray] = normalise_audio,
) -> LatencyResult:
    """Time one ``runner`` for every (batch size, bucket): ``warmup`` untimed runs then ``repeats`` timed
    (``measure_interleaved`` with one runner, so its memory figures are its own)."""
    name = name or runner.name
    return measure_interleaved({name: runner}, buckets, config, machine, prepare)[name]
