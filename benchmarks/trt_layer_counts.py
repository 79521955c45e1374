"""TensorRT-RTX build (CPU, no GPU) of the demo model's variants: layer counts by precision.

Issue 17's check that the non-compute layers of the FP16, INT8 and mixed variants run in FP16 in a strongly
typed network: a small synthetic calibration set (TTS), the calibrate job (export, percentile 99.99 cache,
the FP16 guard, the INT8 and FP16 variants), a mixed plan (the feature encoder's convolutions in FP16, the
rest INT8, with the guard's FP32 nodes), then the build job for each variant with TensorRT-RTX, profile
batch 1-2 x 1-2-4 s. Per variant: compute layers by precision, every other layer by the float type it
computes in (``PrecisionSummary.layer_precisions``: Q/DQ, Cast and Constant layers apart), the number of
ONNX nodes the plan keeps FP32 and why. These are counts, not timings; the load average is recorded anyway.

    python benchmarks/trt_layer_counts.py                # writes benchmarks/results/trt_rtx_layer_counts.json
    python benchmarks/trt_layer_counts.py --work /tmp/trt-counts --out /tmp/counts.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import load_averages  # noqa: E402

RESULTS = HERE / "results" / "trt_rtx_layer_counts.json"
FLOATS = ("fp16", "fp32", "bf16", "fp8")


def variants(work: Path, per_condition: int, seed: int) -> tuple[dict[str, Path], dict[str, Any]]:
    """fp32 / fp16 / int8 / mixed ONNX files of the demo model, and what they were made from."""
    import onnx

    from workbench.calibration import cache as cache_mod
    from workbench.calibration.methods import MethodSpec
    from workbench.config import SetBuildConfig
    from workbench.errors import WorkbenchError
    from workbench.jobs import calibrate
    from workbench.quantize.plan import PrecisionPlan, quantizable_nodes
    from workbench.quantize.qdq import build_variant
    from workbench.resources import demo_model_dir
    from workbench.speech.builder import build_synthetic_sets
    from workbench.speech.tts import available_voices

    if not available_voices():
        raise WorkbenchError(
            "no TTS engine installed (run ./setup.sh): the calibration set is synthetic speech"
        )
    built = build_synthetic_sets(
        SetBuildConfig(name="trtcount", calib_per_condition=per_condition, eval_per_condition=1, seed=seed),
        root=work / "sets",
    )
    result = calibrate.run(
        calibrate.CalibrateInputs(
            demo_model_dir(),
            str(built.calib.path),
            MethodSpec("percentile", 99.99),
            engines=work / "engines",
            calib_root=work / "sets",
        )
    )
    model = onnx.load(str(result.fp32_onnx), load_external_data=False)
    encoder = {n: "fp16" for n in quantizable_nodes(model) if "feature_extractor" in n}
    mixed = build_variant(
        result.fp32_onnx,
        cache_mod.load(result.cache).amax(),
        PrecisionPlan("mixed", "int8", encoder).with_guard(result.guard),
        result.fp32_onnx.with_name("model.mixed.onnx"),
        with_plan=True,
    )
    made_from = {
        "calibration_set": {
            "name": built.calib.name,
            "content_hash": built.calib.content_hash,
            "utterances": len(built.calib.utterances),
        },
        "method": "percentile 99.99",
        "fp16_guard": result.guard,
        "mixed_plan": f"{len(encoder)} feature-encoder Conv nodes fp16, the rest int8",
    }
    return (
        {"fp32": result.fp32_onnx, "fp16": result.fp16_onnx, "int8": result.int8_onnx, "mixed": mixed},
        made_from,
    )


def count(path: Path, engines: Path) -> dict[str, Any]:
    from workbench.config import EngineProfile
    from workbench.jobs import build

    job = build.run(
        build.BuildInputs(
            path,
            batches=(1, 2),
            seconds=EngineProfile(1.0, 2.0, 4.0),
            flavour="tensorrt-rtx",
            engines_dir=engines,
            force=True,
        )
    )
    summary = job.build.summary
    return {
        "onnx": path.name,
        "compute": summary.compute_precisions(),
        "other": summary.layer_precisions(),
        "layer_types": summary.layer_types(),
        "layers": len(summary.layers),
        "build_time_s": round(job.build.build_time_s, 2),
        "tensorrt": f"{job.trt.flavour} {job.trt.version}",
    }


def table(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"{'variant':<8} {'compute layers':<22} {'other layers by precision':<34} {'Q / DQ':<10} cast",
        "-" * 84,
    ]
    for name, r in rows.items():
        compute = ", ".join(f"{k} {v}" for k, v in r["compute"].items())
        other = ", ".join(f"{k} {v}" for k, v in r["other"].items() if k in FLOATS + ("none",))
        types = r["layer_types"]
        lines.append(
            f"{name:<8} {compute:<22} {other:<34} "
            f"{types.get('QUANTIZE', 0):>3} / {types.get('DEQUANTIZE', 0):<4} {types.get('CAST', 0)}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="artifact folder (default: a temporary one)")
    parser.add_argument("--per-condition", type=int, default=4, help="calibration utterances per condition")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from workbench.artifacts import write_json_atomic
    from workbench.evaluate.machine import machine_info, package_versions
    from workbench.optional import has_module

    if not (has_module("tensorrt_rtx_bindings") or has_module("tensorrt")):
        print(
            "error: no TensorRT builder: pip install tensorrt-rtx-cu13-libs tensorrt-rtx-cu13-bindings",
            file=sys.stderr,
        )
        return 1
    load_before = load_averages()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="trt-counts-") as tmp:
        work = args.work or Path(tmp)
        files, made_from = variants(work, args.per_condition, args.seed)
        rows = {name: count(path, work / "engines" / "built") for name, path in files.items()}
    print(table(rows))
    record = {
        "benchmark": "trt_layer_counts",
        "command": " ".join(["python", *sys.argv]),
        "model": "demo (workbench.resources)",
        "profile": {"batches": [1, 2], "seconds": [1.0, 2.0, 4.0]},
        "made_from": made_from,
        "rows": rows,
        "machine": machine_info(),
        "packages": package_versions(),
        "loadavg_before": load_before,
        "loadavg_after": load_averages(),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    write_json_atomic(args.out, record)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
