#!/usr/bin/env bash
# One time-boxed training run of the demo model on the GPU machine (see training/README.md).
# Usage, from the repository root there, carrying .carry (debs, wheels, training texts):
#   training/gpu_run.sh DEADLINE_S [extra train_demo arguments]
# Data and checkpoint stay in /root/keep, so a second run while the machine is held resumes the first.
set -euo pipefail
R=/tmp/tts
mkdir -p "$R" /root/keep
if [ ! -x "$R/usr/bin/espeak-ng" ]; then
  for f in .carry/debs/*.deb; do
    case $f in *espeak-ng-data*) dpkg -x "$f" / ;; *) dpkg -x "$f" "$R" ;; esac
  done
  cp .carry/lib/libpcaudio.so.0 "$R/usr/lib/x86_64-linux-gnu/"
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/whl/*.whl
fi
export PATH=$R/usr/bin:$PATH LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu
export WORKBENCH_WORDNET_DIR=$R/usr/share/wordnet PYTHONPATH=/tmp/site:$PWD
# Fail in seconds, not after the synthesis budget, when a synthesiser does not run on this machine.
if ! { espeak-ng -q -w /tmp/smoke.wav "smoke test" && flite -voice slt -t "smoke test" -o /tmp/smoke2.wav; }; then
  echo "speech synthesis does not run here:"; ldd "$R/usr/bin/espeak-ng" "$R/usr/bin/flite" | grep "not found"; exit 1
fi
deadline=$1
shift
python3 -m training.train_demo --config training/config_broad.json --state-dir /root/keep \
  --out-dir "$OUT/model" --deadline-s "$deadline" --workers 16 --texts .carry/train_texts.txt "$@" 2>&1 |
  grep --line-buffered -v "it/s\]" | tee "$OUT/train.log"
split -b 15M "$OUT/model/model.safetensors" "$OUT/model.safetensors.part-"
rm "$OUT/model/model.safetensors"
tar -C "$OUT" -czf "$OUT/model_files.tgz" model && rm -r "$OUT/model"
