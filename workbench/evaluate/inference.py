"""How audio is turned into text when WER is measured: chunking and the decoder, stated in every record.

``InferenceConfig`` is the one description of inference as deployed. ``ChunkSettings``: long audio is cut
into overlapping chunks of ``length_s`` seconds with ``left_s``/``right_s`` strides whose logits are dropped
when the chunks are merged (the arithmetic of transformers' ASR pipeline, ``chunk_length_s`` and
``stride_length_s``; see ``workbench.evaluate.chunking``); ``None`` feeds every clip whole.
``DecoderSettings``: greedy CTC, or a beam search (width, optional KenLM / ARPA language model with its
``alpha``/``beta`` weights, hotwords) through flashlight-text (``workbench.evaluate.decoders``); either takes a
``blank_penalty`` subtracted from the blank's logit before decoding (0 leaves the logits as they are).

A chunked configuration also fixes what the engine profile must hold: the chunk length, not the longest
file (``check_profile_holds``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.config import INFERENCE, OPTION_LIMITS, EngineProfile
from workbench.errors import WorkbenchError
from workbench.inputs.lm import check_lm_file

DECODERS = ("greedy", "beam")
#: what ``--decoder`` takes, comma separated: the first judges the verdict, the others are scored beside it
DECODER_NAMES = ("greedy", "beam", "beam+lm")


@dataclass(frozen=True)
class ChunkSettings:
    """Chunk length and the left/right strides (seconds) whose logits are dropped at the seams."""

    length_s: float
    left_s: float
    right_s: float

    @classmethod
    def of(cls, length_s: float, stride_s: float | tuple[float, float] | None = None) -> ChunkSettings:
        """As the pipeline takes them: ``stride_s`` one value for both sides, a pair, or None (length / 6)."""
        if stride_s is None:
            stride_s = length_s / 6
        left, right = (stride_s, stride_s) if isinstance(stride_s, (int, float)) else stride_s
        settings = cls(float(length_s), float(left), float(right))
        settings.check()
        return settings

    def check(self) -> None:
        if not all(math.isfinite(v) for v in (self.length_s, self.left_s, self.right_s)):
            raise WorkbenchError(
                f"chunk length and strides must be finite seconds, not {self.length_s:g}/{self.left_s:g}/"
                f"{self.right_s:g}"
            )
        if self.length_s < OPTION_LIMITS.min_chunk_seconds:
            raise WorkbenchError(
                f"the chunk length must be at least {OPTION_LIMITS.min_chunk_seconds:g} seconds (a shorter chunk "
                f"holds no word), not {self.length_s:g}; leave --chunk-seconds out to feed whole clips"
            )
        if self.left_s < 0 or self.right_s < 0:
            raise WorkbenchError(f"chunk strides must be >= 0 seconds, not {self.left_s:g}/{self.right_s:g}")
        if self.left_s + self.right_s >= self.length_s:
            raise WorkbenchError(
                f"chunk strides {self.left_s:g} + {self.right_s:g} s leave nothing of a {self.length_s:g} s "
                "chunk; pass strides that add up to less than the chunk length"
            )

    def summary(self) -> str:
        return f"{self.length_s:g} s chunks, strides {self.left_s:g}/{self.right_s:g} s"


@dataclass(frozen=True)
class DecoderSettings:
    """Greedy, or beam search with an optional language model; the blank penalty applies to both."""

    kind: str = "greedy"
    beam_width: int = INFERENCE.beam_width
    lm: Path | None = None  # an ARPA file or a KenLM binary; None: beam search without a language model
    alpha: float = INFERENCE.alpha  # language model weight
    beta: float = INFERENCE.beta  # word insertion bonus
    hotwords: tuple[str, ...] = ()
    hotword_weight: float = INFERENCE.hotword_weight
    blank_penalty: float = 0.0

    def check(self) -> None:
        if self.kind not in DECODERS:
            raise WorkbenchError(f"--decoder takes {' or '.join(DECODERS)}, not {self.kind!r}")
        if self.kind == "greedy" and (self.lm is not None or self.hotwords):
            raise WorkbenchError(
                "a language model or hotwords need the beam decoder; pass --decoder beam with --lm/--hotword"
            )
        if self.beam_width < 1:
            raise WorkbenchError(f"the beam width must be at least 1, not {self.beam_width}")
        weights = {
            "--lm-alpha": self.alpha,
            "--lm-beta": self.beta,
            "the hotword weight": self.hotword_weight,
            "--blank-penalty": self.blank_penalty,
        }
        for flag, value in weights.items():
            if not math.isfinite(value):
                raise WorkbenchError(f"{flag} must be a finite number, not {value:g}")
        if any(not word.strip() for word in self.hotwords):
            raise WorkbenchError("--hotword takes a word, not an empty text")
        if self.lm is not None:
            check_lm_file(Path(self.lm))

    @property
    def name(self) -> str:
        """``greedy``, ``beam`` or ``beam+lm``: the label reports use for this decoder."""
        if self.kind == "greedy":
            return "greedy"
        return "beam+lm" if self.lm is not None else "beam"

    def summary(self) -> str:
        penalty = f", blank penalty {self.blank_penalty:g}" if self.blank_penalty else ""
        if self.kind == "greedy":
            return f"greedy CTC{penalty}"
        lm = f", LM {Path(self.lm).name} (alpha {self.alpha:g}, beta {self.beta:g})" if self.lm else ", no LM"
        hot = (
            f", hotwords {', '.join(self.hotwords)} (weight {self.hotword_weight:g})" if self.hotwords else ""
        )
        return f"beam search width {self.beam_width}{lm}{hot}{penalty} (flashlight-text)"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "blank_penalty": self.blank_penalty}
        if self.kind == "beam":
            out.update(
                beam_width=self.beam_width,
                lm=str(self.lm) if self.lm is not None else None,
                alpha=self.alpha if self.lm is not None else None,
                beta=self.beta if self.lm is not None else None,
                hotwords=list(self.hotwords),
                hotword_weight=self.hotword_weight if self.hotwords else None,
            )
        return out


@dataclass(frozen=True)
class InferenceConfig:
    """Chunking (None: whole clips) and the decoder every WER step uses."""

    chunks: ChunkSettings | None = None
    decoder: DecoderSettings = field(default_factory=DecoderSettings)

    def check(self) -> InferenceConfig:
        if self.chunks is not None:
            self.chunks.check()
        self.decoder.check()
        return self

    def summary(self) -> str:
        chunks = self.chunks.summary() if self.chunks else "whole clips"
        return f"{chunks}; {self.decoder.summary()}"

    def to_json(self) -> dict[str, Any]:
        """What every record states about inference."""
        return {
            "chunks": asdict(self.chunks) if self.chunks else None,
            "decoder": self.decoder.to_json(),
            "summary": self.summary(),
        }

    def with_decoder(self, decoder: DecoderSettings) -> InferenceConfig:
        return InferenceConfig(self.chunks, decoder)


GREEDY = InferenceConfig()


def inference_config(
    chunk_length_s: float | None = None,
    stride_s: float | tuple[float, float] | None = None,
    decoder: str = "greedy",
    beam_width: int | None = None,
    lm: str | Path | None = None,
    alpha: float | None = None,
    beta: float | None = None,
    hotwords: tuple[str, ...] | list[str] = (),
    blank_penalty: float = 0.0,
) -> InferenceConfig:
    """The configuration from what a person types (CLI options, the dashboard, a job file); checked."""
    if chunk_length_s is None and stride_s is not None:
        raise WorkbenchError("a chunk stride needs a chunk length; pass --chunk-seconds too")
    chunks = ChunkSettings.of(chunk_length_s, stride_s) if chunk_length_s is not None else None
    settings = DecoderSettings(
        decoder,
        beam_width if beam_width is not None else INFERENCE.beam_width,
        Path(lm) if lm is not None else None,
        alpha if alpha is not None else INFERENCE.alpha,
        beta if beta is not None else INFERENCE.beta,
        tuple(w.strip() for w in hotwords if w.strip()),
        INFERENCE.hotword_weight,
        float(blank_penalty),
    )
    return InferenceConfig(chunks, settings).check()


def _number(value: Any, default: float) -> float:
    return default if value is None else float(value)


def decoders_from_names(
    names: str,
    beam_width: int | None = None,
    lm: str | Path | None = None,
    alpha: float | None = None,
    beta: float | None = None,
    hotwords: tuple[str, ...] | list[str] = (),
    blank_penalty: float = 0.0,
) -> list[DecoderSettings]:
    """``greedy,beam+lm`` -> one checked ``DecoderSettings`` each (beam+lm needs ``lm``; the LM, weights,
    hotwords and blank penalty are shared; hotwords go to the beam decoders)."""
    wanted = [n.strip() for n in str(names).split(",") if n.strip()]
    unknown = [n for n in wanted if n not in DECODER_NAMES]
    if not wanted or unknown:
        raise WorkbenchError(
            f"--decoder takes {', '.join(DECODER_NAMES)} (comma separated, the first judges), not {names!r}"
        )
    if len(set(wanted)) != len(wanted):
        raise WorkbenchError(f"--decoder names a decoder twice: {names!r}")
    if "beam+lm" in wanted and lm is None:
        raise WorkbenchError("the beam+lm decoder needs a language model: pass --lm model.arpa")
    if lm is not None and "beam+lm" not in wanted:
        raise WorkbenchError("--lm is used by the beam+lm decoder; pass --decoder beam+lm (or drop --lm)")
    if any(not w.strip() for w in hotwords):
        raise WorkbenchError("--hotword takes a word, not an empty text")
    if lm is None and (alpha is not None or beta is not None):
        raise WorkbenchError(
            "--lm-alpha and --lm-beta weigh a language model's scores: pass --lm model.arpa with --decoder beam+lm, "
            "or drop them"
        )
    if beam_width is not None and not any(n.startswith("beam") for n in wanted):
        raise WorkbenchError(
            "--beam-width sets the beam decoder's width: pass --decoder beam (or drop --beam-width)"
        )
    words = tuple(w.strip() for w in hotwords if w.strip())
    if words and not any(n.startswith("beam") for n in wanted):
        raise WorkbenchError("hotwords need a beam decoder; pass --decoder beam or beam+lm with --hotword")
    out = []
    for name in wanted:
        settings = DecoderSettings(
            "greedy" if name == "greedy" else "beam",
            beam_width if beam_width is not None else INFERENCE.beam_width,
            Path(lm) if name == "beam+lm" and lm is not None else None,
            alpha if alpha is not None else INFERENCE.alpha,
            beta if beta is not None else INFERENCE.beta,
            words if name != "greedy" else (),
            INFERENCE.hotword_weight,
            float(blank_penalty),
        )
        settings.check()
        out.append(settings)
    return out


def config_from_json(obj: Any) -> InferenceConfig:
    """Read back what ``InferenceConfig.to_json`` wrote (a record, a job file)."""
    if obj is None:
        return GREEDY
    try:
        chunks = obj.get("chunks")
        dec = obj.get("decoder") or {}
        return InferenceConfig(
            ChunkSettings(float(chunks["length_s"]), float(chunks["left_s"]), float(chunks["right_s"]))
            if chunks
            else None,
            DecoderSettings(
                str(dec.get("kind", "greedy")),
                int(dec.get("beam_width") or INFERENCE.beam_width),
                Path(dec["lm"]) if dec.get("lm") else None,
                _number(dec.get("alpha"), INFERENCE.alpha),
                _number(dec.get("beta"), INFERENCE.beta),
                tuple(dec.get("hotwords") or ()),
                float(dec.get("hotword_weight") or INFERENCE.hotword_weight),
                float(dec.get("blank_penalty") or 0.0),
            ),
        ).check()
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise WorkbenchError(f"damaged inference configuration ({type(exc).__name__}: {exc})") from exc


def check_profile_holds(profile: EngineProfile | None, config: InferenceConfig, origin: str = "") -> None:
    """Refuse, in one line, a chunked configuration whose chunks the engine profile cannot take."""
    if profile is None or config.chunks is None:
        return
    if config.chunks.length_s > profile.max_s:
        where = f" (from {origin})" if origin else ""
        raise WorkbenchError(
            f"{config.chunks.length_s:g} s chunks do not fit the engine profile {profile.min_s:g}-"
            f"{profile.max_s:g} s{where}; pass --chunk-seconds {profile.max_s:g} or less, or build the "
            f"profile with --max-seconds {config.chunks.length_s:g}"
        )


def fed_duration(duration_s: float, config: InferenceConfig) -> float:
    """The longest piece of a clip the engine is fed: the clip, or a chunk when the clip is longer."""
    if config.chunks is None:
        return duration_s
    return min(duration_s, config.chunks.length_s)
