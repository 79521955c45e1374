#!/usr/bin/env bash
# Runs benchmarks/search_replication.py on the device machine from a carry folder (default .carry/56) that holds:
#   tts-root.tar.xz   espeak-ng (English dictionary only), flite, festival with the demo's two voices and their
#                     lexicons, WordNet: the Debian packages the synthetic speech needs, extracted and packed
#   lib/              libpcaudio.so.0 stand-in (training/stubs/pcaudio_stub.c: espeak-ng links it for playback only), libasound.so.2 (flite)
#   festlib/          festival's private libraries: libpulse-simple stand-in (training/stubs), libtinfo, libgomp
#   whl/              soundfile, onnx-graphsurgeon, polygraphy, jiwer, rapidfuzz, cffi, pycparser (cp312)
#   workbench/ benchmarks/   the code to run (the demo model is linked from the repository's workbench/demo_model)
# benchmarks/replication/make_carry.sh builds it. Usage, from the repository root there:
#   bash .carry/56/benchmarks/replication/device_run.sh DEADLINE_S [search_replication.py arguments]
# --workspace defaults to $WORKSPACE or /tmp/rep (a base already there, from an earlier call on the same machine, is reused
# by the pipeline's step state). SETUP_ONLY=1 stops after the smoke tests; SKIP_WHEELS=1 (a test off the device) installs no wheels; CARRY, TTS_ROOT and SITE_DIR move the carry, root and wheel target.
set -euo pipefail
C=${CARRY:-.carry/56}
R=${TTS_ROOT:-/tmp/tts}
S=${SITE_DIR:-/tmp/site}
OUT=${OUT:-/tmp/out}
mkdir -p "$R" "$S" "$OUT"
unxz() { if command -v xz >/dev/null; then xz -dc "$1"; else
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; fi; }
[ -x "$R/usr/bin/espeak-ng" ] || unxz "$C/tts-root.tar.xz" | tar -C "$R" -xf -
L=$R/usr/lib/x86_64-linux-gnu
cp "$C"/lib/*.so.* "$L/"
mkdir -p "$R/festlib" "$R/wrap" && cp "$C"/festlib/* "$R/festlib/"
[ "${SKIP_WHEELS:-0}" = 1 ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$S" "$C"/whl/*.whl
# festival reads its data from the compiled-in /usr/share/festival: point that into the private root
for d in /usr/share/festival /usr/lib/festival; do [ -e $d ] || ln -s "$R$d" $d; done
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/festlib:%s exec %s/usr/bin/festival "$@"\n' "$R" "$L" "$R" >"$R/wrap/festival"
printf '#!/bin/sh\nexec %s/wrap/festival --script %s/usr/bin/text2wave "$@"\n' "$R" "$R" >"$R/wrap/text2wave"
chmod +x "$R"/wrap/*
export PATH=$R/wrap:$R/usr/bin:$PATH LD_LIBRARY_PATH=$L ESPEAK_DATA_PATH=$L
export WORKBENCH_WORDNET_DIR=$R/usr/share/wordnet FESTIVAL_VOICES=$R/usr/share/festival/voices
export PYTHONPATH=$PWD/$C:$S PYTHONUNBUFFERED=1
ln -sfn "$PWD/workbench/demo_model" "$C/workbench/demo_model"
espeak-ng -q -w /tmp/smoke.wav "smoke test" && flite -voice slt -t "smoke test" -o /tmp/smoke2.wav &&
  echo "smoke test" | text2wave -eval "(voice_kal_diphone)" -o /tmp/smoke3.wav ||
  { echo "speech synthesis does not run here"; ldd "$R/usr/bin/espeak-ng" "$R/usr/bin/flite" | grep "not found"; exit 1; }
python3 -P -c "import workbench, jiwer, soundfile, polygraphy, onnx_graphsurgeon; print('workbench from', workbench.__file__)
from workbench.speech.tts import available_voices, extra_voices
print(len(available_voices()), 'voices,', len(extra_voices()), 'extra')"
[ "${SETUP_ONLY:-0}" = 1 ] && { echo "setup done"; exit 0; }
deadline=$1
shift
timeout "$deadline" python3 -P "$C/benchmarks/search_replication.py" --out "$OUT/search_replication.json" \
  --workspace "${WORKSPACE:-/tmp/rep}" "$@" 2>&1 |
  grep --line-buffered -v -E "it/s\]|s/it\]" | tee "$OUT/replication.log"
