"""ONNX Runtime runner: CPU by default, CUDA when onnxruntime-gpu is installed and asked for; a CPU session
that also returns any intermediate tensors (``session_with_outputs``: calibration, float statistics, checks); and
``ort_failures``, which turns ONNX Runtime's load and run errors and running out of memory into one user error.

Both open their session through ``open_session``: where the exact-U8S8 option (``cpu_int8.PRECISION_MODE_KEY``,
set on x86 CPUs without VNNI) makes ONNX Runtime refuse a model (1.32 refuses some QDQ models, e.g. its own
``quantize_static`` output: "Attempt to replace the existing tensor"), the session is opened again without it,
and the runner keeps why (``session_note``) for the record and report of whatever it measured."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from workbench.backends.base import Runner
from workbench.backends.devices import device_of
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    import onnx

    from workbench.backends.integer_nodes import Rewrite


SAMPLE_RATE = 16_000  # the rate every model input is prepared at (for the length a message names)
# ORT session config key: the intra-op pool's threads spin during a run and stop spinning when it returns. Without
# it a session's threads keep spinning after its run and take the cores from the next session's run: timing
# FP32 and the INT8 CPU flavour interleaved with 2 threads on a 2-core CPU, each run then took about twice as
# long and varied 2x from round to round (docs/benchmarks.md, the ort-cpu target).
SPIN_STOP_KEY = "session.force_spinning_stop"
_MEMORY_WORDS = ("failed to allocate", "bad_alloc", "out of memory", "memoryallocation")


T = TypeVar("T")
R = TypeVar("R")


class OutOfMemory(WorkbenchError):
    """Running the model on one input needed more memory than there is; ``seconds``: that input's length."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


def memory_advice(seconds: float) -> str:
    return (
        f"ran out of memory on a clip of {seconds:.1f} s; cut long recordings into shorter clips, leave them out "
        "with a deployment profile (--max-seconds when importing; signoff --outside-profile skip), or run on a "
        "machine with more memory"
    )


def _ort_error_types() -> tuple[type[BaseException], ...]:
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names: tuple[str, ...] = (
        "Fail",
        "InvalidArgument",
        "InvalidGraph",
        "InvalidProtobuf",
        "NoSuchFile",
        "NoModel",
    )
    names += ("NotImplemented", "RuntimeException", "EPFail", "EngineError")
    return tuple(getattr(state, n) for n in names if isinstance(getattr(state, n, None), type))


@contextmanager
def ort_failures(what: str, samples: int | None = None) -> Iterator[None]:
    """ONNX Runtime errors (and MemoryError) inside the block become one WorkbenchError naming ``what``: loading
    (``samples`` None) or running it on an input of ``samples`` samples, which names the input's length when the
    run ran out of memory (``OutOfMemory``)."""
    try:
        yield
    except MemoryError as exc:
        seconds = (samples or 0) / SAMPLE_RATE
        raise OutOfMemory(f"{what}: {memory_advice(seconds)}", seconds) from exc
    except _ort_error_types() as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        if samples is not None and any(w in first.lower() for w in _MEMORY_WORDS):
            seconds = samples / SAMPLE_RATE
            raise OutOfMemory(f"{what}: {memory_advice(seconds)}", seconds) from exc
        if samples is None:
            raise WorkbenchError(
                f"{what}: ONNX Runtime cannot load it ({first}); check that every file it names (external data) "
                "sits beside it, or export it again"
            ) from exc
        raise WorkbenchError(
            f"{what}: ONNX Runtime failed running it ({first}); check it runs in ONNX Runtime on a clip of "
            f"{samples / SAMPLE_RATE:.1f} s, or export it again"
        ) from exc


def run_options():
    """Run options whose failures ONNX Runtime does not also log to stderr: ``ort_failures`` reports them as one
    line (load-time warnings still show)."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = 4  # fatal only
    return options


def available_cores() -> int:
    """The CPU cores this process may run on: its CPUs, at most one per physical core (ONNX Runtime's own default
    thread count) where psutil can tell."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except ImportError:
        physical = None
    return max(1, min(cpus, physical or cpus))


def session_options(threads: int | None = None, optimization: str = "all", exact_int8: bool = True):
    """ORT session options; ``exact_int8``: on a CPU whose U8S8 GEMMs saturate (x86 without VNNI), int8 weights
    of the fused integer nodes become uint8 at load (``cpu_int8.PRECISION_MODE_KEY``), so a Q/DQ graph with
    int8 weights computes what it says; False keeps ORT's default (the faster, saturating kernels). The
    thread pool stops spinning when a run returns (``SPIN_STOP_KEY``), so sessions run one after another
    (interleaved timing, one candidate after another) do not take each other's cores."""
    import onnxruntime as ort

    from workbench.backends.cpu_int8 import PRECISION_MODE_KEY, u8s8_exact

    opts = ort.SessionOptions()
    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    opts.graph_optimization_level = levels[optimization]
    # always a number: left at 0, ONNX Runtime pins its pool's threads to cores while the calling thread floats,
    # and a run slows by a third whenever the scheduler puts the caller on a pinned thread's core (measured on this
    # 2-core machine: 118 or 148 ms for one batch, from one process to the next)
    opts.intra_op_num_threads = threads or available_cores()
    opts.log_severity_level = 3
    opts.add_session_config_entry(SPIN_STOP_KEY, "1")
    if exact_int8 and not u8s8_exact()[0]:
        opts.add_session_config_entry(PRECISION_MODE_KEY, "1")
    return opts


def open_session(
    src: str | bytes,
    options,
    providers: Sequence[str],
    name: str = "the model",
    disabled_optimizers: Sequence[str] = (),
):
    """``(session, note)``: an ONNX Runtime session of ``src``; ``note`` is None, or says why the exact-U8S8
    option was dropped (ONNX Runtime refused the model with it and accepted it without it)."""
    import onnxruntime as ort

    from workbench.backends.cpu_int8 import PRECISION_MODE_KEY

    disabled = list(disabled_optimizers) or None
    try:
        session = ort.InferenceSession(src, options, providers=list(providers), disabled_optimizers=disabled)
    except Exception as exc:  # onnxruntime raises its own types (Fail, InvalidGraph, ...) for one refusal
        if not _config_entry_set(options, PRECISION_MODE_KEY):
            raise
        refusal = exc
    else:
        return on_first_provider(session, providers, name), None
    fallback = ort.SessionOptions()
    fallback.graph_optimization_level = options.graph_optimization_level
    fallback.intra_op_num_threads = options.intra_op_num_threads
    fallback.log_severity_level = options.log_severity_level
    fallback.add_session_config_entry(SPIN_STOP_KEY, "1")
    session = ort.InferenceSession(  # refused again: that error
        src, fallback, providers=list(providers), disabled_optimizers=disabled
    )
    words = " ".join(str(refusal).split())
    reason = words.split(" : ")[-1].strip()[-200:] or type(refusal).__name__
    return on_first_provider(session, providers, name), (
        f"{name}: ONNX Runtime refused it with the exact-U8S8 option {PRECISION_MODE_KEY} ({reason}), so it "
        "ran with ONNX Runtime's default session options: its integer GEMMs use the U8S8 kernels that "
        "saturate on this CPU"
    )


def on_first_provider(session, providers: Sequence[str], name: str):
    """``session``, once it runs on the first provider asked for: ONNX Runtime falls back to the CPU with only a
    warning when a GPU provider fails to start (missing CUDA or cuDNN libraries), which would time and judge the
    CPU in the GPU's name."""
    first = providers[0] if providers else "CPUExecutionProvider"
    if first not in session.get_providers():
        raise WorkbenchError(
            f"ONNX Runtime could not start {first} for {name} (the session has {session.get_providers()}): "
            "check that the CUDA and cuDNN libraries onnxruntime-gpu was built for are on LD_LIBRARY_PATH "
            "(python -c 'import onnxruntime; onnxruntime.preload_dlls()' loads those of the nvidia-* wheels), "
            "or use --backend ort-cpu"
        )
    return session


def _config_entry_set(options, key: str) -> bool:
    """Whether ``options`` holds ``key`` set to "1" (ONNX Runtime raises for a key never set)."""
    try:
        return options.get_session_config_entry(key) == "1"
    except RuntimeError:
        return False


def run_feed(
    session, names: list[str], feed: Mapping[str, np.ndarray], what: str, options=None
) -> list[np.ndarray]:
    """``session.run(names, feed)``; a failure is one WorkbenchError naming ``what`` and the feed's length
    (``ort_failures``)."""
    samples = max((int(np.shape(v)[-1]) for v in feed.values() if np.ndim(v)), default=0)
    with ort_failures(what, samples):
        return session.run(names, dict(feed), options)


def in_order(fn: Callable[[T], R], items: Iterable[T], workers: int, ahead: int) -> Iterator[R]:
    """``fn(item)`` for each of ``items`` on ``workers`` threads, handed back in the items' order, at most ``ahead``
    of them started and not yet handed back (items are drawn only as they are needed)."""
    with ThreadPoolExecutor(workers, thread_name_prefix="ort") as pool:
        pending: deque[Future] = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def runs_ahead(
    session, names: list[str], feeds: Iterable[tuple[str, Mapping[str, np.ndarray]]]
) -> Iterator[tuple[Mapping[str, np.ndarray], list[np.ndarray]]]:
    """``(feed, session.run(names, feed))`` for each ``(what, feed)`` of ``feeds``, in order, the next run started
    before this one's outputs are handed back: a caller that works on each run's outputs in Python (statistics over
    every tensor) does so while ONNX Runtime computes the next. A failed run is one WorkbenchError naming ``what``.
    Two runs' outputs are alive at once."""
    quiet = run_options()

    def run(item: tuple[str, Mapping[str, np.ndarray]]) -> tuple[Mapping[str, np.ndarray], list[np.ndarray]]:
        what, feed = item
        return feed, run_feed(session, names, feed, what, quiet)

    return in_order(run, feeds, workers=1, ahead=1)


def session_with_outputs(model: onnx.ModelProto, names: list[str], options=None):
    """An ONNX Runtime CPU session of ``model`` that returns the tensors ``names`` (its graph outputs replaced).

    The outputs are swapped in place for serialisation and restored (a deep copy would hold the weights twice
    more); ``options`` default to basic optimisation, so that every asked-for tensor survives.
    """
    import onnx

    options = options or session_options(optimization="basic")
    original = [onnx.ValueInfoProto.FromString(o.SerializeToString()) for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    try:
        data = model.SerializeToString()
    finally:
        del model.graph.output[:]
        model.graph.output.extend(original)
    session, _ = open_session(data, options, ["CPUExecutionProvider"])
    del data
    return session


def cpu_streams(threads: int, requested: int | None = None) -> tuple[int, int]:
    """(concurrent runs, intra-op threads each) for ``threads`` CPU threads: two runs with half the threads each
    where there are two or more, else one; ``requested`` runs instead of two (at most one per thread)."""
    streams = max(1, min(requested if requested is not None else 2, threads))
    return streams, max(1, threads // streams)


class OnnxRuntimeRunner(Runner):
    backend = "onnxruntime"

    def __init__(
        self,
        model: Path | bytes,
        providers: Sequence[str] = ("CPUExecutionProvider",),
        threads: int | None = None,
        optimization: str = "all",
        name: str | None = None,
        exact_int8: bool = True,
        backend_name: str | None = None,
        integer_nodes: bool = True,
        streams: int | None = None,
    ) -> None:
        super().__init__()
        # concurrent runs of ``infer_each`` on the CPU provider (None: ``cpu_streams``); ``infer`` runs one at a time
        self.streams = streams
        self.use_integer_nodes = integer_nodes  # False: FP16 Q/DQ graphs run as written (benchmarks compare)
        self.model = model
        self.providers = list(providers)
        self.threads = threads
        self.optimization = optimization
        self.exact_int8 = exact_int8
        self.name = name or (Path(model).name if not isinstance(model, bytes) else "onnx-model")
        self.session = None
        # the session ``infer_each``'s concurrent runs share (opened when first used)
        self._stream_session: Any = None
        self._loaded: str | bytes | None = None  # what the sessions load (``_source``)
        self.session_note: str | None = None  # why the exact-U8S8 option was dropped (``open_session``)
        self.integer_nodes: Rewrite | None = None  # FP16 Q/DQ INT8 nodes moved onto the integer kernels
        self._run_options = None
        self.backend_name = backend_name or (
            "ort-cuda" if "CUDAExecutionProvider" in self.providers else "ort-cpu"
        )

    def activate_impl(self) -> None:
        import onnxruntime as ort

        available = ort.get_available_providers()
        missing = [p for p in self.providers if p not in available]
        if missing:
            raise WorkbenchError(
                f"ONNX Runtime providers {missing} are not available here (have {available}); "
                "for CUDA install onnxruntime-gpu: pip install 'workbench[gpu]'"
            )
        self._loaded = self._source()
        self.session, self.session_note = self._open(self.threads)
        self._run_options = run_options()

    def _open(self, threads: int | None):
        """``(session, note)`` of what ``activate`` loaded, with ``threads`` intra-op threads (``open_session``)."""
        from workbench.backends.integer_nodes import DISABLED_OPTIMIZERS

        assert self._loaded is not None
        options = session_options(threads, self.optimization, self.exact_int8)
        with ort_failures(self.name):
            return open_session(
                self._loaded,
                options,
                self.providers,
                self.name,
                DISABLED_OPTIMIZERS if self.integer_nodes else (),
            )

    def stream_plan(self) -> tuple[int, int]:
        """(concurrent runs, intra-op threads each) of ``infer_each``: on the CPU provider ``cpu_streams`` of the
        threads this runner may use, else one run with the runner's threads."""
        if self.providers != ["CPUExecutionProvider"]:
            return 1, self.threads or 0
        return cpu_streams(self.threads or available_cores(), self.streams)

    def infer_each(self, feeds: Iterable[Mapping[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
        """Each feed's outputs, in order. On the CPU provider several runs share one session at once, each with
        a share of the threads (``stream_plan``): ONNX Runtime's sessions take concurrent runs, a run's outputs
        do not depend on its thread count, and the elementwise, Q/DQ and integer kernels that leave a core idle
        inside one run keep it busy with the other (measured on the demo model, 2 cores: the same logits, the
        mixed INT8/FP16 plan's transcription 20-30 % sooner, FP32's as before; ``benchmarks/cpu_streams.py``)."""
        streams, threads = self.stream_plan()
        if streams <= 1:
            yield from super().infer_each(feeds)
            return
        if not self.is_active:
            raise RuntimeError(f"{self.name}: call activate() (or use 'with') before infer_each()")
        if self._stream_session is None:
            self._stream_session, _ = self._open(threads)
        session, options = self._stream_session, self._run_options
        names = [o.name for o in session.get_outputs()]

        def run(feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            return dict(zip(names, run_feed(session, names, feed, self.name, options)))

        yield from in_order(run, feeds, workers=streams, ahead=2 * streams - 1)

    def _source(self) -> str | bytes:
        """What the session loads: the model as given, or, on the CPU provider with full optimisation, its FP16 Q/DQ
        INT8 nodes rewritten onto the integer kernels (``workbench.backends.integer_nodes``; ``self.integer_nodes``
        says what changed)."""
        src = self.model if isinstance(self.model, bytes) else str(self.model)
        if (
            not self.use_integer_nodes
            or self.providers != ["CPUExecutionProvider"]
            or self.optimization != "all"
            or (isinstance(src, bytes) and b"DequantizeLinear" not in src)  # nothing to rewrite: no parse
        ):
            return src
        import onnx

        from workbench.backends.integer_nodes import has_fp16_qdq_nodes, with_integer_nodes

        try:
            model = onnx.load_from_string(src) if isinstance(src, bytes) else onnx.load(src)
        except Exception:  # ONNX Runtime's own load gives the error worth reporting
            return src
        if not has_fp16_qdq_nodes(model):
            return src
        rewritten, self.integer_nodes = with_integer_nodes(model)
        try:
            return rewritten.SerializeToString()
        except ValueError:  # over protobuf's 2 GB: run the graph as it is
            self.integer_nodes = None
            return src

    def infer_impl(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        assert self.session is not None
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, run_feed(self.session, names, feeds, self.name, self._run_options)))

    def deactivate_impl(self) -> None:
        self.session = self._stream_session = self._loaded = None

    @property
    def input_names(self) -> list[str]:
        assert self.session is not None
        return [i.name for i in self.session.get_inputs()]

    def graph_inputs(self) -> list[str]:
        return self.input_names if self.session is not None else []

    def describe(self) -> dict[str, str]:
        import onnxruntime as ort

        from workbench.backends.integer_nodes import REWRITTEN

        return {
            "runner": self.name,
            "backend": self.backend,
            "backend_name": self.backend_name,
            "device": device_of(self.backend_name),
            "providers": ",".join(self.providers),
            "onnxruntime": ort.__version__,
            "optimization": self.optimization,
            "threads": str(self.threads or "default"),
            **(
                {"transcription_streams": "{} concurrent runs x {} threads".format(*self.stream_plan())}
                if self.providers == ["CPUExecutionProvider"]
                else {}
            ),
            "spinning": "stops when a run returns",
            "int8_gemm": int8_gemm(self.exact_int8 and self.session_note is None),
            **({"session_note": self.session_note} if self.session_note else {}),
            **(
                {
                    "int8_nodes": f"{REWRITTEN}: {self.integer_nodes.nodes} nodes",
                }
                if self.integer_nodes
                else {}
            ),
        }


def int8_gemm(exact_int8: bool) -> str:
    """How this CPU's ORT sessions compute integer GEMMs with int8 weights (recorded with every timing)."""
    from workbench.backends.cpu_int8 import u8s8_exact

    exact, why = u8s8_exact()
    if exact:
        return f"U8S8 exact: {why}"
    if exact_int8:
        return f"int8 weights made uint8 at load (U8U8, exact): {why}"
    return f"U8S8 as ORT defaults, saturating: {why}"
