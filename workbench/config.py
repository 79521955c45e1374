"""Typed defaults: the one place where the workbench's default values live."""

from __future__ import annotations

from dataclasses import dataclass, field

SAMPLE_RATE = 16_000

# Where artifacts go is the workspace (workbench/workspace.py: --workspace, $WORKBENCH_WORKSPACE, else the
# current directory), never the package's own folder. The demo model is package data under this name
# (workbench/resources.py reads it through importlib.resources).
DEMO_MODEL_RESOURCE = "demo_model"

CONDITIONS: tuple[str, ...] = ("quiet", "noisy", "accented")
NOISE_KINDS: tuple[str, ...] = ("white", "pink", "brown", "babble", "hum")
MAJORITY_ACCENT = "us"
# Weights of the ONNX Runtime CPU flavour (calibrate --ort-cpu): "auto" = int8 where ORT's U8S8 GEMMs are exact on
# this CPU (VNNI, or not x86), else uint8 (U8U8, exact everywhere); "u8" / "s8" for a file bound elsewhere.
ORT_CPU_WEIGHTS = "auto"
ORT_CPU_WEIGHT_TYPES: tuple[str, ...] = ("auto", "u8", "s8")


@dataclass(frozen=True)
class EngineProfile:
    """Audio durations (seconds) an engine profile accepts; set buckets follow it."""

    min_s: float = 1.0
    opt_s: float = 4.0
    max_s: float = 8.0

    def __post_init__(self) -> None:
        if not (0 < self.min_s <= self.opt_s <= self.max_s):
            raise ValueError(
                f"engine profile needs 0 < min <= opt <= max seconds, got "
                f"{self.min_s}/{self.opt_s}/{self.max_s}"
            )

    def buckets(self) -> tuple[tuple[str, float, float], ...]:
        """Duration buckets ``(name, lo, hi)``: [min, opt) is short, [opt, max] is long."""
        return (
            ("short", self.min_s, self.opt_s),
            ("long", self.opt_s, self.max_s),
        )

    def bucket_of(self, duration_s: float) -> str | None:
        """The bucket a clip of this duration falls in, or None when outside the profile."""
        for name, lo, hi in self.buckets():
            if lo <= duration_s < hi or (name == "long" and duration_s == hi):
                return name
        return None


@dataclass(frozen=True)
class ConditionRanges:
    """Ranges the speech conditions draw from."""

    quiet_snr_db: tuple[float, float] = (30.0, 45.0)
    noisy_snr_db: tuple[float, float] = (0.0, 20.0)
    level_dbfs: tuple[float, float] = (-35.0, -15.0)
    noise_kinds: tuple[str, ...] = NOISE_KINDS


@dataclass(frozen=True)
class SetBuildConfig:
    """How ``data build`` makes a calibration set and an evaluation set."""

    name: str = "demo"
    calib_per_condition: int = 100
    # 100 per condition (~3,000 words): with fewer, one changed word can move the upper end of a
    # speaker-block WER-delta interval past the default 0.3-point gate (seen with 40 per condition)
    eval_per_condition: int = 100
    seed: int = 0
    profile: EngineProfile = field(default_factory=EngineProfile)
    conditions: ConditionRanges = field(default_factory=ConditionRanges)
    workers: int = 2
