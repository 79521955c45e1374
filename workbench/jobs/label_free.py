"""The sign-off's label-free check: every candidate against FP32 on the user's unlabelled audio (``--unlabelled-set``).

For each unlabelled set the sign-off transcribes the audio with every candidate and scores it against FP32's own
transcripts (``workbench.evaluate.agreement``: disagreement, changed utterances, the edit-distance bound on the WER
delta, the label-free estimate from the labelled set's ratio), records FP32's confidence there and on a sample of
the evaluation set, and measures the coverage of the calibrated ranges on it (``workbench.calibration.coverage``).

The shift check (``shift_test``): a candidate's disagreement on the unlabelled audio is *beyond* its disagreement on
the labelled evaluation set when the lower end of the bootstrap interval of the difference (unlabelled minus
labelled, at the sign-off's level, each set's speakers resampled on their own since they are different speakers) is
above the margin (the gate file's ``[unlabelled] shift_margin``, else ``LABEL_FREE.default_shift_margin``: 0 with a
large labelled evaluation set, 1 point with a small one), so a difference
inside the noise does not flag; coverage *moved* when a calibrated tensor left its range (``CoverageRule``). Either way the check says so in
one line per set that names what to do: calibrate with this audio and keep the layers of the tensors that left
their range in FP16 (coverage moved), or add transcribed audio like it to the evaluation sets (disagreement beyond,
ranges covered). The gates ``[unlabelled] max_disagreement`` and ``max_wer_bound`` (percentage points, upper
interval end) make it a gate of every candidate's verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.backends.base import Runner
from workbench.calibration.coverage import CoverageShift, beyond_range, coverage_shift
from workbench.config import LABEL_FREE, OUTSIDE_PROFILE_DEFAULT
from workbench.errors import WorkbenchError
from workbench.evaluate.accuracy import AccuracyComparison
from workbench.evaluate.agreement import (
    AgreementResult,
    CandidateAgreement,
    Confidence,
    ConfidenceMeter,
    agreement,
)
from workbench.evaluate.bootstrap import Interval, independent_difference_interval
from workbench.evaluate.deployed import select_for_inference
from workbench.evaluate.gates import CandidateVerdict, Check, GateConfig
from workbench.evaluate.inference import GREEDY, InferenceConfig
from workbench.evaluate.transcribe import check_sample, transcribe
from workbench.evaluate.wer import Scoring
from workbench.model.description import ModelDescription
from workbench.speech.profiles import deployment_profile
from workbench.speech.records import Utterance
from workbench.speech.store import SpeechSet, load_set
from workbench.speech.unlabelled import require_unlabelled

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnlabelledSelection:
    """One ``--unlabelled-set``, checked: its utterances within the deployment profile and the notes that needs."""

    speech_set: SpeechSet
    utterances: list[Utterance]
    notes: list[str]


def check_unlabelled(
    names: Sequence[SpeechSet | str | Path],
    root: Path,
    calib_set: SpeechSet | None,
    policy: str = OUTSIDE_PROFILE_DEFAULT,
    min_s: float | None = None,
    max_s: float | None = None,
    inference: InferenceConfig = GREEDY,
) -> list[UnlabelledSelection]:
    """Load every unlabelled set (refused: a labelled set, one given twice, the calibration set itself, and clips
    outside the deployment profile unless ``policy`` scores or skips them), before any model work."""
    out: list[UnlabelledSelection] = []
    seen: set[str] = set()
    profile, origin = deployment_profile(
        calib_set.card if calib_set is not None else None,
        [u.duration_s for u in calib_set.utterances] if calib_set is not None else None,
        min_s,
        max_s,
    )
    loaded = []
    for given in names:
        sset = require_unlabelled(
            given if isinstance(given, SpeechSet) else load_set(given, root=root), "--unlabelled-set"
        )
        if sset.content_hash in seen:
            raise WorkbenchError(f"--unlabelled-set {sset.name} is given twice; give each set once")
        seen.add(sset.content_hash)
        if calib_set is not None and sset.content_hash == calib_set.content_hash:
            raise WorkbenchError(
                f"--unlabelled-set {sset.name} is the calibration set: its ranges were computed on it, so the check "
                "could not see a shift; give audio the model was not calibrated on"
            )
        loaded.append(sset)
    for sset in loaded:  # every set is named and distinct before the profile is applied to any
        utts, notes = select_for_inference(
            sset.utterances, profile, policy, origin, inference, f"clips of unlabelled set {sset.name}"
        )
        if not utts:
            raise WorkbenchError(
                f"unlabelled set {sset.name} has no clip inside the deployment profile to score"
            )
        out.append(UnlabelledSelection(sset, utts, notes))
    return out


@dataclass(frozen=True)
class ShiftTest:
    """One candidate's two-sample shift test: its disagreement on the unlabelled audio minus (and over) its
    disagreement on the labelled evaluation set, with intervals; ``beyond`` when the difference's lower end is above
    ``margin``."""

    difference: Interval
    ratio: Interval
    margin: float
    beyond: bool

    def to_json(self) -> dict[str, Any]:
        def strict(iv: Interval) -> dict[str, Any]:
            out = iv.to_json()
            return {k: (None if isinstance(v, float) and v != v else v) for k, v in out.items()}

        return {
            "difference": strict(self.difference),
            "ratio": strict(self.ratio),
            "margin": self.margin,
            "beyond": self.beyond,
        }


def shift_test(
    here: CandidateAgreement,
    labelled: CandidateAgreement,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    margin: float = LABEL_FREE.shift_margin,
) -> ShiftTest:
    """Is ``here``'s disagreement beyond ``labelled``'s? The bootstrap interval of the difference of the two
    disagreements (each set's speakers resampled independently); beyond when its lower end is above ``margin``."""
    if here.samples is None or labelled.samples is None:
        raise ValueError("the shift test needs the per-utterance edits of both sets")
    unit = here.disagreement.unit if here.disagreement.unit == labelled.disagreement.unit else "mixed"
    difference, ratio = independent_difference_interval(
        here.samples, labelled.samples, unit=unit, level=level, resamples=resamples, seed=seed
    )
    return ShiftTest(
        difference, ratio, margin, bool(difference.low == difference.low and difference.low > margin)
    )


@dataclass(frozen=True)
class SetCheck:
    """The label-free check of one unlabelled set."""

    agreement: AgreementResult
    coverage: CoverageShift | None
    beyond: list[str]  # candidates whose disagreement here lies beyond their labelled one
    line: str | None  # the shift check's line (None: nothing flagged)
    notes: list[str] = field(default_factory=list)
    tests: dict[str, ShiftTest] = field(default_factory=dict)  # candidate -> its shift test

    def to_json(self) -> dict[str, Any]:
        return {
            **self.agreement.to_json(),
            "coverage": None if self.coverage is None else self.coverage.to_json(),
            "beyond_labelled": self.beyond,
            "shift_tests": {n: t.to_json() for n, t in self.tests.items()},
            "shift": self.line,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class LabelFreeSection:
    """The label-free section of a sign-off record: the labelled reference and every unlabelled set's check."""

    labelled: AgreementResult
    sets: list[SetCheck]
    rule: str

    @property
    def lines(self) -> list[str]:
        return [s.line for s in self.sets if s.line]

    def to_json(self) -> dict[str, Any]:
        return {
            "labelled": self.labelled.to_json(),
            "sets": [s.to_json() for s in self.sets],
            "shift_rule": self.rule,
            "lines": self.lines,
            "bound_note": (
                "the bound is guaranteed (edit distance is a metric) up to the estimate of the reference's word "
                "count; it bounds the loss, it does not estimate it. The estimate is not guaranteed."
            ),
        }


def shift_rule(margin: float | None = None, eval_clips: int | None = None) -> str:
    """The shift check's rule in words, with the margin it ran at: the gate file's (``margin``), else the default for
    a labelled evaluation set of ``eval_clips`` clips (None: the small sets' default)."""
    small, large, size = LABEL_FREE.shift_margin, LABEL_FREE.shift_margin_large, LABEL_FREE.large_eval_clips
    default = LABEL_FREE.default_shift_margin(eval_clips) if eval_clips is not None else small
    at = default if margin is None else margin
    defaults = f"{large * 100:g} % with {size} or more labelled evaluation clips, {small * 100:g} % with fewer"
    if margin is not None:
        origin = f" (the gate file's shift_margin; the default is {defaults})"
    elif eval_clips is not None:
        origin = f" (the default for {eval_clips} labelled evaluation clips: {defaults})"
    else:
        origin = ""
    return (
        "beyond: the lower end of the bootstrap interval of a candidate's disagreement on the unlabelled audio minus "
        "its disagreement on the labelled evaluation set (each set's speakers resampled independently) is above "
        f"{at * 100:g} % of FP32's words"
        + origin
        + f"; coverage moved: a calibrated tensor's share of values beyond its range is at least "
        f"{LABEL_FREE.coverage.min_share * 100:.2f} % and {LABEL_FREE.coverage.factor:g}x its share on the "
        "calibration set"
    )


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x * 100:.2f}"


def _shift_line(
    name: str,
    beyond: list[str],
    here: AgreementResult,
    labelled: AgreementResult,
    cov: CoverageShift | None,
    tests: Mapping[str, ShiftTest],
) -> str | None:
    moved = cov is not None and cov.moved
    if not beyond and not moved:
        return None
    parts = []
    for cand in beyond:
        u, lab = here.candidates[cand].disagreement, labelled.candidates[cand].disagreement
        d = tests[cand].difference
        parts.append(
            f"{cand} disagrees with FP32 on {_pct(u.estimate)} % [{_pct(u.low)}, {_pct(u.high)}] of its words against "
            f"{_pct(lab.estimate)} % [{_pct(lab.low)}, {_pct(lab.high)}] on {labelled.set_name} (difference "
            f"{_pct(d.estimate)} points [{_pct(d.low)}, {_pct(d.high)}])"
        )
    if moved and cov is not None:
        tensors = ", ".join(m.tensor for m in cov.left[:3])
        parts.append(f"{len(cov.left)} tensor(s) left their calibrated range ({tensors})")
        todo = (
            f"calibrate with this audio (add it to the calibration set), or keep the layers reading {tensors} in "
            "FP16; and add transcribed audio like it to the evaluation sets"
        )
    else:
        todo = (
            "add transcribed audio like it to the evaluation sets (the labelled sign-off does not cover it; the "
            "calibrated ranges do), or keep the candidate's most sensitive layers in FP16"
        )
    return f"shift on {name}: " + "; ".join(parts) + f": {todo}"


def gate_checks(section: LabelFreeSection, gates: GateConfig, verdicts: list[CandidateVerdict]) -> None:
    """Add the ``[unlabelled]`` gates to every candidate's verdict (upper interval ends, percentage points)."""
    limits = [
        ("disagreement", gates.unlabelled_max_disagreement, "disagreement"),
        ("WER bound", gates.unlabelled_max_wer_bound, "wer_bound"),
    ]
    for verdict in verdicts:
        for check in section.sets:
            cand = check.agreement.candidates.get(verdict.candidate)
            if cand is None:
                continue
            for label, limit, attr in limits:
                if limit is None:
                    continue
                iv = getattr(cand, attr)
                upper = iv.high * 100.0
                ok = bool(upper == upper and upper <= limit)
                verdict.add(
                    Check(
                        f"unlabelled {check.agreement.set_name} {label}",
                        upper if upper == upper else None,
                        limit,
                        ok,
                        f"unlabelled {check.agreement.set_name}: {label} {iv.estimate * 100:.2f} pts, CI upper "
                        f"{upper:.2f} pts {'<=' if ok else '>'} {limit:.2f}",
                    )
                )


def _confidence(
    runner: Runner, audios: list, model: ModelDescription, inference: InferenceConfig, batch: int
) -> tuple[list[str], Confidence | None]:
    meter = ConfidenceMeter(model.vocabulary.blank_id)
    result = transcribe(
        runner, audios, model, runner.name, inference, batch_size=batch, on_logits=lambda _, x: meter.add(x)
    )
    return result.texts, meter.result()


def label_free(
    selections: Sequence[UnlabelledSelection],
    names: Sequence[str],
    runners: Mapping[str, Runner],
    model: ModelDescription,
    eval_set: SpeechSet,
    eval_utts: Sequence[Utterance],
    eval_hyps: Mapping[str, Sequence[str]],
    accuracy: AccuracyComparison,
    *,
    fp32_onnx: Path,
    amax: Mapping[str, float] | None,
    calib_set: SpeechSet | None,
    inference: InferenceConfig = GREEDY,
    batch: int = 1,
    resamples: int = 2000,
    seed: int = 0,
    shift_margin: float | None = None,
) -> LabelFreeSection:
    """Score every candidate (``names``, the FP32 baseline first, run by ``runners``) against FP32 on every unlabelled
    set, with the labelled evaluation set's agreement as the reference, FP32's confidence and the coverage of the
    calibrated ranges (``amax`` of the cache on ``fp32_onnx``; None or no ``calib_set``: not measured, said so).
    ``shift_margin``: the gate file's margin of the shift check, a fraction of FP32's words (None: the default for the
    evaluation set's size, ``LabelFreeDefaults.default_shift_margin``)."""
    baseline = names[0]
    scoring = Scoring.for_model(model)
    margin = LABEL_FREE.default_shift_margin(len(eval_utts)) if shift_margin is None else shift_margin
    # the labelled reference: disagreement on the evaluation set, FP32's confidence on a sample of it
    sample = check_sample(len(eval_utts), LABEL_FREE.coverage_calib_clips)
    _, eval_conf = _confidence(
        runners[baseline], [eval_set.audio(eval_utts[i]) for i in sample], model, inference, batch
    )
    labelled = agreement(
        eval_set.name,
        [u.speaker for u in eval_utts],
        eval_hyps,
        baseline,
        scoring,
        eval_conf,
        level=accuracy.level,
        resamples=resamples,
        seed=seed,
    )
    ratios = {}
    for name, cand in labelled.candidates.items():
        delta = accuracy.candidates[name].overall.delta
        if delta is not None:
            ratios[name] = (eval_set.name, delta.estimate, cand.wer_bound.estimate)
    reference_cov = None
    notes: list[str] = []
    if amax and calib_set is not None:
        picked = check_sample(len(calib_set.utterances), LABEL_FREE.coverage_calib_clips)
        logger.info(f"coverage reference: {len(picked)} clips of {calib_set.name}")
        reference_cov = beyond_range(
            fp32_onnx, amax, (calib_set.audio(calib_set.utterances[i]) for i in picked), model.prepare
        )
    else:
        notes.append(
            "coverage of the calibrated ranges not measured: it needs the calibration set and its cache"
        )
    checks = []
    for sel in selections:
        sset, utts = sel.speech_set, sel.utterances
        audios = [sset.audio(u) for u in utts]
        logger.info(f"[{baseline}] transcribing {len(utts)} clips of unlabelled set {sset.name}")
        texts, conf = _confidence(runners[baseline], audios, model, inference, batch)
        transcripts = {baseline: texts}
        for name in names[1:]:
            logger.info(f"[{name}] transcribing {len(utts)} clips of unlabelled set {sset.name}")
            transcripts[name] = transcribe(
                runners[name], audios, model, name, inference, batch_size=batch
            ).texts
        here = agreement(
            sset.name,
            [u.speaker for u in utts],
            transcripts,
            baseline,
            scoring,
            conf,
            ratios,
            level=accuracy.level,
            resamples=resamples,
            seed=seed,
        )
        cov = None
        if reference_cov is not None and amax:
            cov = coverage_shift(
                reference_cov,
                beyond_range(fp32_onnx, amax, iter(audios), model.prepare),
                (calib_set.name if calib_set else "calibration set", sset.name),
                (
                    min(len(calib_set.utterances), LABEL_FREE.coverage_calib_clips) if calib_set else 0,
                    len(audios),
                ),
                LABEL_FREE.coverage,
            )
        del audios
        tests = {
            n: shift_test(
                c,
                labelled.candidates[n],
                level=accuracy.level,
                resamples=resamples,
                seed=seed,
                margin=margin,
            )
            for n, c in here.candidates.items()
            if n in labelled.candidates
        }
        beyond = [n for n, t in tests.items() if t.beyond]
        set_notes = list(sel.notes) + notes
        if (
            conf is not None
            and eval_conf is not None
            and conf.mean_max_posterior < eval_conf.mean_max_posterior - LABEL_FREE.confidence_drop
        ):
            set_notes.append(
                f"FP32 itself is less sure on {sset.name} (mean max posterior {conf.mean_max_posterior:.3f} against "
                f"{eval_conf.mean_max_posterior:.3f} on {eval_set.name}): part of the disagreement may be audio the "
                "model cannot hear, not audio the candidate breaks"
            )
        checks.append(
            SetCheck(
                here,
                cov,
                beyond,
                _shift_line(sset.name, beyond, here, labelled, cov, tests),
                set_notes,
                tests,
            )
        )
    return LabelFreeSection(labelled, checks, shift_rule(shift_margin, len(eval_utts)))
