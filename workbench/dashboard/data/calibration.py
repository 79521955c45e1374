"""Calibration runs under ``engines/<model hash 12>/``: caches, their provenance and reuse state, the
per-tensor ranges and the histogram sidecar with every method's threshold recomputed from it."""

from __future__ import annotations

import datetime as _dt
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.artifacts import sha256_file
from workbench.calibration import cache as cache_mod
from workbench.calibration import histograms as hist_mod
from workbench.calibration.convergence import Convergence
from workbench.calibration.methods import METHODS, MethodSpec, compute_amax
from workbench.dashboard.data.sets import set_names
from workbench.dashboard.paths import ArtifactRoots, display, resolve
from workbench.errors import WorkbenchError
from workbench.speech.store import CARD, load_set


@functools.lru_cache(maxsize=256)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    return sha256_file(Path(path))


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, remembered while its size and modification time stay the same."""
    stat = path.stat()
    return _sha256(str(path), stat.st_mtime_ns, stat.st_size)


def set_hashes(roots: ArtifactRoots) -> dict[str, str]:
    """content hash -> set name for every set under calib_sets/ whose files still match its card (to name a
    cache's calibration set: a changed set's card hash names no cache, since calibrate would refuse the set)."""
    out = {}
    for name in set_names(roots):
        try:
            resolve(roots.calib_sets / name / CARD, "calib_sets", roots)
            out[load_set(roots.calib_sets / name).content_hash] = name  # verified (links refused)
        except (WorkbenchError, OSError):
            continue
    return out


@dataclass
class CacheInfo:
    """One cache file with what the dashboard says about it."""

    path: Path
    model_dir: str
    method: str
    tensors: int
    set_name: str | None
    keys: dict[str, Any]
    state: str  # "reusable" | "stale" | "unusable"
    reason: str
    modified: str
    has_histograms: bool
    cache: cache_mod.CalibrationCache | None = field(default=None, repr=False)


def _state(path: Path, cache: cache_mod.CalibrationCache, set_name: str | None) -> tuple[str, str]:
    onnx_path = path.parent / "model.fp32.onnx"
    if not onnx_path.exists():
        return "stale", "its model.fp32.onnx is gone; calibrate again"
    if cache.keys.get("onnx") != file_sha256(onnx_path):
        return "stale", "model.fp32.onnx beside it changed since calibration; calibrate again"
    if set_name is None:
        return "reusable", "matches its ONNX model; its calibration set is not under calib_sets/ now"
    return "reusable", (
        f"calibrate --calib-set {set_name} --method {cache.keys.get('method')} on this model "
        "reuses it (every provenance key matches)"
    )


def list_caches(roots: ArtifactRoots) -> list[CacheInfo]:
    """Every ``engines/*/*.cache`` with provenance and reuse state; damaged caches are listed as unusable."""
    if not roots.engines.is_dir():
        return []
    by_hash = set_hashes(roots)
    out = []
    for listed in sorted(roots.engines.glob("*/*.cache")):
        try:
            path = resolve(listed, "engines", roots)
            resolve(cache_mod.sidecar(listed), "engines", roots)  # load() reads the sidecar too
        except WorkbenchError as exc:
            out.append(
                CacheInfo(listed, listed.parent.name, "?", 0, None, {}, "unusable", str(exc), "?", False)
            )
            continue
        modified = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"
        )
        has_hist = hist_mod.histogram_path(path).is_file()
        try:
            cache = cache_mod.load(path)
        except (WorkbenchError, OSError, ValueError) as exc:
            out.append(
                CacheInfo(path, path.parent.name, "?", 0, None, {}, "unusable", str(exc), modified, has_hist)
            )
            continue
        set_name = by_hash.get(str(cache.keys.get("calibration_set")))
        state, reason = _state(path, cache, set_name)
        out.append(
            CacheInfo(
                path,
                path.parent.name,
                str(cache.keys.get("method")),
                len(cache.scales),
                set_name,
                cache.keys,
                state,
                reason,
                modified,
                has_hist,
                cache,
            )
        )
    return out


def caches_frame(caches: list[CacheInfo], roots: ArtifactRoots) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "cache": display(c.path, roots),
                "model": c.model_dir,
                "method": c.method,
                "tensors": c.tensors,
                "calibration set": c.set_name or "(not present)",
                "state": c.state,
                "histograms": "yes" if c.has_histograms else "no",
                "written": c.modified,
            }
            for c in caches
        ]
    )


def run_files(model_dir: Path, roots: ArtifactRoots) -> pd.DataFrame:
    """The files of one calibration run folder (ONNX variants, caches, engines) with sizes."""
    model_dir = resolve(model_dir, "engines", roots)
    rows = [
        {"file": p.name, "kind": _kind(p), "MB": round(p.stat().st_size / 1e6, 2)}
        for p in sorted(model_dir.iterdir())
        if p.is_file() and not p.name.startswith(".")
    ]
    return pd.DataFrame(rows, columns=["file", "kind", "MB"])


def _kind(path: Path) -> str:
    name = path.name
    if name.endswith(hist_mod.SUFFIX):
        return "histograms"
    for suffix, kind in (
        (".cache.json", "cache provenance"),
        (".cache", "calibration cache"),
        (".onnx", "ONNX model"),
        (".engine", "TensorRT engine"),
        (".json", "JSON"),
    ):
        if name.endswith(suffix):
            return kind
    return "other"


def ranges_frame(info: CacheInfo, hists: hist_mod.TensorHistograms | None) -> pd.DataFrame:
    """Per tensor: the cache's amax and, with histograms, the observed max; graph order when known."""
    if info.cache is None:
        return pd.DataFrame(columns=["position", "tensor", "amax", "observed max", "clipped share"])
    amax = info.cache.amax()
    names = hists.names if hists is not None else list(amax)
    rows = []
    for i, name in enumerate(names):
        chosen = float(np.float32(amax.get(name, np.nan)))
        row: dict[str, object] = {"position": i, "tensor": name, "amax": chosen}
        if hists is not None:
            k = hists.index(name)
            row["observed max"] = float(hists.amax[k])
            row["clipped share"] = clipped_share(hists, name, chosen)
        rows.append(row)
    return pd.DataFrame(rows)


def load_histograms(info: CacheInfo, roots: ArtifactRoots) -> tuple[hist_mod.TensorHistograms | None, str]:
    """(histograms, "") when the sidecar exists and belongs to this cache; (None, why not) otherwise."""
    try:
        data = hist_mod.load(resolve(hist_mod.histogram_path(info.path), "engines", roots, must_exist=False))
    except WorkbenchError as exc:
        return None, str(exc)
    if info.cache is None or data.meta.get("cache_sha256") != info.cache.content_hash:
        return None, (
            "the histogram file beside this cache comes from another calibration run (its cache hash "
            "differs); calibrate again to rewrite both"
        )
    return data, ""


def clipped_share(hists: hist_mod.TensorHistograms, name: str, amax: float) -> float:
    """Share of |x| samples above ``amax`` (saturated by INT8), from the histogram."""
    hist = hists.histogram(name)
    if hist is None or hist.counts.sum() == 0:
        return 0.0
    above = hist.counts[int(np.floor(amax / hist.bin_width)) :].sum() if amax < hist.range_max else 0
    return float(above / hist.counts.sum())


def method_thresholds(
    hists: hist_mod.TensorHistograms, name: str, percentile: float = 99.99
) -> dict[str, float]:
    """amax of every method for one tensor, recomputed from its stored histogram."""
    hist = hists.histogram(name)
    observed = float(hists.amax[hists.index(name)])
    bins = int(hists.counts.shape[1])
    return {
        m: float(compute_amax(MethodSpec(m, percentile=percentile, bins=bins), observed, hist))
        for m in METHODS
    }


def histogram_frame(hists: hist_mod.TensorHistograms, name: str, max_bars: int = 512) -> pd.DataFrame:
    """A tensor's histogram as bars (merged down to ``max_bars`` so the browser draws it quickly)."""
    hist = hists.histogram(name)
    if hist is None:
        return pd.DataFrame(columns=["lo", "hi", "count"])
    group = max(1, hist.bins // max_bars)
    counts = hist.counts.reshape(-1, group).sum(axis=1)
    width = hist.bin_width * group
    lo = np.arange(len(counts)) * width
    last = int(np.flatnonzero(counts)[-1]) + 2 if counts.any() else len(counts)
    frame = pd.DataFrame({"lo": lo, "hi": lo + width, "count": counts})
    return frame.iloc[: min(last, len(frame))]


def convergence_frame(found: Convergence) -> pd.DataFrame:
    """One row per tensor, largest amax change first: amax at the checkpoint and at the end, the change (in %
    and in INT8 steps), whether it still moves and the condition that drives it."""
    return pd.DataFrame(
        [
            {
                "tensor": c.tensor,
                "amax at checkpoint": c.before,
                "amax": c.after,
                "change %": round(c.change * 100, 3),
                "INT8 steps": round(c.steps, 2),
                "moving": found.rule.moving(c),
                "driven by": c.driver or "",
            }
            for c in found.changes
        ],
        columns=["tensor", "amax at checkpoint", "amax", "change %", "INT8 steps", "moving", "driven by"],
    )
