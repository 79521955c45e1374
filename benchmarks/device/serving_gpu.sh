#!/usr/bin/env bash
# Runs benchmarks/serving.py on ONNX Runtime CUDA on the device machine. The onnxruntime-gpu wheel travels as an
# xz tar of its installed package (slimmed to sm_90 by benchmarks/slim_fatbin.py), split in two parts that are
# carried in back-to-back calls (a call carries at most 64 MiB with the repository):
#   call 1 (carry .carry/54a):  bash benchmarks/device/serving_gpu.sh keep .carry/54a/part_aa
#   call 2 (carry .carry/54b and the set): bash benchmarks/device/serving_gpu.sh run .carry/54b/part_ab [serving.py arguments]
# Where the second part, the set and the wheels do not fit one call, call 2 keeps the part and call 3 runs on the kept
# one: bash benchmarks/device/serving_gpu.sh run /root/keep/part_ab [serving.py arguments]. WHEELS=DIR installs the
# wheels in DIR (soundfile and the workbench's pure-Python needs, which the machine lacks) beside onnxruntime-gpu.
# CUDA and cuDNN libraries come from the machine's torch wheel (its nvidia/*/lib folders).
set -euo pipefail
KEEP=${KEEP:-/root/keep}
mode=$1 part=$2
shift 2
mkdir -p "$KEEP"
[ "$(realpath "$(dirname "$part")")" = "$(realpath "$KEEP")" ] || cp "$part" "$KEEP/"
[ "$mode" = keep ] && { ls -la "$KEEP"; exit 0; }
SITE=$KEEP/ortgpu
if [ ! -d "$SITE/onnxruntime" ]; then
  mkdir -p "$SITE"
  cat "$KEEP"/part_* | python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)' | tar -C "$SITE" -xf -
fi
[ -z "${WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl
NV=$(python3 -c 'import os, nvidia; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null || true)
LIBS=$(ls -d "$NV"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH=${LIBS}${LD_LIBRARY_PATH:-} PYTHONPATH=$SITE:$PWD PYTHONUNBUFFERED=1
python3 -c 'import onnxruntime as o; print("onnxruntime", o.__version__, o.__file__, o.get_available_providers())'
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
python3 benchmarks/serving.py --backend ort-cuda "$@" 2>&1 | tee -a "${OUT:-/tmp}/serving_gpu.log"  # the log comes back from $OUT even when a time limit stops the run
