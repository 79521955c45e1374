"""Ray scale-out on one host: calibrate, compare (sensitivity), search and signoff without Ray and with
``--ray local:N`` for each N, on the same inputs; wall time, speed-up and parallel efficiency per step, the part
of each step that stays serial, and a check that every record equals the serial run's but for timings.

Each configuration runs in its own child process, pinned to ``N x --threads-per-worker`` cores (the serial run:
``--threads-per-worker`` cores), so every ONNX Runtime session has the same thread count in every configuration
(a run without Ray uses the cores it may run on; ``local:N`` shares them out among its N workers) and N workers
get N times the cores: a strong-scaling measurement. The child runs the four jobs one after the other (compare and
search reuse the calibration cache the calibrate step wrote, search the ranking compare wrote) and times phases by
wrapping the functions that hold them (nothing in the workbench is changed for it):

- ``work``: the part the Ray path replaces, timed in both modes: calibrate's statistics pass and the FP16 guard's
  float statistics pass (``collect_statistics`` and ``collect_float_stats`` / ``spread_pass``, which makes both), compare's ranking (``rank_groups``: the FP32 reference logits on the
  driver, then the variants), the search's dev-set transcriptions (``DevEvaluator._transcribe``), signoff's
  transcription (``transcribe_checked`` / ``spread_transcription``);
- with Ray: ``pool_start`` (Ray started, workers placed, the check set run on each), ``put`` (models and clips into
  the object store), ``sharded`` (shards in flight: ``WorkerPool.map``), ``pool_stop``;
- calibrate's serial parts on the driver, in both modes: ``export`` (the FP32 export, once per configuration),
  ``parity`` (PyTorch against ONNX Runtime), ``float_stats`` (the FP16 guard: its float statistics pass, where
  the driver makes it, and the guard's decisions).

Every configuration records the ONNX Runtime threads its sharded work's sessions get (``ort_threads``: the cores
the run without Ray may use; ``local:N``: those cores / N per worker): ONNX Runtime's float results depend on that
count, so records can be equal only where it is the same, and the table says so where it is not.

Derived per step and N: speed-up = serial wall / wall, efficiency = speed-up / N; the sharded part's speed-up =
the serial run's ``work`` / ``sharded`` (its efficiency the same over N); the serial fraction the Ray run keeps =
(wall - sharded) / wall (set loading, export, merges, the driver's reference logits, Ray's start, the files).

    python benchmarks/ray_scaling.py --calib-set WS/calib_sets/rs-calib --eval-set WS/calib_sets/rs-eval
    python benchmarks/ray_scaling.py ... --models demo,base --workers 1,2,4,8 --threads-per-worker 2 --kill
    python benchmarks/ray_scaling.py ... --gpu-worker       # ORT CUDA, one worker per GPU (1..GPU count)

``--repeat K`` makes the work larger without larger sets to ship: calibrate (and compare and search, which reuse its
cache) and signoff run on the sets with every utterance K times (written once under ``--work``; compare's clips are
the first of each condition, the same as given), search's dev set is the evaluation set as given.

``--kill``: after the measured runs, calibrate and signoff run once more at the largest N with one worker process
killed (SIGKILL) a quarter of the way into that step's measured sharded time; the record must still equal the serial
run's, and the run says how many workers were lost. ``base`` is a random-weight Wav2Vec2 of the base size (seed 0;
its transcripts are noise, its work is the base model's). Prints a table and writes ``--out``
(``benchmarks/results/ray_scaling.json``) with the host (CPU model, cores, flags, load average before and after).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import load_averages  # noqa: E402

RESULTS = HERE / "results" / "ray_scaling.json"
STARTED = time.perf_counter()
STEPS = ("calibrate", "compare", "search", "signoff")
KILL_STEPS = ("calibrate", "signoff")
# the machine fields a record takes from this process's CPU affinity, which differs by configuration (pinned)
PINNING_FIELDS = frozenset({"usable_cores"})
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8")


# ---- arguments


def number_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"give whole numbers of at least 1, comma separated, not {text!r}")
    return sorted(set(values))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calib-set", type=Path, help="calibration set folder (calibrate, compare)")
    parser.add_argument("--eval-set", type=Path, help="evaluation set folder (search's dev set, signoff)")
    parser.add_argument(
        "--models", default="demo", help="comma separated: demo, a synthetic size (base), a folder"
    )
    parser.add_argument("--workers", type=number_list, default=[1, 2, 4, 8], help="N of --ray local:N")
    parser.add_argument("--threads-per-worker", type=int, default=2)
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--method", default="entropy")
    parser.add_argument("--per-condition", type=int, default=4, help="compare: clips per condition")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="calibrate and signoff on the sets with every clip K times (written under --work; compare takes the "
        "same clips, search's dev set is the evaluation set as given)",
    )
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--gpu-worker", action="store_true", help="ORT CUDA, one Ray worker per GPU")
    parser.add_argument("--kill", action="store_true", help="kill a worker mid-step at the largest N")
    parser.add_argument("--deadline-s", type=float, default=None, help="start no configuration after this")
    parser.add_argument("--work", type=Path, default=Path("/tmp/ray-scaling"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a configuration's JSON (internal)
    args = parser.parse_args(argv)
    if args.child is None:
        if args.calib_set is None or args.eval_set is None:
            parser.error("--calib-set and --eval-set are required")
        args.steps = [s.strip() for s in args.steps.split(",") if s.strip()]
        unknown = sorted(set(args.steps) - set(STEPS))
        if unknown or not args.steps:
            parser.error(f"--steps takes {', '.join(STEPS)}, not {', '.join(unknown) or 'nothing'}")
        args.steps = [s for s in STEPS if s in args.steps]  # the order the jobs depend on
        if args.threads_per_worker < 1:
            parser.error("--threads-per-worker must be at least 1")
        if args.repeat < 1:
            parser.error("--repeat must be at least 1")
    return args


# ---- the child: one configuration, every step, phases timed


@dataclass
class Clock:
    """Seconds per phase of the current step (``wrap`` times a function, ``wrap_pool`` a worker pool's life)."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    bounds: list[dict[str, Any]] = field(default_factory=list)  # per weighted map: the balance bound

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
        self.calls[phase] = self.calls.get(phase, 0) + 1

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        real = getattr(owner, name)
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                clock.add(phase, time.perf_counter() - start)

        setattr(owner, name, timed)

    def wrap_pool(self, module: Any) -> None:
        real = module.open_pool
        clock = self

        @contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            start = time.perf_counter()
            with ExitStack() as stack:
                pool = stack.enter_context(real(*args, **kwargs))
                clock.add("pool_start", time.perf_counter() - start)
                yield pool
                stop = time.perf_counter()
            clock.add("pool_stop", time.perf_counter() - stop)

        module.open_pool = timed

    def taken(self) -> dict[str, Any]:
        out = {"seconds": {k: round(v, 4) for k, v in self.seconds.items()}, "calls": dict(self.calls)}
        if self.bounds:
            out["balance_bound"] = min(b["bound"] for b in self.bounds)
            out["maps"] = self.bounds
        self.seconds, self.calls, self.bounds = {}, {}, []
        return out


def instrument(clock: Clock) -> None:
    """Wrap the functions whose time the phases are (see the module docstring)."""
    import workbench.cluster.calibrate as ccal
    import workbench.cluster.compare as ccmp
    import workbench.cluster.search as csea
    import workbench.cluster.signoff as csig
    import workbench.jobs.calibrate as jcal
    import workbench.jobs.compare as jcmp
    import workbench.jobs.signoff as jsig
    import workbench.quantize.guard as guard
    from workbench.cluster.pool import WorkerPool
    from workbench.search.evaluator import DevEvaluator

    for module in (ccal, ccmp, csea, csig):
        clock.wrap_pool(module)
    clock.wrap(WorkerPool, "map", "sharded")
    bound_of_maps(clock)
    clock.wrap(WorkerPool, "put", "put")
    clock.wrap(jcal, "export_or_reuse", "export")
    clock.wrap(jcal, "checked_parity", "parity")
    clock.wrap(jcal, "guard_for_set", "float_stats")
    clock.wrap(jcal, "collect_statistics", "work")
    clock.wrap(guard, "collect_float_stats", "work")  # made in the Ray pass's shards
    clock.wrap(jcal, "spread_pass", "work")
    clock.wrap(jcmp, "rank_groups", "work")
    clock.wrap(DevEvaluator, "_transcribe", "work")
    clock.wrap(jsig, "transcribe_checked", "work")
    clock.wrap(csig, "spread_transcription", "work")


def bound_of_maps(clock: Clock) -> None:
    """Record, for each ``WorkerPool.map`` with weights, the efficiency its shard plan allows on its workers
    (``dispatch_bound``, weights in audio samples): the ceiling that balance, not speed, puts on the step."""
    from workbench.cluster.pool import WorkerPool
    from workbench.cluster.shards import dispatch_bound

    real = WorkerPool.map

    def map_with_bound(pool: Any, tasks: Any, what: str, weights: Any = None) -> Any:
        if weights is not None and len(pool.workers):
            clock.bounds.append(
                {
                    "what": what,
                    "tasks": len(tasks),
                    "workers": len(pool.workers),
                    "bound": round(dispatch_bound(weights, len(pool.workers)), 3),
                }
            )
        return real(pool, tasks, what, weights)

    setattr(WorkerPool, "map", map_with_bound)  # noqa: B010


def killer(clock: Clock, after_s: float, lost: list[str]) -> None:
    """Kill one worker ``after_s`` into the step's first ``WorkerPool.map`` (SIGKILL of its process)."""
    from workbench.cluster.pool import WorkerPool

    real = WorkerPool.map
    fired: list[int] = []

    def map_and_kill(pool: Any, tasks: Any, what: str, weights: Any = None) -> Any:
        if not fired and len(pool.workers) > 1:
            pid = pool.workers[-1].pid
            fired.append(pid)
            timer = threading.Timer(after_s, lambda: os.kill(pid, signal.SIGKILL))
            timer.start()
        result = real(pool, tasks, what, weights)
        lost.extend(pool.lost)
        return result

    setattr(WorkerPool, "map", map_and_kill)  # noqa: B010


def repeated_sets(calib: Path, evaluation: Path, times: int, root: Path) -> tuple[Path, Path]:
    """The pair with every utterance ``times`` times (the originals first, then copies ``<id>-r<k>`` with the same
    audio), written once under ``root``; the pair as given for ``times`` 1."""
    from dataclasses import replace

    from workbench.speech.records import Clip
    from workbench.speech.store import SetSpec, load_set, made_record, write_sets

    if times == 1:
        return calib, evaluation
    finals = [root / f"{p.name}-x{times}" for p in (calib, evaluation)]
    if all((f / "card.json").is_file() for f in finals):
        return finals[0], finals[1]
    specs = []
    for source, final, partner in zip((calib, evaluation), finals, reversed(finals)):
        found = load_set(source)
        clips = [
            Clip(
                replace(u, id=u.id if k == 0 else f"{u.id}-r{k}", fixes=list(u.fixes), extra=dict(u.extra)),
                audio,
            )
            for k in range(times)
            for u, audio in found.iter_audio()
        ]
        made = made_record(
            str(found.card["made"].get("role", "")), "repeated", {"of": str(source), "times": times}
        )
        specs.append(SetSpec(final, clips, made, [], {**found.card["checks"], "paired_with": partner.name}))
    write_sets(specs)
    return finals[0], finals[1]


def model_folder(name: str, work: Path) -> str:
    from workbench.model.synthetic import SIZES, save_random_wav2vec2
    from workbench.resources import demo_model_dir

    if name == "demo":
        return str(demo_model_dir())
    if name in SIZES:
        folder = work / f"model-{name}"
        if not (folder / "config.json").is_file():
            save_random_wav2vec2(folder, name, seed=0)
        return str(folder)
    return name


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def relative(value: Any, run: Path) -> Any:
    """``value`` with this configuration's folder written ``<run>`` (each configuration writes to its own)."""
    return json.loads(json.dumps(value, default=str).replace(str(run), "<run>"))


def calibrate_record(result: Any) -> dict[str, Any]:
    import numpy as np

    from workbench.calibration import cache, histograms

    loaded = cache.load(result.cache)
    record: dict[str, Any] = {
        "scales": loaded.scales,
        "convergence": loaded.convergence,
        "int8_onnx_sha256": hashlib.sha256(result.int8_onnx.read_bytes()).hexdigest(),
    }
    hist_path = histograms.histogram_path(result.cache)
    if hist_path.is_file():
        h = histograms.load(hist_path)
        both = np.nan_to_num(np.asarray(h.range_max, dtype=np.float64), nan=-1.0)
        record["histograms_sha256"] = hashlib.sha256(
            json.dumps(list(h.names)).encode() + np.ascontiguousarray(h.counts).tobytes() + both.tobytes()
        ).hexdigest()
    return record


def run_child(config: dict[str, Any]) -> dict[str, Any]:
    """Every step of one configuration (``ray``: None or ``local:N``); the records, normalised, go to files."""
    from workbench.calibration.methods import MethodSpec
    from workbench.cluster.records import TIMING_FIELDS
    from workbench.cluster.records import without_timing as timeless
    from workbench.jobs import calibrate, search, signoff
    from workbench.jobs.compare import run_compare
    from workbench.jobs.prepare import prepare
    from workbench.speech.store import load_set

    run = Path(config["run"])
    run.mkdir(parents=True, exist_ok=True)

    def without_timing(record: Any) -> Any:  # and the cores this configuration was pinned to
        return timeless(record, TIMING_FIELDS | PINNING_FIELDS)

    clock = Clock()
    instrument(clock)
    lost: list[str] = []
    ray, backend = config["ray"], config["backend"]
    calib_root, calib_name = Path(config["calib_set"]).parent, Path(config["calib_set"]).name
    eval_root, eval_name = Path(config["eval_set"]).parent, Path(config["eval_set"]).name
    model = config["model"]
    engines = Path(config.get("engines") or run / "engines")
    from workbench.backends.onnxruntime import available_cores

    # the ONNX Runtime threads of a run without Ray, and the cores local:N shares out among its workers
    workers = int(ray.split(":")[1]) if ray else 1
    out: dict[str, Any] = {
        "steps": {},
        "affinity": len(os.sched_getaffinity(0)),
        "available_cores": available_cores(),
        # what the ONNX Runtime sessions of the sharded work get (``open_pool``): records equal only at one count
        "ort_threads": available_cores() if not ray else max(1, available_cores() // workers),
    }
    built: Any = None
    sensitivity: Path | None = None

    def step(name: str, body: Any) -> None:
        if config.get("kill_step") == name:
            killer(clock, config["kill_after_s"], lost)
        start = time.perf_counter()
        record = body()
        wall = time.perf_counter() - start
        normal = relative(relative(record, run), engines.parent)
        (run / f"record-{name}.json").write_text(json.dumps(normal, sort_keys=True, indent=1, default=str))
        out["steps"][name] = {"wall_s": round(wall, 4), **clock.taken(), "record_sha256": digest(normal)}
        if config.get("kill_step") == name:
            out["steps"][name]["lost_workers"] = list(lost)

    clock.taken()
    if "calibrate" in config["steps"]:

        def do_calibrate() -> Any:
            nonlocal built
            built = calibrate.run(
                calibrate.CalibrateInputs(
                    model, calib_name, MethodSpec(config["method"]), engines=engines, calib_root=calib_root,
                    parity_clips=1, backend=backend, ray=ray,
                )
            )  # fmt: skip
            return calibrate_record(built)

        step("calibrate", do_calibrate)
    if "compare" in config["steps"]:

        def do_compare() -> Any:
            nonlocal sensitivity
            prepared = prepare(
                model, calib_name, config["method"], root=engines, calib_root=calib_root, backend=backend
            )
            found = run_compare(
                prepared, load_set(calib_name, root=calib_root), config["per_condition"], layers=False,
                progress=False, out=run / "analyses", backend=backend, ray=ray,
            )  # fmt: skip
            sensitivity = Path(found.files["sensitivity_json"])
            return without_timing(found.sensitivity)

        step("compare", do_compare)
    if "search" in config["steps"]:

        def do_search() -> Any:
            inputs = search.SearchInputs(
                model=model, calib_set=calib_name, method=config["method"], calib_root=calib_root, engines=engines,
                out=run / "analyses", per_condition=config["per_condition"], dev_set=str(config["dev_set"]),
                sensitivity=sensitivity, resamples=config["resamples"], refine=1, progress=False, backend=backend,
                ray=ray,
            )  # fmt: skip
            data = without_timing(search.run(inputs).data)
            data.get("provenance", {}).pop("sensitivity", None)  # the ranking file's hash covers its time
            return data

        step("search", do_search)
    if "signoff" in config["steps"]:

        def do_signoff() -> Any:
            nonlocal built
            if built is None:
                built = calibrate.run(
                    calibrate.CalibrateInputs(
                        model, calib_name, MethodSpec(config["method"]), engines=engines, calib_root=calib_root,
                        parity_clips=1, backend=backend,
                    )
                )  # fmt: skip
                clock.taken()
            inputs = signoff.SignoffInputs(
                eval_name, run / "signoff", [("fp32", built.fp32_onnx), ("int8", built.int8_onnx)], model=model,
                latency=None, resamples=config["resamples"], overflow_check=False, as_given=True,
                calib_root=eval_root, engines=engines, backend=backend, ray=ray,
            )  # fmt: skip
            return without_timing(signoff.run(inputs).record)

        step("signoff", do_signoff)
    return out


# ---- the parent: configurations, comparison, table


def host() -> dict[str, Any]:
    from workbench.evaluate.machine import machine_info, package_versions

    flags: list[str] = []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                present = set(line.split(":", 1)[1].split())
                flags = [f for f in CPU_FLAGS if f in present]
                break
    except OSError:
        pass
    versions = package_versions()
    try:
        import ray

        versions["ray"] = ray.__version__
    except ImportError:
        pass
    return {**machine_info(), "cpu_flags": flags, "packages": versions}


def gpu_count() -> int:
    try:
        found = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in found.splitlines() if line.startswith("GPU "))


def run_config(config: dict[str, Any], cores: list[int] | None, timeout: float = 3600) -> dict[str, Any]:
    """One configuration in a child process pinned to ``cores`` (None: this process's)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(config)]
    start = time.perf_counter()
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail}", "process_wall_s": time.perf_counter() - start}
    result = json.loads(lines[-1])
    result["process_wall_s"] = round(time.perf_counter() - start, 3)
    return result


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """Where two normalised records first differ (a JSON path), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}/{key} (in one only)"
            found = first_difference(a[key], b[key], f"{where}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where} (length {len(a)} vs {len(b)})"
        for k, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{where}[{k}]")
            if found:
                return found
        return None
    return None if a == b else f"{where}: {str(a)[:60]} vs {str(b)[:60]}"


def derived(serial: dict[str, Any], spread: dict[str, Any], n: int) -> dict[str, Any]:
    """Speed-up, efficiency, the sharded part's and the serial fraction kept, for one step at N workers."""
    wall0, wall = serial["wall_s"], spread["wall_s"]
    work0 = serial["seconds"].get("work", 0.0)
    sharded = spread["seconds"].get("sharded", 0.0)
    out = {
        "speedup": round(wall0 / wall, 3),
        "efficiency": round(wall0 / wall / n, 3),
        "serial_fraction_kept": round((wall - sharded) / wall, 3),
        "serial_run_outside_work": round((wall0 - work0) / wall0, 3),
    }
    if sharded > 0 and work0 > 0:
        out["sharded_speedup"] = round(work0 / sharded, 3)
        out["sharded_efficiency"] = round(work0 / sharded / n, 3)
    return out


def fresh(folder: Path) -> Path:
    """``folder`` emptied: a configuration left by an earlier run under the same ``--work`` holds its calibration
    cache, which the next calibrate would reuse instead of measuring."""
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def compare_records(serial_run: Path, run: Path, step: str) -> str | None:
    a = json.loads((serial_run / f"record-{step}.json").read_text())
    b = json.loads((run / f"record-{step}.json").read_text())
    return first_difference(a, b)


def measure_model(
    args: argparse.Namespace, name: str, usable: list[int], save: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Every configuration of one model (``save`` keeps the runs so far after each), then the table and the kills."""
    work = args.work / name
    model = model_folder(name, args.work)
    calib_set, eval_set = repeated_sets(
        args.calib_set.resolve(), args.eval_set.resolve(), args.repeat, args.work / "sets"
    )
    base = {
        "model": model,
        "calib_set": str(calib_set),
        "eval_set": str(eval_set),
        "dev_set": str(args.eval_set.resolve()),
        "steps": args.steps,
        "method": args.method,
        "per_condition": args.per_condition,
        "resamples": args.resamples,
        "backend": "ort-cuda" if args.gpu_worker else "ort-cpu",
    }
    t = args.threads_per_worker
    counts = args.workers
    if args.gpu_worker:
        gpus = gpu_count()
        counts = [n for n in counts if n <= gpus] or [1]
    runs: dict[str, Any] = {}
    killed: list[dict[str, Any]] = []
    order = [("serial", None, 1)] + [
        (f"local:{n}", f"local:{n}", n) for n in sorted(counts, key=lambda n: -n)
    ]
    for label, ray, n in order:  # the largest N first after the serial run: the headline if time runs out
        if args.deadline_s is not None and time.perf_counter() - STARTED > args.deadline_s:
            runs[label] = {"error": "not run: --deadline-s passed"}
            continue
        cores = None if args.gpu_worker else usable[: n * t]
        if cores is not None and len(cores) < n * t:
            runs[label] = {"error": f"needs {n * t} cores, {len(usable)} usable"}
            print(f"{name} {label}: skipped ({runs[label]['error']})", flush=True)
            continue
        folder = fresh(work / label.replace(":", "-"))
        load_before = load_averages()
        result = run_config({**base, "ray": ray, "run": str(folder)}, cores)
        result.update(
            cores=len(cores) if cores else None, load_before=load_before, load_after=load_averages()
        )
        runs[label] = result
        print(f"{name} {label}: {json.dumps(result)}", flush=True)
        if (
            args.kill
            and n == max(counts)
            and n > 1
            and "error" not in result
            and "error" not in runs["serial"]
        ):
            killed = kill_runs(
                args, base, work, result, n, cores
            )  # right after its measured run: it needs its times
        save({"model": name, "model_path": model, "threads_per_worker": t, "runs": runs, "killed": killed})
    serial = runs["serial"]
    table: list[dict[str, Any]] = []
    if "error" not in serial:
        for n in counts:
            spread = runs.get(f"local:{n}", {})
            if "error" in spread or not spread:
                continue
            for step in args.steps:
                row = {"step": step, "workers": n, "serial_s": serial["steps"][step]["wall_s"]}
                row["wall_s"] = spread["steps"][step]["wall_s"]
                row.update(derived(serial["steps"][step], spread["steps"][step], n))
                row["pool_start_s"] = spread["steps"][step]["seconds"].get("pool_start", 0.0)
                row["sharded_s"] = spread["steps"][step]["seconds"].get("sharded", 0.0)
                row["balance_bound"] = spread["steps"][step].get("balance_bound")
                row["difference"] = compare_records(work / "serial", work / f"local-{n}", step)
                row["record_equal"] = row["difference"] is None
                # ONNX Runtime's float results depend on its thread count: equal records need equal counts
                row["ort_threads"] = [serial.get("ort_threads"), spread.get("ort_threads")]
                table.append(row)
    return {
        "model": name,
        "model_path": model,
        "threads_per_worker": t,
        "runs": runs,
        "table": table,
        "killed": killed,
    }


def kill_runs(
    args: argparse.Namespace,
    base: dict[str, Any],
    work: Path,
    measured: dict[str, Any],
    n: int,
    cores: list[int] | None,
) -> list[dict[str, Any]]:
    """Each of ``KILL_STEPS`` once more at ``n`` workers with one worker killed a quarter of the way into the
    measured run's sharded time; its record against the serial run's. Signoff reuses the measured run's engines
    (its cache), so only the killed step's work is redone."""
    killed: list[dict[str, Any]] = []
    for step in [s for s in KILL_STEPS if s in args.steps]:
        if args.deadline_s is not None and time.perf_counter() - STARTED > args.deadline_s:
            killed.append({"step": step, "workers": n, "error": "not run: --deadline-s passed"})
            continue
        sharded = measured.get("steps", {}).get(step, {}).get("seconds", {}).get("sharded", 1.0)
        folder = fresh(work / f"kill-{step}")
        config = {**base, "ray": f"local:{n}", "run": str(folder), "kill_step": step, "steps": [step]}
        config["kill_after_s"] = round(0.25 * sharded, 3)
        if step == "signoff":
            config["engines"] = str(work / f"local-{n}" / "engines")
        result = run_config(config, cores)
        entry: dict[str, Any] = {"step": step, "workers": n, "kill_after_s": config["kill_after_s"]}
        if "error" in result:
            entry["error"] = result["error"]
        else:
            entry["lost_workers"] = result["steps"][step].get("lost_workers", [])
            entry["wall_s"] = result["steps"][step]["wall_s"]
            entry["difference"] = compare_records(work / "serial", folder, step)
            entry["record_equal"] = entry["difference"] is None
        killed.append(entry)
        print(f"killed a worker in {step} at {n} workers: {json.dumps(entry)}", flush=True)
    return killed


def print_table(result: dict[str, Any]) -> None:
    print(f"\n{result['model']}: {result['threads_per_worker']} threads per worker")
    head = "| step | N | serial s | wall s | speed-up | eff. | sharded s | sharded speed-up | sharded eff. | balance bound | serial fraction kept | start s | equal |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in result["table"]:
        if len(set(r.get("ort_threads") or [])) > 1:
            print(
                f"(ONNX Runtime threads per session differ: {r['ort_threads']}; the records need not be equal)"
            )
        print(
            f"| {r['step']} | {r['workers']} | {r['serial_s']:.2f} | {r['wall_s']:.2f} | {r['speedup']:.2f} | "
            f"{r['efficiency']:.0%} | {r['sharded_s']:.2f} | {r.get('sharded_speedup', 0):.2f} | "
            f"{r.get('sharded_efficiency', 0):.0%} | {'-' if r['balance_bound'] is None else format(r['balance_bound'], '.0%')} | {r['serial_fraction_kept']:.0%} | "
            f"{r['pool_start_s']:.2f} | "
            f"{'yes' if r['record_equal'] else 'NO: ' + str(r['difference'])} |"
        )


def write(out: dict[str, Any], path: Path, started: float) -> None:
    out["load_average_after"] = load_averages()
    out["wall_s"] = round(time.perf_counter() - started, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, allow_nan=False))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.child is not None:
        import logging

        logging.basicConfig(level=logging.WARNING)
        config = args.child
        sys.argv = [sys.argv[0]]  # records keep the command line: the same one in every configuration
        print(json.dumps(run_child(json.loads(config))), flush=True)
        return 0
    usable = sorted(os.sched_getaffinity(0))
    before = load_averages()
    started = time.perf_counter()
    out: dict[str, Any] = {
        "benchmark": "ray_scaling",
        "command": "python benchmarks/ray_scaling.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "host": host(),
        "gpus": gpu_count(),
        "load_average_before": before,
        "calib_set": str(args.calib_set),
        "eval_set": str(args.eval_set),
        "repeat": args.repeat,
        "workers": args.workers,
        "models": [],
    }
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        done = list(out["models"])

        def save(partial: dict[str, Any], done: list[Any] = done) -> None:
            out["models"] = [*done, partial]
            write(out, args.out, started)

        result = measure_model(args, name, usable, save)
        out["models"] = [*done, result]
        print_table(result)
        write(out, args.out, started)  # each model's results kept as soon as they are in
    write(out, args.out, started)
    print(f"\nload average before {before}, after {out['load_average_after']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
