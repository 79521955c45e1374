"""Inputs every analysis needs: the FP32 ONNX model and a calibration cache that belongs to it.

Without an explicit cache this is the calibrate job (export once, reuse a matching cache or calibrate).
With ``cache_path`` the cache is loaded and checked against the model: a cache made for another model
or another FP32 export is refused with a message that says what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.artifacts import sha256_file
from workbench.calibration import cache as cache_mod
from workbench.calibration.methods import MethodSpec
from workbench.compare.clips import require_utterances
from workbench.config import CALIB_SETS_DIR, ENGINES_DIR
from workbench.errors import WorkbenchError
from workbench.speech.store import SpeechSet, load_set


@dataclass
class Prepared:
    """Model hash and folder, FP32 ONNX, cache (path + parsed), calibration set, INT8-everywhere ONNX."""

    model: str
    model_hash: str
    folder: Path
    fp32_onnx: Path
    cache_path: Path
    cache: cache_mod.CalibrationCache
    calib_set: SpeechSet
    method: str
    int8_onnx: Path | None

    @property
    def tag(self) -> str:
        """``<method>-<calibration set hash 12>``: names files made from this cache."""
        return f"{self.method}-{self.calib_set.content_hash[:12]}"


def prepare(model: str | Path, calib_set: str, method: str = "entropy", root: Path = ENGINES_DIR,
            cache_path: Path | None = None, calib_root: Path | None = None) -> Prepared:
    """FP32 ONNX + a cache for ``model``; calibrates (or reuses a matching cache) when none is given."""
    from workbench.model.loading import artifact_folder_name, model_hash

    speech_set = require_utterances(load_set(calib_set, root=calib_root or CALIB_SETS_DIR), "calibration")
    if cache_path is None:
        from workbench.calibrate_pipeline import run_calibrate

        result = run_calibrate(model, str(speech_set.path), MethodSpec(method), root=root)
        cache = cache_mod.load(result.cache)
        return Prepared(str(model), model_hash(model), result.fp32_onnx.parent, result.fp32_onnx, result.cache,
                        cache, speech_set, method, result.int8_onnx)
    if not Path(cache_path).is_file():
        raise WorkbenchError(f"--cache {cache_path} is not a file; give a .cache written by python -m workbench "
                             "calibrate for this model, or drop --cache to reuse or make one")
    cache = cache_mod.load(Path(cache_path))
    mhash = model_hash(model)
    if cache.keys.get("model") != mhash:
        raise WorkbenchError(f"calibration cache {cache_path} was made for another model (model hash "
                             f"{str(cache.keys.get('model'))[:12]}, this model is {mhash[:12]}); run "
                             f"python -m workbench calibrate --model {model} or drop --cache")
    if cache.keys.get("calibration_set") != speech_set.content_hash:
        raise WorkbenchError(f"calibration cache {cache_path} was made from another calibration set than "
                             f"{speech_set.name}; give the matching --calib-set or drop --cache")
    folder = root / artifact_folder_name(mhash)
    fp32 = folder / "model.fp32.onnx"
    if not fp32.exists():
        from workbench.model.export import export_onnx
        from workbench.model.loading import load_model

        export_onnx(load_model(model), fp32)
    if cache.keys.get("onnx") != sha256_file(fp32):
        raise WorkbenchError(f"calibration cache {cache_path} was made for another ONNX export than {fp32}; "
                             "recalibrate (python -m workbench calibrate)")
    return Prepared(str(model), mhash, folder, fp32, Path(cache_path), cache, speech_set,
                    str(cache.keys.get("method", method)), None)
