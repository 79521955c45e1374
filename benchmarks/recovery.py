"""Accuracy-recovery study: how much INT8-everywhere loss each recovery technique removes.

For each configuration (``--configs``: ``off``, ``sq`` SmoothQuant with alpha searched per tensor, ``rr`` range
refinement, ``cs`` clipping search of the conv inputs, ``ss`` per-channel shift and scale of the conv and
one-sided MatMul inputs, ``bc`` bias correction, ``fp8`` every INT8 node's Q/DQ in FP8 E4M3 instead (run by ONNX
Runtime's CPU FP8 kernels: an emulation of an FP8 target), and combinations joined by ``+``; ``@METHOD`` sets the
range method of one configuration, e.g. ``bc@percentile:99.999``, else ``--method``) the command, in one process:

- demo model: calibrates on the calibration set with the range method (``workbench.calibration.recovery.recover``:
  one pass, a second one where SmoothQuant changed the graph; passes are shared between configurations),
  builds INT8 everywhere (or the speech preset) with the FP16 guard's FP32 nodes as the calibrate job does (bias
  correction for its INT8 nodes where asked) and evaluates it on the evaluation set:
  WER overall with the paired bootstrap delta vs FP32 and the default gates' verdict
  (``workbench.search.evaluator.DevEvaluator``; FP32 transcripts made once), plus logit KL on 2 calibration clips
  per condition;
- base-size model (``--base``: Wav2Vec2-base shape, random weights, so no WER): calibrates on ``--base-clips``
  clips per condition of the calibration set and measures, on other clips of it, the INT8-everywhere logit KL
  and SQNR (dB) of the logits and of every encoder layer's output (the LayerNormalization outputs no smoothing
  folded into).

Prints a table and writes ``benchmarks/results/recovery.json`` (machine, hashes, command, every row).

    python benchmarks/recovery.py                                        # demo, every configuration, 600 clips
    python benchmarks/recovery.py --eval-per-condition 50 --base         # smaller evaluation, plus base-size
    python benchmarks/recovery.py --no-demo --search --configs off,bc    # the demo's searched plan, on and off
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "recovery.json"
DEFAULT_CONFIGS = "off,sq,rr,bc,sq+rr,sq+rr+bc"


def options_of(config: str):
    from workbench.calibration.recovery import RecoveryOptions

    parts = set(config.partition("@")[0].split("+")) - {"off", "fp8", "preset"}
    unknown = parts - {"sq", "rr", "cs", "ss", "bc"}
    if unknown:
        raise SystemExit(
            f"error: unknown technique(s) {', '.join(sorted(unknown))} in {config!r}; use sq, rr, cs, ss, bc, fp8, "
            "preset"
        )
    return RecoveryOptions(
        smoothquant="auto" if "sq" in parts else None,
        bias_correction="bc" in parts,
        refine_ranges="rr" in parts,
        clip_search="cs" in parts,
        shift_scale="ss" in parts,
    )


def method_of(text: str):
    from workbench.calibration.methods import MethodSpec

    name, _, value = text.partition(":")
    return MethodSpec(name, float(value)) if value else MethodSpec(name)


def config_method(config: str, default: str) -> str:
    """The range method of a configuration: ``bc@mse`` -> ``mse``, ``bc`` -> ``default`` (``--method``)."""
    _, _, method = config.partition("@")
    return method or default


def runner_for(model, amax, config: str, threads, prepare, guard=None):
    """The variant runner of a configuration (``guard``: the FP16 guard's FP32 nodes, as the calibrate job and the
    sign-off's variants have them): ``fp8`` turns every INT8 node's Q/DQ into FP8 E4M3."""
    from workbench.compare.sensitivity import VariantRunner

    if "fp8" not in config.partition("@")[0].split("+"):
        return VariantRunner(model, amax, threads, prepare=prepare, guard=guard)

    class FP8Runner(VariantRunner):
        def model_bytes(self, plan):
            import onnx

            from workbench.quantize.fp8 import to_fp8

            data = super().model_bytes(plan)
            if plan.is_fp32:
                return data
            assert self._qdq_source is not None
            placements = plan.with_guard(self.guard).placements(self._qdq_source)
            nodes = {p.node for p in placements if p.precision == "int8"}
            return to_fp8(onnx.load_from_string(data), nodes, self._qdq_source).model.SerializeToString()

    return FP8Runner(model, amax, threads, prepare=prepare, guard=guard)


class PassMemo:
    """Calibration passes keyed by the graph's bytes: configurations that see the same graph share one pass."""

    def __init__(self, clips: list[np.ndarray], prepare, spec) -> None:  # histograms for every method
        self.clips, self.prepare, self.spec = clips, prepare, spec
        self.done: dict[str, tuple[Any, Any]] = {}
        self.passes = 0

    def __call__(self, model, channels):
        import onnx

        from workbench.calibration.runner import collect_statistics

        data = Path(model).read_bytes() if isinstance(model, Path) else model.SerializeToString()
        key = hashlib.sha256(data).hexdigest()
        if key not in self.done:
            source = model if isinstance(model, Path) else onnx.load_from_string(data)
            stats = collect_statistics(
                source,
                iter(self.clips),
                len(self.clips),
                with_histograms=True,
                bins=self.spec.bins,
                prepare=self.prepare,
                channels=channels,
            )
            self.done[key] = (stats, channels.tensors)
            self.passes += 1
        stats, tensors = self.done[key]
        channels.tensors = tensors
        return stats


def plan_of(config: str, model):
    """The plan a configuration judges: INT8 everywhere, or with ``preset`` the speech preset (the first
    feature-encoder conv and the CTC head in FP16, ``workbench.quantize.preset``)."""
    from workbench.quantize.plan import PrecisionPlan
    from workbench.quantize.preset import speech_preset

    if "preset" in config.partition("@")[0].split("+"):
        preset = speech_preset(model)
        return PrecisionPlan(f"preset-{config}", preset.default, preset.overrides)
    return PrecisionPlan(f"int8-{config}", "int8")


def variant_for(recovered, options, plan=None):
    """(FP32-side graph, ranges) the plan (default INT8 everywhere) is built from, with bias correction for its
    INT8 nodes where asked."""
    from workbench.quantize.plan import INT8

    model, record = recovered.model, {}
    if options.bias_correction or recovered.shifts:
        model, record = recovered.for_plan(plan or INT8, options.bias_correction)
    return model, record.get("bias_correction", {})


def kl_and_sqnr(reference: list[np.ndarray], candidate: list[np.ndarray]) -> dict[str, float]:
    """Mean per-frame KL(ref || cand) of softmaxed logits and SQNR (dB) of the raw logits."""
    kls, signal, noise = [], 0.0, 0.0
    for r, c in zip(reference, candidate):
        r, c = r.astype(np.float64), c.astype(np.float64)
        p = np.exp(r - r.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        q = np.exp(c - c.max(-1, keepdims=True))
        q /= q.sum(-1, keepdims=True)
        kls.append(np.sum(p * (np.log(p + 1e-12) - np.log(q + 1e-12)), -1).mean())
        signal += float(np.sum(r**2))
        noise += float(np.sum((r - c) ** 2))
    return {"kl": float(np.mean(kls)), "sqnr_db": 10 * float(np.log10(signal / max(noise, 1e-30)))}


def layer_outputs(
    model_bytes: bytes, names: list[str], inputs: list[np.ndarray]
) -> list[dict[str, np.ndarray]]:
    import onnx

    from workbench.backends.onnxruntime import session_with_outputs

    model = onnx.load_from_string(model_bytes)
    session = session_with_outputs(model, names)
    return [
        dict(zip(names, (v.astype(np.float32) for v in session.run(names, {"input_values": x}))))
        for x in inputs
    ]


def demo_rows(args, configs, saved=lambda rows: None) -> tuple[list[dict], dict]:
    import onnx

    from workbench.calibration.clip_search import scoring_rows
    from workbench.calibration.recovery import recover
    from workbench.compare.sensitivity import VariantRunner
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs.calibrate import export_or_reuse
    from workbench.model.description import describe_model
    from workbench.quantize.guard import guard_for_set
    from workbench.quantize.macs import node_macs, opt_samples
    from workbench.quantize.plan import FP32
    from workbench.resources import demo_model_dir
    from workbench.search.evaluator import DevEvaluator
    from workbench.speech.select import all_clips, clips_per_condition
    from workbench.speech.store import load_set

    description = describe_model(str(demo_model_dir()))
    fp32 = export_or_reuse(description, args.root)
    calib, evalset = load_set(args.calib_set), load_set(args.eval_set)
    eval_clips = (
        clips_per_condition(evalset, args.eval_per_condition)
        if args.eval_per_condition
        else all_clips(evalset)
    )
    damage_clips = clips_per_condition(calib, 2)
    spec = method_of(args.method)
    memo = PassMemo([a for _, a in calib.iter_audio()], description.prepare, spec)
    scoring = scoring_rows(calib.utterances, calib.audio, description.prepare)
    source = onnx.load(str(fp32))
    base_runner = VariantRunner(source, {}, args.threads, prepare=description.prepare)
    evaluator = DevEvaluator(
        base_runner,
        eval_clips,
        GateConfig(),
        resamples=args.resamples,
        seed=0,
        progress=False,
        model=description,
    )
    reference = base_runner.logits(FP32, damage_clips)
    macs = node_macs(source, opt_samples([u.duration_s for u in evalset.utterances]))
    guard, _ = guard_for_set(fp32, calib, fp32.parent, prepare=description.prepare)
    rows = []
    for config in configs:
        options = options_of(config)
        t0 = time.perf_counter()
        recovered = recover(fp32, memo, method_of(config_method(config, args.method)), options, scoring)
        plan = plan_of(config, source)
        model, bc_record = variant_for(recovered, options, plan.with_guard(guard))
        calibrate_s = time.perf_counter() - t0
        variants = runner_for(model, recovered.amax, config, args.threads, description.prepare, guard)
        evaluator.variants = variants
        ev = evaluator.evaluate(plan)
        damage = kl_and_sqnr(reference, variants.logits(plan, damage_clips))
        row = {
            "config": config,
            "method": config_method(config, args.method),
            "options": options.params().get("recovery"),
            "plan": plan.to_json(),
            "int8_macs_share": round(macs.int8_share(plan), 4),
            "passes": recovered.passes,
            "calibrate_wall_s": round(calibrate_s, 1),
            "utterances": ev.utterances,
            "wer": _points(ev.overall.wer),
            "delta": _points(ev.overall.delta),
            "passed": ev.passed,
            "reasons": ev.reasons,
            "logits_on_calibration_clips": damage,
            "record": _summary(recovered.record, bc_record),
        }
        rows.append(row)
        saved(rows)
        d = row["delta"]
        print(
            f"demo {config:10s} WER {row['wer']['estimate']:.2f} % delta {d['estimate']:+.2f} "
            f"[{d['low']:+.2f}, {d['high']:+.2f}] {'PASS' if ev.passed else 'FAIL'}  KL {damage['kl']:.4f}",
            flush=True,
        )
    meta = {
        "model": str(demo_model_dir()),
        "model_hash": description.model_hash,
        "calibration_set": {
            "name": calib.name,
            "hash": calib.content_hash,
            "utterances": len(calib.utterances),
        },
        "eval_set": {"name": evalset.name, "hash": evalset.content_hash, "utterances": len(eval_clips)},
        "fp32_wer": _points(evaluator.baseline.overall.wer) if hasattr(evaluator, "baseline") else None,
        "calibration_passes": memo.passes,
        "fp16_guard": guard,
    }
    return rows, meta


def _points(iv) -> dict[str, float] | None:
    return None if iv is None else {k: round(100 * getattr(iv, k), 3) for k in ("estimate", "low", "high")}


def _summary(record: dict, bc_record: dict) -> dict:
    out: dict[str, Any] = {}
    if "smoothquant" in record:
        sq = record["smoothquant"]
        folds: dict[str, int] = {}
        alphas: dict[str, int] = {}
        for t in sq["tensors"].values():
            folds[t.get("fold", "none")] = folds.get(t.get("fold", "none"), 0) + 1
            alphas[str(t["alpha"])] = alphas.get(str(t["alpha"]), 0) + 1
        out["smoothquant"] = {
            "targets": sq["targets"],
            "smoothed": sq["smoothed"],
            "folds": folds,
            "alphas": alphas,
        }
    if "refine_ranges" in record:
        rr = record["refine_ranges"]
        picked: dict[str, int] = {}
        for c in rr["changes"].values():
            picked[c["method"]] = picked.get(c["method"], 0) + 1
        out["refine_ranges"] = {"tensors": rr["tensors"], "changed": rr["changed"], "picked": picked}
    for search in ("clip_search", "shift_scale"):  # per-tensor searches: each tensor's pick
        if search in record:
            found = record[search]
            out[search] = {
                "tensors": found["tensors"],
                "changed": found["changed"],
                "picked": {t: c["candidate"] for t, c in found["choices"].items()},
            }
    if bc_record.get("nodes") is not None:
        out["bias_correction"] = {"nodes": bc_record["nodes"], "max_shift": bc_record["max_shift"]}
    return out


def search_rows(args, configs) -> tuple[list[dict], dict]:
    """Per configuration, the demo's flow with that recovery: calibrate (the calibrate job, FP16 guard and all),
    compare (sensitivity ranking), search on the dev set as the demo runs it, then the sign-off (greedy, no
    latency) of FP32, INT8 everywhere and the found plan on the evaluation set with the default gates."""
    from workbench.jobs import calibrate, compare, search, signoff
    from workbench.resources import demo_model_dir
    from workbench.speech.store import load_set

    calib, evalset = load_set(args.calib_set), load_set(args.eval_set)
    dev = load_set(args.dev_set)
    engines, reports = args.root, args.root.parent / "recovery-reports"
    rows = []
    for config in configs:
        options = options_of(config)
        method = method_of(config_method(config, args.method))
        t0 = time.perf_counter()
        made = calibrate.run(
            calibrate.CalibrateInputs(
                demo_model_dir(), str(calib.path), method, engines=engines, recovery=options
            )
        )
        analysis = {
            "model": demo_model_dir(),
            "calib_set": str(calib.path),
            "method": method.name,
            "cache": made.cache,
            "engines": engines,
            "progress": False,
            "threads": args.threads,
        }
        ranked = compare.run(compare.CompareInputs(**analysis, per_condition=2, layers=False))
        found = search.run(
            search.SearchInputs(
                **analysis,
                signoff_set=str(evalset.path),
                dev_set=str(dev.path),
                sensitivity=ranked.files["sensitivity_json"],
                refine=0,
                finer=args.finer,
                confirm=args.confirm,
                resamples=args.resamples,
            )
        ).data
        search_s = time.perf_counter() - t0
        plan = found["found"]
        candidates = [("fp32", made.fp32_onnx), ("int8", made.int8_onnx)]
        if plan:
            candidates.append(("mixed", Path(plan["onnx_path"])))
        record = signoff.run(
            signoff.SignoffInputs(
                eval_set=str(evalset.path),
                out_dir=reports / f"signoff-{config.replace('@', '_').replace(':', '_')}",
                candidates=candidates,
                model=demo_model_dir(),
                calib_set=str(calib.path),
                cache=made.cache,
                engines=engines,
                latency=None,
                threads=args.threads,
            )
        ).record
        accuracy = record["accuracy"]["candidates"]
        signed = {
            v["candidate"]: {
                "passed": v["passed"],
                "summary": v["summary"],
                "delta": _points_json(accuracy[v["candidate"]]["overall"]["delta"]),
                "wer": _points_json(accuracy[v["candidate"]]["overall"]["wer"]),
            }
            for v in record["verdicts"]
            if v["candidate"] in accuracy
        }
        row = {
            "config": config,
            "method": config_method(config, args.method),
            "options": options.params().get("recovery"),
            "search_wall_s": round(search_s, 1),
            "search_recovery": found.get("recovery"),
            "found": None
            if not plan
            else {
                "name": plan["name"],
                "int8_macs_share": plan["int8_macs_share"],
                "int8_share": plan["int8_share"],
                "fp16_groups": plan["fp16_groups"],
                "fp16_parts": plan["fp16_parts"],
                "recovery": plan.get("recovery"),
            },
            "evaluations": found["evaluations"],
            "confirmation": found.get("confirmation"),
            "signoff": signed,
            "signoff_line": record["decision"]["line"] if record.get("decision") else None,
        }
        rows.append(row)
        macs = plan["int8_macs_share"] if plan else None
        mixed = signed.get("mixed", {})
        print(
            f"search {config:10s} found {'none' if not plan else f'{macs * 100:.1f}% of MACs in INT8'}; "
            f"sign-off mixed {mixed.get('delta')} {'PASS' if mixed.get('passed') else 'FAIL'}; "
            f"int8 {signed.get('int8', {}).get('delta')}",
            flush=True,
        )
    meta = {
        "model_hash": made.model.model_hash if made.model else None,
        "calibration_set": {"name": calib.name, "hash": calib.content_hash},
        "dev_set": {"name": dev.name, "hash": dev.content_hash, "utterances": len(dev.utterances)},
        "eval_set": {
            "name": evalset.name,
            "hash": evalset.content_hash,
            "utterances": len(evalset.utterances),
        },
        "search_settings": {
            "refine": 0,
            "finer": args.finer,
            "confirm": args.confirm,
            "resamples": args.resamples,
            "as": "the demo's",
        },
    }
    return rows, meta


def _points_json(iv: dict | None) -> dict | None:
    """An interval's JSON (fractions) in points."""
    return None if iv is None else {k: round(100 * iv[k], 3) for k in ("estimate", "low", "high") if k in iv}


def base_rows(args, configs) -> tuple[list[dict], dict]:
    import onnx

    from workbench.calibration.clip_search import scoring_rows
    from workbench.calibration.recovery import recover
    from workbench.compare.sensitivity import VariantRunner
    from workbench.jobs.calibrate import export_or_reuse
    from workbench.model.description import describe_model
    from workbench.model.synthetic import save_random_wav2vec2
    from workbench.quantize.plan import FP32, PrecisionPlan
    from workbench.speech.select import clips_per_condition
    from workbench.speech.store import load_set

    folder = args.root / "base-model"
    if not (folder / "config.json").exists():
        save_random_wav2vec2(folder, "base", seed=0)
    description = describe_model(str(folder))
    fp32 = export_or_reuse(description, args.root)
    calib = load_set(args.calib_set)
    clips = clips_per_condition(calib, args.base_clips * 2)
    calib_audio = [c.audio for k, c in enumerate(clips) if k % 2 == 0]
    test_clips = [c for k, c in enumerate(clips) if k % 2 == 1]
    spec = method_of(args.method)
    memo = PassMemo(calib_audio, description.prepare, spec)
    source = onnx.load(str(fp32))
    layer_names = [
        n.output[0]
        for n in source.graph.node
        if n.op_type == "LayerNormalization" and "/encoder/layers." in n.name and "final_layer_norm" in n.name
    ]
    inputs = [description.prepare(c.audio)[None] for c in test_clips]
    fp32_runner = VariantRunner(source, {}, args.threads, prepare=description.prepare)
    reference_logits = fp32_runner.logits(FP32, test_clips)
    reference_layers = layer_outputs(source.SerializeToString(), layer_names, inputs)
    rows = []
    for config in configs:
        options = options_of(config)
        scoring = scoring_rows(calib_audio, lambda a: a, description.prepare)
        recovered = recover(fp32, memo, method_of(config_method(config, args.method)), options, scoring)
        model, bc_record = variant_for(recovered, options)
        folded = {
            t
            for t, v in recovered.record.get("smoothquant", {}).get("tensors", {}).items()
            if v.get("fold") == "layernorm"
        }
        names = [n for n in layer_names if n not in folded]
        variants = runner_for(model, recovered.amax, config, args.threads, description.prepare)
        plan = PrecisionPlan(f"int8-{config}", "int8")
        logits = kl_and_sqnr(reference_logits, variants.logits(plan, test_clips))
        got = layer_outputs(variants.model_bytes(plan), names, inputs)
        sqnr = {}
        for name in names:
            s = sum(float(np.sum(r[name].astype(np.float64) ** 2)) for r in reference_layers)
            e = sum(
                float(np.sum((r[name].astype(np.float64) - g[name]) ** 2))
                for r, g in zip(reference_layers, got)
            )
            sqnr[name] = round(10 * float(np.log10(s / max(e, 1e-30))), 2)
        row = {
            "config": config,
            "passes": recovered.passes,
            "logits": logits,
            "layer_sqnr_db": {
                "mean": round(float(np.mean(list(sqnr.values()))), 2),
                "min": min(sqnr.values()),
                "per_layer": sqnr,
            },
            "record": _summary(recovered.record, bc_record),
        }
        rows.append(row)
        print(
            f"base {config:10s} logit KL {logits['kl']:.4f} SQNR {logits['sqnr_db']:.1f} dB, "
            f"layer SQNR mean {row['layer_sqnr_db']['mean']:.1f} min {row['layer_sqnr_db']['min']:.1f} dB",
            flush=True,
        )
    meta = {
        "model": "Wav2Vec2-base shape, random weights (workbench.model.synthetic.save_random_wav2vec2('base'))",
        "model_hash": description.model_hash,
        "calibration_clips": len(calib_audio),
        "test_clips": len(test_clips),
        "calibration_passes": memo.passes,
    }
    return rows, meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="comma separated (default: %(default)s)")
    parser.add_argument("--method", default="percentile:99.99", help="range method (default: %(default)s)")
    parser.add_argument("--calib-set", default="demo-calib")
    parser.add_argument("--eval-set", default="demo-eval")
    parser.add_argument("--eval-per-condition", type=int, default=0, help="0: the whole evaluation set")
    parser.add_argument("--no-demo", action="store_true", help="skip the demo model's INT8-everywhere rows")
    parser.add_argument(
        "--search",
        action="store_true",
        help="also, per configuration, the demo's calibrate, compare, search (dev set) and greedy sign-off of "
        "FP32, INT8 everywhere and the found plan on the evaluation set",
    )
    parser.add_argument("--dev-set", default="demo-dev", help="the search's dev set (with --search)")
    parser.add_argument("--finer", type=int, default=4, help="search --finer (with --search; the demo's 4)")
    parser.add_argument(
        "--confirm", type=float, default=0.0, help="search --confirm SHARE (with --search; default 0: off)"
    )
    parser.add_argument("--base", action="store_true", help="also the base-size random-weight model")
    parser.add_argument(
        "--base-clips", type=int, default=2, help="calibration clips per condition (base model)"
    )
    parser.add_argument("--root", type=Path, default=Path("/tmp/recovery-bench/engines"))
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for c in configs:
        options_of(c)

    from workbench.artifacts import write_json_atomic
    from workbench.evaluate.machine import machine_info, package_versions

    started = time.perf_counter()
    record: dict[str, Any] = {
        "benchmark": "accuracy recovery (INT8 everywhere, each technique on and off)",
        "command": "python benchmarks/recovery.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "method": args.method,
    }

    def save_partial(rows: list[dict]) -> None:  # rows so far survive an interrupted run
        write_json_atomic(args.out, {**record, "demo": {"rows": rows, "partial": True}})

    if not args.no_demo:
        rows, meta = demo_rows(args, configs, save_partial)
        record["demo"] = {**meta, "rows": rows}
    if args.search:
        rows, meta = search_rows(args, configs)
        record["search"] = {**meta, "rows": rows}
    if args.base:
        rows, meta = base_rows(args, configs)
        record["base"] = {**meta, "rows": rows}
    record["wall_s"] = round(time.perf_counter() - started, 1)
    record["machine"] = machine_info()
    record["packages"] = package_versions()
    write_json_atomic(args.out, record)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
