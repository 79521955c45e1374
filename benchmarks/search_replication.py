"""Replication of the demo's search and sign-off over independent draws of its dev and evaluation sets.

The search chooses among many plans read on one dev set, so the plan it finds may pass its sign-off less often than
its dev reading promises. This benchmark measures how often, per selection rule (``search --selection``):

1. once: the demo's calibration set (seed 0, the demo's speakers and texts), its calibration (percentile 99.99 with
   the demo's accuracy recovery) and its layer-sensitivity ranking, exactly as ``python -m workbench demo`` makes
   them (the demo preset's steps sets, calibrate, compare: ``workbench.project.demo``);
2. per draw ``d`` (``SetBuildConfig.draw`` = ``--first-draw + d``, seed 0): a new dev set and a new evaluation set
   beside the base's calibration set (not synthesised again: ``build_synthetic_sets(calib=...)`` checks that the
   set is the one this configuration makes, ``workbench.speech.beside``): the speakers never in calibration
   dealt again between evaluation and dev (``workbench.speech.split.redraw_held_out``), new texts, noise, levels
   and voice per utterance; then the search with each rule on that dev set (predicting the sign-off on that
   evaluation set; a plan's dev transcripts are made once per draw and read by every rule's search and the
   held-back check, ``workbench.search.transcripts``; ``--no-reuse`` transcribes them in each search), then one
   sign-off (TensorRT-bound files, greedy decoding, no latency) of FP32 and each rule's found plan;
3. per rule: pass rate (with its 95 % Wilson interval), mean INT8 share of multiply-accumulates (a draw without a
   plan counts 0), mean predicted pass chance (``signoff_forecast``) against the observed pass rate, and the
   winning rule by the target (``benchmarks/replication/pick_rule.py``, which also prints the table from the JSON).

The rule ``disagreement`` (``--rules as-read,disagreement``) compares the search's dev criteria on the same draws:
the draw's dev set is built ``--unlabelled-factor`` times larger (``--dev-per-condition`` times the factor), every
factor-th utterance of each condition and duration bucket is stored as the labelled dev set that every WER search
reads (``labelled_dev``), and the whole of it is imported again without transcripts (``data import --role
unlabelled``) as the unlabelled dev audio that ``search --dev-criterion disagreement`` judges plans on (selection
as-read; the budget ``--max-disagreement``, or by default calibrated on the labelled dev set,
``workbench.search.disagreement``). The sign-off of its plan is the same labelled sign-off on the draw's evaluation
set. The synthetic text pool holds texts for about 1,500 dev utterances (the demo's 450 per condition give 1,059), so
keep ``--dev-per-condition`` times the factor near 450: e.g. 150 and 3, a labelled dev set a third of the audio.

Draws run in parallel processes (``--jobs``), each with ``--threads`` ONNX Runtime threads and as many synthesis
workers; the results JSON is written atomically when every draw is done (each draw also leaves its own JSON in the
workspace, so a killed run keeps what finished).
Runs of other draws (``--first-draw``) with the same settings merge into one result (``--merge``), so the draws can
be split over calls with a time limit.

    python benchmarks/search_replication.py --draws 8 --jobs 8 --workspace /tmp/rep \
        --out benchmarks/results/search_replication.json
    python benchmarks/search_replication.py --merge A.json B.json --out benchmarks/results/search_replication.json
    python benchmarks/search_replication.py --draws 1 --dev-per-condition 20 --eval-per-condition 20 \
        --calib-per-condition 12 --quick --workspace /tmp/rep-smoke --out /tmp/rep-smoke.json   # a smoke run
    python benchmarks/search_replication.py --draws 8 --jobs 8 --rules as-read,disagreement --dev-per-condition 150 \
        --unlabelled-factor 3 --workspace /tmp/rep-dis --out benchmarks/results/search_dev_criterion.json  # criteria
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "replication"))
RESULTS = HERE / "results" / "search_replication.json"
RULES = ("as-read", "shrink", "confirm")
# rules that change the dev criterion rather than the selection (``search --dev-criterion``)
CRITERION_RULES = ("disagreement",)

import pick_rule  # noqa: E402  (benchmarks/replication/pick_rule.py: the target and the winning rule)


def _analysis(base: dict[str, Any]) -> dict[str, Any]:
    """The fields search and sign-off share: the demo model, its calibration set, method and cache."""
    from workbench.project.demo import DEMO_METHOD
    from workbench.resources import demo_model_dir

    return {
        "model": demo_model_dir(),
        "calib_set": base["calib_set"],
        "method": DEMO_METHOD,
        "cache": Path(base["cache"]),
        "engines": Path(base["engines"]),
        "calib_root": Path(base["calib_root"]),
    }


def prepare_base(workspace: Path, calib_per_condition: int, quick: bool, workers: int) -> dict[str, Any]:
    """The demo's calibration set, calibration and sensitivity ranking, made once for every draw: the demo preset's
    first three steps (its search and sign-offs off), run by workbench run's pipeline."""
    from dataclasses import replace

    from workbench.config import SetBuildConfig
    from workbench.pipeline.run import run_project
    from workbench.pipeline.state import RunState
    from workbench.project.demo import DemoOptions, demo_project

    # a dev set is asked for (1 per condition) so the speaker roles, and so the calibration set, are the demo's
    sets = SetBuildConfig(
        name="demo",
        calib_per_condition=calib_per_condition,
        eval_per_condition=1,
        dev_per_condition=1,
        seed=0,
        workers=workers,
    )
    preset = demo_project(DemoOptions(sets, quick=quick))
    project = replace(
        preset,
        search=replace(preset.search, enabled=False),
        targets=(),
        signoff=replace(preset.signoff, training_lm=False),
    )
    result = run_project(project, workspace / "engines", workspace / "calib_sets", workspace / "reports")
    done = RunState.load(result.folder).steps
    made, calibrated = done["sets"].result, done["calibrate"].result
    return {
        "calib_set": made["calib"],
        "calib_hash": made["hashes"]["calib"],
        "cache": calibrated["cache"],
        "fp32_onnx": calibrated["fp32"],
        "engines": str(workspace / "engines"),
        "calib_root": str(workspace / "calib_sets"),
        "sensitivity": done["compare"].result["sensitivity"],
        "seconds": {s.name: round(s.seconds, 1) for s in result.steps},
    }


def _points(interval: dict[str, Any] | None) -> dict[str, float] | None:
    if interval is None:
        return None
    return {k: round(interval[k] * 100, 3) for k in ("estimate", "low", "high")}


def _dev_reading(data: dict[str, Any]) -> dict[str, Any] | None:
    """The found plan's dev reading in the search record (its candidate entry; with a confirmation, also its
    reading on the held-back speakers)."""
    found = data.get("found")
    if not found:
        return None
    picked = [c for c in data["candidates"] if c["name"] == found["name"]] or [
        c for c in data["candidates"] if c["passed"] and c["int8_macs_share"] == found["int8_macs_share"]
    ]
    if not picked:
        return None
    cand = picked[-1]
    out: dict[str, Any] = {
        "delta": _points((cand.get("delta") or {}).get("overall")),
        "judged_high": (cand.get("judged_delta_high") or {}).get("overall"),
        "utterances": cand["evidence"].get("utterances") if cand.get("evidence") else None,
    }
    confirmation = data.get("confirmation") or {}
    for tried in confirmation.get("tried", []):
        if tried["name"] == confirmation.get("found"):
            out["held_back_delta"] = tried["held_back_delta"]
    return out


def labelled_dev(dev: Any, factor: int, root: Path) -> Any:
    """Every ``factor``-th utterance of each condition and duration bucket of the draw's dev set (stored in slot order,
    each slot's voice and text drawn on its own), stored with its transcripts as the labelled dev set."""
    from workbench.speech.records import Clip
    from workbench.speech.store import write_set

    seen: dict[tuple[str, str | None], int] = {}
    picked = []
    for utt in dev.utterances:
        key = (utt.condition, utt.bucket)
        if seen.get(key, 0) % factor == 0:
            picked.append(Clip(utt, dev.audio(utt)))
        seen[key] = seen.get(key, 0) + 1
    how = f"every {factor}th utterance of each condition and duration bucket of {dev.name}"
    return write_set(
        root / "calib_sets" / f"{dev.name}-labelled", picked, {"role": "dev", "how": how}, [], {}
    )


def unlabelled_dev(dev: Any, root: Path, workers: int) -> Any:
    """The draw's whole dev set imported again without transcripts (``data import --role unlabelled``)."""
    from workbench.speech.importer import ImportConfig, import_set
    from workbench.speech.layouts import open_source

    return import_set(
        open_source("manifest", dev.path / "manifest.jsonl"),
        ImportConfig(name=f"{dev.name}-u", role="unlabelled", workers=workers),
        "search replication",
        root=root / "calib_sets",
        progress=False,
    ).speech_set


def _criterion(data: dict[str, Any]) -> dict[str, Any]:
    """What the search judged plans on: the criterion, and with disagreement the budget and the unlabelled audio."""
    criterion = data.get("dev_criterion") or {"criterion": "wer"}
    if criterion["criterion"] != "disagreement":
        return {"criterion": criterion["criterion"]}
    return {
        "criterion": criterion["criterion"],
        "budget": criterion["budget"],
        "unlabelled_utterances": criterion["unlabelled_dev_set"]["utterances"],
    }


def run_draw(draw: int, seed: int, args: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """One draw: new dev and evaluation sets, the search under each rule, one sign-off of every found plan."""
    from workbench.config import DEMO_RECOVERY, SetBuildConfig
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs import search, signoff
    from workbench.project.demo import DEMO_FINER
    from workbench.resources import demo_model_dir
    from workbench.search.transcripts import TranscriptCache
    from workbench.speech.builder import build_synthetic_sets
    from workbench.speech.store import load_set

    began, cpu0 = time.perf_counter(), cpu_seconds()
    root = Path(args["workspace"]) / f"draw-{draw:02d}-sets{seed}"
    threads = args["threads"]
    calib = load_set(base["calib_set"])
    if calib.content_hash != base["calib_hash"]:
        raise RuntimeError(f"the base's calibration set {base['calib_set']} changed since it was built")
    # the draw's dev and evaluation sets, beside the base's calibration set (not synthesised again: the builder
    # checks that this configuration's calibration slots are the ones the base's set holds)
    built = build_synthetic_sets(
        SetBuildConfig(
            name=f"rep-d{seed}",
            calib_per_condition=args["calib_per_condition"],  # the base's: the same calibration slots
            eval_per_condition=args["eval_per_condition"],
            # with the disagreement rule the dev set is the unlabelled audio; WER searches read a share of it
            dev_per_condition=args["dev_per_condition"] * (args.get("unlabelled_factor") or 1),
            seed=0,
            draw=seed,
            workers=threads,
        ),
        root=root / "calib_sets",
        calib=calib,
    )
    if built.dev is None:
        raise RuntimeError(f"draw {seed} built no dev set")
    seconds = {"sets": time.perf_counter() - began}
    cpu = {"sets": cpu_seconds() - cpu0}
    rules: dict[str, Any] = {}
    gates = GateConfig()
    unlabelled = labelled = None
    if "disagreement" in args["rules"]:
        labelled = labelled_dev(built.dev, args["unlabelled_factor"], root)
        unlabelled = unlabelled_dev(built.dev, root, threads)
    dev_path = str((labelled or built.dev).path)
    # each plan's dev transcripts are made once per draw and read by every rule's search (and the held-back check)
    transcripts = TranscriptCache()
    for rule in args["rules"]:
        started, cpu_started, shared = time.perf_counter(), cpu_seconds(), transcripts.counts()
        criterion: dict[str, Any] = {"selection": rule, "dev_set": dev_path}
        if rule == "disagreement" and unlabelled is not None:
            given = args.get("max_disagreement")
            criterion = {
                "selection": "as-read",
                "dev_criterion": "disagreement",
                "unlabelled_dev_set": str(unlabelled.path),
                "max_disagreement": given,
                # a given budget reads no labelled dev set; a calibrated one is made on it
                "dev_set": None if given is not None else dev_path,
            }
        result = search.run(
            search.SearchInputs(
                **_analysis(base),
                gates=gates,
                signoff_set=str(built.eval.path),
                sensitivity=Path(base["sensitivity"]),
                refine=0,
                finer=0 if args["quick"] else DEMO_FINER,
                resamples=200 if args["quick"] else 1000,
                **criterion,
                threads=threads,
                progress=False,
                out=root / rule,
                transcripts=transcripts if args.get("reuse", True) else None,
            )
        )
        seconds[f"search {rule}"] = time.perf_counter() - started
        cpu[f"search {rule}"] = cpu_seconds() - cpu_started
        data = result.data
        found = data.get("found")
        rules[rule] = {
            "found": found["name"] if found else None,
            "onnx": found["onnx_path"] if found else None,
            "onnx_sha256": found["onnx_sha256"] if found else None,
            "int8_macs_share": found["int8_macs_share"] if found else 0.0,
            "fp16_groups": found["fp16_groups"] if found else None,
            "dev": _dev_reading(data),
            "evaluations": data["evaluations"],
            "dev_utterances_transcribed": data["sequential"]["utterances_transcribed"],
            "selection": data.get("selection"),
            "dev_criterion": _criterion(data),
            "forecast": data.get("signoff_forecast"),
            # dev clip transcriptions this search ran and took from the earlier rules' (with sharing)
            "dev_clips": {k: transcripts.counts()[k] - shared[k] for k in ("transcribed", "reused")},
        }
    # one sign-off of FP32 and every distinct found plan (a plan two rules found is judged once)
    candidates: list[tuple[str, Path]] = [("fp32", Path(base["fp32_onnx"]))]
    name_of: dict[str, str] = {}
    for rule, row in rules.items():
        if row["onnx_sha256"] is None:
            continue
        if row["onnx_sha256"] not in name_of:
            name_of[row["onnx_sha256"]] = f"mixed-{rule}"
            candidates.append((f"mixed-{rule}", Path(row["onnx"])))
    started, cpu_started = time.perf_counter(), cpu_seconds()
    record = signoff.run(
        signoff.SignoffInputs(
            eval_set=str(built.eval.path),
            out_dir=root / "signoff",
            candidates=candidates,
            model=demo_model_dir(),
            calib_set=base["calib_set"],
            cache=Path(base["cache"]),
            engines=Path(base["engines"]),
            calib_root=Path(base["calib_root"]),
            latency=None,
            overflow_check=False,
            threads=threads,
            resamples=500 if args["quick"] else 2000,
            target="tensorrt",
        )
    ).record
    seconds["signoff"] = time.perf_counter() - started
    cpu["signoff"] = cpu_seconds() - cpu_started
    verdicts = {v["candidate"]: v for v in record["verdicts"]}
    accuracy = record["accuracy"]["candidates"]
    for row in rules.values():
        name = name_of.get(row["onnx_sha256"]) if row["onnx_sha256"] else None
        if name is None:
            row["signoff"] = {"verdict": "no plan", "passed": False}
            continue
        verdict = verdicts[name]
        row["signoff"] = {
            "candidate": name,
            "delta": _points(accuracy[name]["overall"]["delta"]),
            "per_condition": {
                c: _points(g["delta"]) for c, g in accuracy[name]["groups"].get("condition", {}).items()
            },
            "passed": verdict["passed"],
            "insufficient_evidence": verdict.get("insufficient_evidence", False),
            "verdict": verdict["summary"],
        }
    out = {
        "draw": draw,
        "sets": {"seed": 0, "draw": seed, "calib_hash": built.calib.content_hash},
        "dev_hash": built.dev.content_hash,
        "eval_hash": built.eval.content_hash,
        "dev_utterances": len(built.dev.utterances),
        "eval_utterances": len(built.eval.utterances),
        "dev_speakers": len({u.speaker for u in built.dev.utterances}),
        "labelled_dev_utterances": len(labelled.utterances) if labelled is not None else None,
        "unlabelled_dev_utterances": len(unlabelled.utterances) if unlabelled is not None else None,
        "eval_speakers": len({u.speaker for u in built.eval.utterances}),
        "dev_speaker_names": sorted({u.speaker for u in built.dev.utterances}),
        "eval_speaker_names": sorted({u.speaker for u in built.eval.utterances}),
        "recovery": asdict(DEMO_RECOVERY),
        "rules": rules,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "wall_seconds": round(time.perf_counter() - began, 1),
        # this process's and its finished children's (synthesis workers, TTS programs) user + system time
        "cpu_seconds": round(cpu_seconds() - cpu0, 1),
        "cpu_seconds_by_phase": {k: round(v, 1) for k, v in cpu.items()},
        # dev clip transcriptions the searches shared (workbench.search.transcripts): run once, reused after
        "dev_transcripts": transcripts.counts(),
    }
    (root / "draw.json").write_text(json.dumps(out, indent=1))
    return out


def cpu_seconds() -> float:
    """User + system CPU time of this process and its waited-for children so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _draw_or_error(draw: int, seed: int, args: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("OMP_NUM_THREADS", str(args["threads"]))
    try:
        return run_draw(draw, seed, args, base)
    except Exception as exc:  # a failed draw is recorded, not silently dropped
        return {
            "draw": draw,
            "seed": seed,
            "error": f"{type(exc).__name__}: {exc}",
            "trace": traceback.format_exc(),
        }


def _mean(values: list[Any]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return round(sum(known) / len(known), 1) if known else None


def summarise(draws: list[dict[str, Any]], rules: tuple[str, ...]) -> dict[str, Any]:
    """Per rule: draws, passes, pass rate, mean INT8 MAC share, mean predicted pass chance against the observed
    rate (and the Brier score of the forecasts), and what the rule costs: mean dev utterances transcribed and mean
    search seconds per draw."""
    done = [d for d in draws if "rules" in d]
    out: dict[str, Any] = {}
    for rule in rules:
        rows = [d["rules"][rule] for d in done if rule in d["rules"]]
        if not rows:
            continue
        passed = [bool(r["signoff"]["passed"]) for r in rows]
        shares = [float(r["int8_macs_share"] or 0.0) for r in rows]
        chances = [(r.get("forecast") or {}).get("pass_chance") if r["found"] else 0.0 for r in rows]
        known = [(c, p) for c, p in zip(chances, passed) if c is not None]
        out[rule] = {
            "draws": len(rows),
            "passes": sum(passed),
            "pass_rate": round(sum(passed) / len(rows), 3),
            "pass_rate_interval": list(pick_rule.wilson(sum(passed), len(rows))),
            "plans_found": sum(r["found"] is not None for r in rows),
            "insufficient_evidence": sum(bool(r["signoff"].get("insufficient_evidence")) for r in rows),
            "mean_int8_macs_share": round(sum(shares) / len(rows), 4),
            "mean_predicted_pass_chance": round(sum(c for c, _ in known) / len(known), 3) if known else None,
            "brier": round(sum((c - p) ** 2 for c, p in known) / len(known), 4) if known else None,
        }
        transcribed = [r.get("dev_utterances_transcribed") for r in rows]
        spent = [d["seconds"].get(f"search {rule}") for d in done if rule in d["rules"] and "seconds" in d]
        out[rule]["mean_dev_utterances_transcribed"] = _mean(transcribed)
        out[rule]["mean_search_seconds"] = _mean(spent)
        out[rule]["mean_dev_clips_transcribed"] = _mean(
            [(r.get("dev_clips") or {}).get("transcribed") for r in rows]
        )
        out[rule]["meets_target"] = pick_rule.qualifies(out[rule])
    return out


def speaker_overlap(draws: list[dict[str, Any]]) -> dict[str, Any]:
    """How far the draws' speakers differ: per role, the mean share of a draw's speakers that another draw also has
    (over every pair of finished draws)."""
    done = [d for d in draws if "eval_speaker_names" in d]
    out: dict[str, Any] = {"pairs": len(done) * (len(done) - 1) // 2}
    for role in ("eval", "dev"):
        shares = [
            len(set(a[f"{role}_speaker_names"]) & set(b[f"{role}_speaker_names"]))
            / max(1, len(a[f"{role}_speaker_names"]))
            for i, a in enumerate(done)
            for b in done[i + 1 :]
        ]
        out[f"{role}_mean_shared"] = round(sum(shares) / len(shares), 3) if shares else None
    return out


COSTS = (
    "per rule, mean_search_seconds and mean_dev_clips_transcribed are with dev transcripts shared in the order of "
    "--rules: a later rule's search reuses the clips an earlier one transcribed with the same plan; "
    "mean_dev_utterances_transcribed is the evidence each search read (the same with or without sharing)"
)

DEV_CRITERIA = (
    "the rules as-read, shrink and confirm judge plans by WER delta on the labelled dev set (every unlabelled_factor-th "
    "utterance of each condition and duration bucket of the draw's dev set, built unlabelled_factor times "
    "dev_per_condition); disagreement judges them by disagreement with FP32 on the whole dev set imported without "
    "transcripts, within a budget given by max_disagreement or calibrated on the labelled dev set; every found plan "
    "meets the same labelled sign-off on the draw's evaluation set"
)

SAME_IN_PARTS = (
    "calib_per_condition",
    "dev_per_condition",
    "eval_per_condition",
    "quick",
    "rules",
    "unlabelled_factor",
    "max_disagreement",
)


def merge(parts: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """One result from runs of other draws (each run made its own base; their calibration hashes must agree): the
    draws of all, renumbered in order of their set draw, with the summary, winner and speaker overlap recomputed.
    Runs with other settings, other calibration sets or the same set draw twice are refused (ValueError); a run
    stopped before its last draw contributes the draws it finished."""
    first = parts[0]
    for name, part in zip(names, parts):
        if part.get("benchmark") != "search_replication":
            raise ValueError(f"{name} is not a search replication result")
        for key in SAME_IN_PARTS:
            if part["settings"].get(key) != first["settings"].get(key):
                raise ValueError(
                    f"{name}: {key} {part['settings'].get(key)} differs from {first['settings'].get(key)}"
                )
        if part["base"]["calib_hash"] != first["base"]["calib_hash"]:
            raise ValueError(f"{name}: another calibration set ({part['base']['calib_hash'][:12]})")
    draws = [dict(d) for part in parts for d in part["draws"]]
    set_draws = [d.get("sets", {}).get("draw", d.get("seed")) for d in draws]
    if len(set(set_draws)) != len(set_draws):
        raise ValueError(f"the same set draw appears twice: {sorted(set_draws)}")
    draws = [d for _, d in sorted(zip(set_draws, draws), key=lambda pair: pair[0])]
    for i, d in enumerate(draws):
        d["draw"] = i
    rules = tuple(first["settings"]["rules"])
    summary = summarise(draws, rules)
    kept = ("command", "machine", "load_average", "settings", "complete", "wall_seconds", "base")
    return {
        **{k: v for k, v in first.items() if k not in ("draws", "summary", "winner", "speaker_overlap")},
        "command": "python benchmarks/search_replication.py --merge " + " ".join(names),
        # a run stopped early keeps the draws it finished: the merge is complete when its set draws run without a
        # gap and none failed
        "complete": sorted(set_draws) == list(range(min(set_draws), min(set_draws) + len(set_draws)))
        and not any("error" in d for d in draws),
        "parts": [{"file": name, **{k: p.get(k) for k in kept}} for name, p in zip(names, parts)],
        "wall_seconds": round(sum(p.get("wall_seconds", 0.0) for p in parts), 1),
        "summary": summary,
        "winner": pick_rule.pick(summary),
        "speaker_overlap": speaker_overlap(draws),
        "draws": draws,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=8)
    parser.add_argument(
        "--jobs", type=int, default=None, help="draws at once (default: cores // 2, at most draws)"
    )
    parser.add_argument("--threads", type=int, default=None, help="threads per draw (default: cores // jobs)")
    parser.add_argument(
        "--first-draw", type=int, default=1, help="draw d builds set draw first + d (0: the demo's own sets)"
    )
    parser.add_argument(
        "--rules",
        default=",".join(RULES),
        help=f"selection rules, comma separated (and {', '.join(CRITERION_RULES)}: the search judged by "
        "disagreement with FP32 on unlabelled dev audio)",
    )
    parser.add_argument(
        "--unlabelled-factor",
        type=int,
        default=3,
        help="with the disagreement rule: the dev set is built with this many times --dev-per-condition utterances "
        "per condition and imported whole as the unlabelled dev audio; every factor-th utterance of each condition "
        "and duration bucket is the labelled dev set (default 3)",
    )
    parser.add_argument(
        "--max-disagreement",
        type=float,
        default=None,
        help="with the disagreement rule: its budget in points of FP32's words (default: calibrated on the "
        "labelled dev set)",
    )
    parser.add_argument("--dev-per-condition", type=int, default=None, help="default: the demo's")
    parser.add_argument("--eval-per-condition", type=int, default=None, help="default: the demo's")
    parser.add_argument("--calib-per-condition", type=int, default=None, help="default: the demo's (100)")
    parser.add_argument("--quick", action="store_true", help="fewer resamples, no finer step (smoke runs)")
    parser.add_argument(
        "--no-reuse",
        action="store_true",
        help="transcribe each plan in every search (default: once per draw, shared by the rules' searches)",
    )
    parser.add_argument(
        "--workspace", type=Path, help="where the sets and searches go (required unless --merge)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="combine the draws of these results (runs of other --first-draw, same settings) into --out instead",
    )
    args = parser.parse_args(argv)

    from workbench.artifacts import json_text, write_text_atomic

    if args.merge:
        try:
            merged = merge(
                [json.loads(path.read_text()) for path in args.merge], [str(p) for p in args.merge]
            )
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: cannot merge {' '.join(map(str, args.merge))}: {exc}", file=sys.stderr)
            return 1
        write_text_atomic(args.out, json_text(merged))
        print(pick_rule.table(merged))
        print(f"wrote {args.out}")
        return 0
    if args.workspace is None:
        parser.error("--workspace is required (unless --merge)")
    from workbench.config import DEMO_DEV_PER_CONDITION, DEMO_EVAL_PER_CONDITION, SetBuildConfig

    rules = tuple(r.strip() for r in args.rules.split(",") if r.strip())
    bad = [r for r in rules if r not in RULES + CRITERION_RULES]
    if bad or not rules or args.draws < 1:
        parser.error(f"--rules from {', '.join(RULES + CRITERION_RULES)}; --draws at least 1")
    if "disagreement" in rules and args.unlabelled_factor < 1:
        parser.error("--unlabelled-factor must be at least 1")
    cores = os.cpu_count() or 1
    jobs = args.jobs or max(1, min(args.draws, cores // 2))
    threads = args.threads or max(1, cores // jobs)
    calib = args.calib_per_condition or SetBuildConfig().calib_per_condition
    settings = {
        "workspace": str(args.workspace),
        "calib_per_condition": calib,
        "rules": rules,
        "threads": threads,
        "quick": args.quick,
        "reuse": not args.no_reuse,
        "dev_per_condition": args.dev_per_condition or DEMO_DEV_PER_CONDITION,
        "eval_per_condition": args.eval_per_condition or DEMO_EVAL_PER_CONDITION,
        # the disagreement rule's unlabelled dev audio and budget (None: the rule is off)
        "unlabelled_factor": args.unlabelled_factor if "disagreement" in rules else None,
        "max_disagreement": args.max_disagreement if "disagreement" in rules else None,
    }
    args.workspace.mkdir(parents=True, exist_ok=True)
    began, cpu0 = time.perf_counter(), cpu_seconds()
    base = prepare_base(args.workspace, calib, args.quick, min(cores, 16))
    base["cpu_seconds"] = round(cpu_seconds() - cpu0, 1)
    print(
        f"base ready in {time.perf_counter() - began:.0f} s ({base['cpu_seconds']:.0f} CPU-s): {base['seconds']}",
        flush=True,
    )
    seeds = [(d, args.first_draw + d) for d in range(args.draws)]
    draws: list[dict[str, Any]] = []
    command = "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    meta = {"command": command, "settings": {**settings, "jobs": jobs, "first_draw": args.first_draw}}

    def write(final: bool) -> dict[str, Any]:
        """The results so far (after every draw, so a run cut short keeps what finished)."""
        import onnxruntime

        done = sorted(draws, key=lambda d: d["draw"])
        summary = summarise(done, rules)
        result = {
            "benchmark": "search_replication",
            **meta,
            "complete": final and len(done) == args.draws,
            "machine": f"{platform.machine()}, {cores} cores, Python {platform.python_version()}, onnxruntime "
            f"{onnxruntime.__version__}",
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "base": base,
            "what_varies": "per draw (SetBuildConfig.draw, seed 0): which of the speakers never in calibration are "
            "evaluation and which dev speakers (the basic voices' dev half stays dev), dev and evaluation texts, noise, "
            "levels and the voice of each utterance; the model, calibration set (its content hash checked per draw), "
            "cache and sensitivity ranking are the demo's for every draw",
            "target": {
                "pass_rate": pick_rule.TARGET_PASS_RATE,
                "mean_int8_macs_share": pick_rule.TARGET_INT8_SHARE,
            },
            "gates": "default: overall +0.3 pts, each condition +1.0 pts on the upper end of the 95% interval; the "
            "evidence rule of workbench.evaluate.evidence",
            **({"dev_criteria": DEV_CRITERIA} if "disagreement" in rules else {}),
            "summary": summary,
            "costs": COSTS
            if settings["reuse"]
            else "each search transcribes every plan it reads (--no-reuse)",
            "winner": pick_rule.pick(summary),
            "speaker_overlap": speaker_overlap(done),
            "draws": done,
            "wall_seconds": round(time.perf_counter() - began, 1),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out, json_text(result))
        return result

    if jobs == 1:
        for d, s in seeds:
            draws.append(_draw_or_error(d, s, settings, base))
            write(final=False)
    else:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_draw_or_error, d, s, settings, base) for d, s in seeds]
            for future in as_completed(futures):
                row = future.result()
                draws.append(row)
                print(f"draw {row['draw']} done: {row.get('error') or row.get('wall_seconds')}", flush=True)
                write(final=False)
    result = write(final=True)
    print(pick_rule.table(result))
    print(f"wrote {args.out}")
    return 0 if all("error" not in d for d in draws) else 1


if __name__ == "__main__":
    sys.exit(main())
