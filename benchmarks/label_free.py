"""Does the label-free check flag audio the labelled sign-off does not cover, and stay quiet on audio it does?

The demo model is calibrated on a fresh balanced calibration set (``data build``, seed ``--seed``) with the demo's
method (percentile 99.99), and three candidates are signed off on its evaluation set: FP32, INT8 everywhere and the
mixed plan with the FP16 groups of the demo's searched plan held fixed (``calibration_coverage.DEMO_FP16_GROUPS``).
Beside it, as ``--unlabelled-set``:

- shifted audio the model never heard: the held-out slices of ``training/evaluate_demo.py`` (festival voices,
  espeak-ng's other languages and variants, the GSM codec, the songs/literature texts), ``--per-slice`` clips each,
  synthesised here and imported whole as an unlabelled set (and, with its transcripts, as an evaluation set, to
  measure the real WER delta there);
- ``--draws`` fresh in-distribution draws: ``data build --seed SEED --draw k`` (k = 1..draws) with the same sizes,
  whose calibration set is byte for byte the evaluation's own (checked: the same content hash) and whose evaluation
  set deals the held-out speakers, texts, noise and levels again; each re-imported as an unlabelled set. A flag on a
  draw is a false alarm.

Then the bound is checked on every labelled set: the word edit distance to FP32 over the true reference words is
at least |WER delta| for every candidate. Writes ``benchmarks/results/label_free.json`` (sizes, machine, load
average, every set's disagreement, coverage and shift line, the real WER deltas, false alarms). Times are of a shared
machine.

    nice python benchmarks/label_free.py --per-slice 40 --draws 5 --calib-per-condition 24 --eval-per-condition 40
    python benchmarks/label_free.py --per-slice 4 --draws 1 --calib-per-condition 4 --eval-per-condition 3 --out /tmp/lf.json  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from calibration_coverage import DEMO_FP16_GROUPS  # noqa: E402
from common import cpu_seconds, load_averages  # noqa: E402

RESULTS = HERE / "results" / "label_free.json"
SHIFTED_SLICES = (
    "held-out voices/festival",
    "held-out voices/espeak languages",
    "held-out voices/espeak variants",
    "held-out channel/gsm codec",
    "held-out text/songs and literature",
)


def synthesise_shifted(folder: Path, per_slice: int, seed: int) -> dict[str, int]:
    """The held-out slices as a folder of WAV + TXT files with a speakers.tsv (one sub-folder per slice)."""
    import soundfile as sf

    from training.evaluate_demo import apply_channel, slices
    from workbench.errors import WorkbenchError
    from workbench.speech.conditions import mix_at_snr
    from workbench.speech.tts import Prosody, synthesize

    rng = np.random.default_rng(seed)
    table = slices()
    counts: dict[str, int] = {}
    speakers = []
    broken: set[str] = set()  # voices listed but not installed here (festival's HTS voices, say): left out
    for name in SHIFTED_SLICES:
        sl = table.get(name)
        if sl is None:
            continue
        sub = name.replace("/", "_").replace(" ", "-")
        i = 0
        while i < per_slice:
            voices = [v for v in sl.voices if v.speaker not in broken]
            if not voices:
                break
            voice = voices[int(rng.integers(len(voices)))]
            text = sl.texts[int(rng.integers(len(sl.texts)))]
            try:
                speech = synthesize(
                    voice, text, Prosody(float(rng.uniform(*sl.rate)), float(rng.uniform(35, 65)))
                )
            except WorkbenchError:
                broken.add(voice.speaker)
                continue
            speech = apply_channel(speech, sl.channel, rng)
            audio = mix_at_snr(
                speech, float(rng.uniform(30, 45)), float(rng.uniform(-35, -15)), "pink", rng
            ).audio
            rel = f"{sub}/{i:04d}.wav"
            (folder / sub).mkdir(parents=True, exist_ok=True)
            sf.write(str(folder / rel), audio, 16000, subtype="PCM_16")
            (folder / rel).with_suffix(".txt").write_text(text + "\n")
            speakers.append(f"{rel}\t{sub}:{voice.speaker}\tus")
            i += 1
        counts[name] = i
    counts["voices left out (not installed)"] = len(broken)
    (folder / "speakers.tsv").write_text("\n".join(speakers) + "\n")
    return counts


def split_shifted(shifted: Path, calib_manifest: Path, out: Path) -> tuple[Path, Path]:
    """The shifted audio's speakers in two halves (stable hash): one half joins the calibration set's clips in a
    calibration manifest, the other is a labelled evaluation manifest (no speaker in both)."""
    from workbench.speech.split import stable_hash

    speakers = dict(
        line.split("\t")[:2] for line in (shifted / "speakers.tsv").read_text().splitlines() if line.strip()
    )
    calib = []
    for line in calib_manifest.read_text().splitlines():
        r = json.loads(line)
        audio = str(calib_manifest.parent / r["audio"])
        calib.append({k: r[k] for k in ("text", "speaker", "accent", "condition")} | {"audio": audio})
    held = []
    for rel, speaker in sorted(speakers.items()):
        wav = shifted / rel
        entry = {"audio": str(wav), "text": wav.with_suffix(".txt").read_text().strip(), "speaker": speaker}
        (calib if stable_hash(speaker) % 2 == 0 else held).append({**entry, "condition": "shifted"})
    paths = (out / "remedy-calib.jsonl", out / "shifted-half.jsonl")
    for path, rows in zip(paths, (calib, held)):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def same_calibration(root: Path, reference: str, drawn: str) -> None:
    """Stop unless the draw's calibration set is the reference's, byte for byte (the same content hash): otherwise
    the draw is another population, not a fresh sample of the evaluation set's."""
    from workbench.speech.store import load_set

    want, got = load_set(reference, root=root).content_hash, load_set(drawn, root=root).content_hash
    if want != got:
        raise SystemExit(f"{drawn} is not {reference} (content hash {got[:12]} != {want[:12]}): not a draw")


REUSE = False  # --reuse: a set or report already in the workspace is kept (resuming a run on the same sizes)


def cli(env: dict[str, str], *args: str) -> str:
    """``python -m workbench ARGS`` in the benchmark's workspace; its output (a failure stops the benchmark). With
    ``REUSE``, a ``data`` verb whose set exists and a ``signoff`` whose report exists are skipped."""
    if REUSE and "--name" in args:
        ws = Path(env["WORKBENCH_WORKSPACE"]) / "calib_sets"
        name = args[args.index("--name") + 1]
        if (ws / name / "card.json").exists() or (ws / f"{name}-eval" / "card.json").exists():
            return ""
    if REUSE and args[0] == "signoff" and (Path(args[args.index("--out") + 1]) / "report.json").exists():
        return ""
    done = subprocess.run(
        [sys.executable, "-m", "workbench", *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"workbench {' '.join(args[:2])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def bound_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Per candidate on the labelled set: word edits to FP32 over the true reference words against |WER delta|."""
    labelled = record["label_free"]["labelled"]
    rows = []
    for name, cand in labelled["candidates"].items():
        overall = record["accuracy"]["candidates"][name]["overall"]
        words = overall["reference_words"]
        delta = overall["delta"]["estimate"]
        bound = cand["word_edits"] / words
        rows.append(
            {
                "set": labelled["set"],
                "candidate": name,
                "wer_delta": delta,
                "bound_true_reference": bound,
                "bound_estimated_reference": cand["wer_bound"]["estimate"],
                "holds": bound >= abs(delta) - 1e-12,
            }
        )
    return rows


def set_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for s in record["label_free"]["sets"]:
        cov = s["coverage"]
        out.append(
            {
                "set": s["set"],
                "utterances": s["utterances"],
                "fp32_confidence": s["confidence"],
                "beyond_labelled": s["beyond_labelled"],
                "coverage_moved": None if cov is None else cov["moved"],
                "tensors_left": None if cov is None else [m["tensor"] for m in cov["left"]],
                "flagged": bool(s["shift"]),
                "shift": s["shift"],
                "shift_tests": s.get("shift_tests"),
                "candidates": {
                    n: {
                        "disagreement": c["disagreement"],
                        "char_disagreement": c["char_disagreement"]["estimate"],
                        "changed_share": c["changed_share"],
                        "wer_bound": c["wer_bound"],
                        "estimate": None if c["estimate"] is None else c["estimate"]["estimate"],
                    }
                    for n, c in s["candidates"].items()
                },
            }
        )
    return out


RULES: dict[str, Any] = {
    "difference low > 0": lambda t, here, lab: t["difference"]["low"] > 0,
    "difference low > 0.5 points": lambda t, here, lab: t["difference"]["low"] > 0.005,
    "difference low > 1 point": lambda t, here, lab: t["difference"]["low"] > 0.01,
    "ratio low > 1.5": lambda t, here, lab: t["ratio"]["low"] is not None and t["ratio"]["low"] > 1.5,
    "ratio low > 2": lambda t, here, lab: t["ratio"]["low"] is not None and t["ratio"]["low"] > 2.0,
    "intervals do not overlap": lambda t, here, lab: here["low"] > lab["high"],
}


def rule_table(record: dict[str, Any], shifted: str, draws: list[str]) -> dict[str, Any]:
    """For each candidate shift rule: the candidates it flags on the shifted audio and on each draw (false alarms),
    from the shift tests in the record (the same bootstrap samples for every rule)."""
    lf = record["label_free"]
    labelled = lf["labelled"]["candidates"]
    sets = {s["set"]: s for s in lf["sets"]}
    out = {}
    for rule, flags in RULES.items():
        flagged = {}
        for name in [shifted, *draws]:
            s = sets[name]
            flagged[name] = [
                c
                for c, t in (s.get("shift_tests") or {}).items()
                if flags(t, s["candidates"][c]["disagreement"], labelled[c]["disagreement"])
            ]
        out[rule] = {
            "shifted_flags": flagged[shifted],
            "draw_flags": {d: flagged[d] for d in draws},
            "false_alarm_draws": sum(1 for d in draws if flagged[d]),
            "false_alarms_per_candidate": {c: sum(1 for d in draws if c in flagged[d]) for c in labelled},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-slice", type=int, default=40, help="shifted clips per held-out slice")
    parser.add_argument("--draws", type=int, default=5, help="fresh in-distribution draws")
    parser.add_argument("--calib-per-condition", type=int, default=24)
    parser.add_argument("--eval-per-condition", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/label-free-bench"), help="the workspace")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--remedy",
        action="store_true",
        help="also recalibrate with half of the shifted speakers (and keep the tensors that left their range in FP16) "
        "and sign off on the other half",
    )
    parser.add_argument("--reuse", action="store_true", help="keep the sets and reports already in --work")
    args = parser.parse_args(argv)
    global REUSE
    REUSE = args.reuse

    from workbench.artifacts import write_json_atomic
    from workbench.calibration.cache import load as load_cache
    from workbench.calibration.methods import MethodSpec
    from workbench.compare.groups import node_groups, plan_for
    from workbench.jobs import calibrate
    from workbench.project.demo import DEMO_METHOD, DEMO_PERCENTILE
    from workbench.quantize.qdq import build_variant
    from workbench.resources import demo_model_dir

    started, cpu0, load0 = time.perf_counter(), cpu_seconds(), load_averages()
    ws = args.work
    ws.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WORKBENCH_WORKSPACE": str(ws)}
    os.environ["WORKBENCH_WORKSPACE"] = str(ws)
    size = [
        "--calib-per-condition",
        str(args.calib_per_condition),
        "--eval-per-condition",
        str(args.eval_per_condition),
    ]
    cli(env, "data", "build", "--name", "lf", *size, "--seed", str(args.seed))
    shifted = ws / "shifted-audio"
    if shifted.exists():  # made by an earlier run in this workspace: count what it holds
        counts = {d.name: len(list(d.glob("*.wav"))) for d in sorted(shifted.iterdir()) if d.is_dir()}
    else:
        counts = synthesise_shifted(shifted, args.per_slice, args.seed)
    for role, name in (("unlabelled", "shifted-u"), ("eval", "shifted-e")):
        cli(env, "data", "import", "--name", name, "--role", role, "--source", "folder", "--path", str(shifted),
            "--no-progress", "--skip-implausible")  # fmt: skip
    draws = []
    for k in range(args.draws):
        # draw k+1 of the seed: the same calibration set (bytes), evaluation speakers dealt again among those never in
        # calibration, new texts, noise and levels: a fresh sample of lf-eval's population
        cli(env, "data", "build", "--name", f"draw{k}", *size, "--seed", str(args.seed), "--draw", str(k + 1))
        same_calibration(ws / "calib_sets", "lf-calib", f"draw{k}-calib")
        cli(env, "data", "import", "--name", f"draw{k}-u", "--role", "unlabelled", "--source", "manifest",
            "--path", str(ws / "calib_sets" / f"draw{k}-eval" / "manifest.jsonl"), "--no-progress")  # fmt: skip
        draws.append(f"draw{k}-u")
    result = calibrate.run(
        calibrate.CalibrateInputs(str(demo_model_dir()), "lf-calib", MethodSpec(DEMO_METHOD, DEMO_PERCENTILE))
    )
    import onnx

    fp32 = onnx.load(str(result.fp32_onnx))
    groups = node_groups(fp32, "group")
    mixed_plan = plan_for("mixed-demo-fp16-groups", groups, "fp16", "int8", set(DEMO_FP16_GROUPS))
    amax = load_cache(result.cache).amax()
    mixed = build_variant(fp32, amax, mixed_plan, ws / "engines" / "mixed-demo-groups.onnx")
    candidates = ["--candidate", f"fp32={result.fp32_onnx}", "--candidate", f"int8={result.int8_onnx}",
                  "--candidate", f"mixed={mixed}"]  # fmt: skip
    # a synthesised clip can fall just outside the calibration set's 1-8 s profile: it is scored (the report says so)
    common = [*candidates, "--calib-set", "lf-calib", "--cache", str(result.cache), "--no-latency", "--as-given",
              "--resamples", str(args.resamples), "--outside-profile", "score"]  # fmt: skip
    unl = [a for s in ["shifted-u", *draws] for a in ("--unlabelled-set", s)]
    records = {}
    for eval_name, extra in (
        ("lf-eval", unl),
        ("shifted-e", ["--unlabelled-set", draws[0]] if draws else []),
    ):
        out = ws / "reports" / eval_name
        cli(env, "signoff", "--eval-set", eval_name, *common, *extra, "--out", str(out))
        records[eval_name] = json.loads((out / "report.json").read_text())
    main_record = records["lf-eval"]
    sets = set_rows(main_record)
    by_set = {s["set"]: s for s in sets}
    real_delta = {
        n: c["overall"]["delta"]["estimate"]
        for n, c in records["shifted-e"]["accuracy"]["candidates"].items()
        if c["overall"]["delta"] is not None
    }
    verdicts = {v["candidate"]: v["summary"] for v in main_record["verdicts"]}
    record = {
        "what": "label-free check of the demo model: flags on shifted audio, false alarms on fresh draws, the bound",
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "sizes": {
            "calib_per_condition": args.calib_per_condition,
            "eval_per_condition": args.eval_per_condition,
            "shifted_per_slice": args.per_slice,
            "shifted_slices": counts,
            "draws": args.draws,
            "resamples": args.resamples,
        },
        "mixed_plan_fp16_groups": list(DEMO_FP16_GROUPS),
        "labelled_verdicts_on_lf_eval": verdicts,
        "shifted": by_set.get("shifted-u"),
        "shifted_real_wer_delta": real_delta,
        "draws": [by_set[d] for d in draws],
        "false_alarms": {
            "flagged_draws": sum(1 for d in draws if by_set[d]["flagged"]),
            "disagreement_beyond": sum(1 for d in draws if by_set[d]["beyond_labelled"]),
            "coverage_moved": sum(1 for d in draws if by_set[d]["coverage_moved"]),
            "draws": len(draws),
        },
        "shifted_flagged": bool(by_set.get("shifted-u", {}).get("flagged")),
        "rules": rule_table(main_record, "shifted-u", draws),
        "bound": bound_rows(main_record) + bound_rows(records["shifted-e"]),
        "shift_rule": main_record["label_free"]["shift_rule"],
        "seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds": round(cpu_seconds() - cpu0, 1),
        "load_average_start": load0,
        "load_average_end": load_averages(),
        "machine": main_record["provenance"]["machine"],
        "note": "shared machine; times are not results",
    }
    if args.remedy:
        left = (by_set.get("shifted-u") or {}).get("tensors_left") or []
        record["remedy"] = remedy(env, ws, shifted, result, fp32, mixed_plan, common, left)
        record["seconds"] = round(time.perf_counter() - started, 1)  # the remedy included
        record["cpu_seconds"] = round(cpu_seconds() - cpu0, 1)
        record["load_average_end"] = load_averages()
    write_json_atomic(args.out, record)
    print(
        json.dumps(
            {k: record[k] for k in ("false_alarms", "shifted_flagged", "shifted_real_wer_delta", "rules")},
            indent=1,
        )
    )
    for row in record["bound"]:
        print(f"bound {row['set']:10} {row['candidate']:6} |delta| {abs(row['wer_delta']) * 100:5.2f} <= "
              f"{row['bound_true_reference'] * 100:5.2f}: {row['holds']}")  # fmt: skip
    return 0


def remedy(
    env: dict[str, str],
    ws: Path,
    shifted: Path,
    result: Any,
    fp32: Any,
    mixed_plan: Any,
    common: list[str],
    left: list[str],
) -> dict[str, Any]:
    """Recalibrate with half of the shifted speakers added to the calibration set, and keep the layers reading the
    tensors that left their range in FP16; sign off every variant on the other half against FP32."""
    from workbench.calibration.cache import load as load_cache
    from workbench.calibration.methods import MethodSpec
    from workbench.jobs import calibrate
    from workbench.project.demo import DEMO_METHOD, DEMO_PERCENTILE
    from workbench.quantize.plan import PrecisionPlan
    from workbench.quantize.qdq import build_variant
    from workbench.resources import demo_model_dir

    calib_manifest, held_manifest = split_shifted(
        shifted, ws / "calib_sets" / "lf-calib" / "manifest.jsonl", ws
    )
    cli(env, "data", "import", "--name", "remedy-calib", "--role", "calib", "--source", "manifest",
        "--path", str(calib_manifest), "--no-progress")  # fmt: skip
    cli(env, "data", "import", "--name", "shifted-half", "--role", "eval", "--source", "manifest",
        "--path", str(held_manifest), "--no-progress", "--skip-implausible")  # fmt: skip
    again = calibrate.run(
        calibrate.CalibrateInputs(
            str(demo_model_dir()), "remedy-calib", MethodSpec(DEMO_METHOD, DEMO_PERCENTILE)
        )
    )
    amax = load_cache(again.cache).amax()
    engines = ws / "engines"
    mixed_recal = build_variant(fp32, amax, mixed_plan, engines / "mixed-recalibrated.onnx")
    keep = {
        n.name
        for n in fp32.graph.node
        if set(n.input) & set(left) and n.op_type in ("MatMul", "Conv", "Gemm")
    }
    keep_plan = PrecisionPlan("mixed-keep", "int8", {**mixed_plan.overrides, **dict.fromkeys(keep, "fp16")})
    mixed_keep = build_variant(fp32, load_cache(result.cache).amax(), keep_plan, engines / "mixed-keep.onnx")
    extra = ["--candidate", f"int8-recal={again.int8_onnx}", "--candidate", f"mixed-recal={mixed_recal}",
             "--candidate", f"mixed-keep={mixed_keep}"]  # fmt: skip
    out = ws / "reports" / "remedy"
    cli(env, "signoff", "--eval-set", "shifted-half", *common, *extra, "--out", str(out))
    rec = json.loads((out / "report.json").read_text())
    return {
        "what": "half of the shifted speakers added to the calibration set (recal) or the layers reading the tensors "
        "that left their range kept in FP16 (keep); signed off on the other half",
        "tensors_left": left,
        "nodes_kept_fp16": sorted(keep),
        "eval_utterances": rec["accuracy"]["candidates"]["fp32"]["overall"]["utterances"],
        "wer_delta": {
            n: {"estimate": c["overall"]["delta"]["estimate"], "high": c["overall"]["delta"]["high"]}
            for n, c in rec["accuracy"]["candidates"].items()
            if c["overall"]["delta"] is not None
        },
        "verdicts": {v["candidate"]: v["summary"] for v in rec["verdicts"]},
    }


if __name__ == "__main__":
    raise SystemExit(main())
