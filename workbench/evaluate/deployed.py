"""What a sign-off needs to judge inference as deployed: which clips fit the profile, and WER per decoder.

``select_for_inference``: with whole clips every clip must fit the engine profile (``select_in_profile``);
with chunks the engine is fed pieces no longer than a chunk, so the profile must hold the chunk length
(refused in one line otherwise) and each clip is judged by the longest piece it is fed.

``decoder_accuracy``: the same candidates scored under each decoder (greedy, beam, beam+LM), with the
paired deltas against the baseline and the errors split into substitutions, deletions and insertions
(jiwer's counts), so a report can show whether INT8 damage is extra deletions and whether a language
model hides or amplifies it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from workbench.config import EngineProfile
from workbench.evaluate.accuracy import compare_accuracy
from workbench.evaluate.inference import InferenceConfig, check_profile_holds, fed_duration
from workbench.evaluate.wer import Scoring
from workbench.speech.profiles import select_in_profile
from workbench.speech.records import Utterance


def select_for_inference(
    utts: Sequence[Utterance],
    profile: EngineProfile | None,
    policy: str,
    origin: str,
    inference: InferenceConfig,
    what: str = "evaluation clips",
) -> tuple[list[Utterance], list[str]]:
    """``select_in_profile`` on what the engine is fed: whole clips, or chunks when the configuration chunks."""
    if inference.chunks is None:
        return select_in_profile(utts, profile, policy, origin, what)
    check_profile_holds(profile, inference, origin)
    fed = [replace(u, duration_s=fed_duration(u.duration_s, inference)) for u in utts]
    kept, notes = select_in_profile(fed, profile, policy, origin, what)
    ids = {u.id for u in kept}
    longer = sum(1 for u in utts if u.duration_s > inference.chunks.length_s)
    notes = [*notes, f"{longer} of {len(utts)} clips are longer than one chunk and were fed in chunks"]
    return [u for u in utts if u.id in ids], notes


def _overall(group: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "wer": group["wer"],
        "delta": group["delta"],
        "reference_words": group["reference_words"],
        "substitutions": group["substitutions"],
        "deletions": group["deletions"],
        "insertions": group["insertions"],
        "extra_substitutions": group["substitutions"] - base["substitutions"],
        "extra_deletions": group["deletions"] - base["deletions"],
        "extra_insertions": group["insertions"] - base["insertions"],
    }


def decoder_accuracy(
    utts: Sequence[Utterance],
    texts: Mapping[str, Mapping[str, list[str]]],
    configs: Mapping[str, dict[str, Any]],
    baseline: str,
    scoring: Scoring,
    resamples: int,
    seed: int,
    total: int | None = None,
) -> dict[str, Any]:
    """``{decoder: {"decoder": its settings, "utterances": how many were scored, "of": of how many in the set,
    "candidates": {name: overall WER, delta, S/D/I and the extra S/D/I over the baseline}}}`` from
    ``texts[decoder][candidate]`` (one text per utterance of ``utts``; ``total``: the set's size, default theirs)."""
    out: dict[str, Any] = {}
    for decoder, hyps in texts.items():
        accuracy = compare_accuracy(
            list(utts), dict(hyps), baseline, resamples=resamples, seed=seed, scoring=scoring
        ).to_json()
        base = accuracy["candidates"][baseline]["overall"]
        out[decoder] = {
            "decoder": configs[decoder],
            "utterances": len(utts),
            "of": len(utts) if total is None else total,
            "candidates": {n: _overall(c["overall"], base) for n, c in accuracy["candidates"].items()},
        }
    return out
