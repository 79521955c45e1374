"""Running out of memory on a very long clip is one ``error:`` line naming the clip and what to do, not a
traceback: a real ONNX Runtime allocation failure (the model's intermediate tensor grows with the clip, the
process's address space is capped) in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
from evalkit import ctc_logits_for
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]


def wide_ctc_onnx(path: Path, width: int = 4096) -> Path:
    """``input_values`` [batch, samples] -> logits that decode to HELLO, through a [batch, width, samples]
    intermediate: memory grows as width x samples, so a long enough clip cannot be run."""
    const = ctc_logits_for("HELLO")
    nodes = [
        helper.make_node("Unsqueeze", ["input_values", "one"], ["x3"]),  # [B, 1, S]
        helper.make_node("Expand", ["x3", "wide"], ["w"]),  # [B, width, S]
        helper.make_node("ReduceSum", ["w", "one"], ["s"], keepdims=1),  # [B, 1, S]
        helper.make_node("ReduceMean", ["s"], ["m"], axes=[2], keepdims=1),  # [B, 1, 1]
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["z", "C"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "wide_ctc",
        [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, ["batch", "samples"])],
        [
            helper.make_tensor_value_info(
                "logits", TensorProto.FLOAT, ["batch", const.shape[1], const.shape[2]]
            )
        ],
        [
            numpy_helper.from_array(const, "C"),
            numpy_helper.from_array(np.zeros((), np.float32), "zero"),
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array([1, width, 1], np.int64), "wide"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


SCRIPT = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    from evalkit import DEFAULT_MODEL
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.errors import WorkbenchError, exit_status
    from workbench.evaluate.transcribe import transcribe

    def run():
        short, long = np.zeros(16_000, np.float32), np.zeros(16_000 * int(sys.argv[2]), np.float32)
        vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (2 << 30), resource.RLIM_INFINITY))
        runner = OnnxRuntimeRunner(sys.argv[1], threads=1, name="wide.onnx")
        labels = ["utterance short-1 (audio/short-1.flac)", "utterance long-1 (audio/long-1.flac)"]
        texts = transcribe(runner, [short, long], DEFAULT_MODEL, labels=labels).texts
        print(texts)

    raise SystemExit(exit_status(run))
    """
)


def test_a_clip_too_long_for_memory_is_one_error_line_naming_it(tmp_path):
    model = wide_ctc_onnx(tmp_path / "wide.onnx")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(model), "300"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[0].startswith(
        "error: utterance long-1 (audio/long-1.flac): wide.onnx: ran out of memory on a clip"
    )
    assert "of 300.0 s; cut long recordings into shorter clips" in lines[0]
    assert "deployment profile" in lines[0]
