#!/usr/bin/env bash
# One time-boxed training run of the demo model on the GPU machine (see training/README.md).
# Usage, from the repository root there, carrying .carry (debs, wheels, training texts):
#   training/gpu_run.sh DEADLINE_S [extra train_demo arguments]
# Data and checkpoint stay in /root/keep, so a second run while the machine is held resumes the first.
# What is carried is unpacked once into the private root $R (kept while the machine is held), whichever call
# brings it: stage 2/3's .carry/debs, or stage 4's packed carry (training/build_stage4_carry.sh): .carry/s4
# (espeak-ng/flite root, WordNet's eval split, training texts, festival's private libraries), .carry/debs-festival/*
# (festival, its voices, sox) and .carry/s4eval (sox's libraries, jiwer wheels, fortune categories).
# Environment: EVAL=1 runs training.evaluate_demo on the trained model into $OUT/eval.json after training;
# BASELINE_EVAL=DIR evaluates that model folder alongside the training (CPU) into $OUT/eval_baseline.json;
# SETUP_ONLY=1 stops after the smoke tests; for a test off the device, SKIP_WHEELS=1, and TTS_ROOT and SITE_DIR
# move the private root and the wheel target.
set -euo pipefail
R=${TTS_ROOT:-/tmp/tts}
S=${SITE_DIR:-/tmp/site}
mkdir -p "$R/.unpacked" /root/keep
unxz() { # unxz FILE: decompress to stdout (python's lzma where the image has no xz)
  if command -v xz >/dev/null; then xz -dc "$1"; else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"
  fi
}
untar() { unxz "$1" | tar -C "$2" -xf -; } # untar FILE.tar.xz DIR
once() { # once NAME COMMAND...: run COMMAND unless NAME was done in an earlier call on this machine
  local mark="$R/.unpacked/$1"
  shift
  [ -e "$mark" ] || { "$@" && touch "$mark"; }
}
if [ ! -x "$R/usr/bin/espeak-ng" ]; then
  if [ -f .carry/s4/tts-root.tar.xz ]; then
    untar .carry/s4/tts-root.tar.xz "$R"
    mkdir -p "$R/usr/share" && untar .carry/s4/wordnet-eval.tar.xz "$R/usr/share"
  else
    for f in .carry/debs/*.deb; do
      case $f in *espeak-ng-data*) dpkg -x "$f" / ;; *) dpkg -x "$f" "$R" ;; esac
    done
  fi
  cp .carry/lib/libpcaudio.so.0 "$R/usr/lib/x86_64-linux-gnu/"
  [ "${SKIP_WHEELS:-0}" = 1 ] || python3 -m pip install -q --no-index --no-deps --target "$S" .carry/whl/*.whl
fi
# festival (stage 4): every carried .deb once; its own libraries stay private to it (wrappers below)
for f in .carry/debs-festival/*/*.deb; do
  [ -e "$f" ] && once "$(basename "$f")" dpkg -x "$f" "$R"
done
if [ -d .carry/s4/festlib ]; then mkdir -p "$R/festlib" && cp -u .carry/s4/festlib/* "$R/festlib/"; fi
if [ -d .carry/s4eval ]; then
  [ -f .carry/s4eval/sox-libs.tar.xz ] && once sox-libs untar .carry/s4eval/sox-libs.tar.xz "$R"
  ls .carry/s4eval/whl/*.whl >/dev/null 2>&1 && [ "${SKIP_WHEELS:-0}" != 1 ] &&
    once eval-wheels python3 -m pip install -q --no-index --no-deps --target "$S" .carry/s4eval/whl/*.whl
  # training.corpus reads the fortune categories from this fixed place (the held-out text slice)
  [ -f .carry/s4eval/fortunes.tar.xz ] && [ -z "$(ls -A /usr/share/games/fortunes 2>/dev/null)" ] &&
    mkdir -p /usr/share/games && untar .carry/s4eval/fortunes.tar.xz /usr/share/games
fi
mkdir -p "$R/wrap"
L=$R/usr/lib/x86_64-linux-gnu
if [ -x "$R/usr/bin/festival" ]; then
  # festival finds its data in the compiled-in /usr/share/festival (text2wave's --script mode ignores
  # FESTDATADIR), so that place points into the private root, as espeak-ng-data did in stage 2
  for d in /usr/share/festival /usr/lib/festival; do [ -e $d ] || ln -s "$R$d" $d; done
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/festlib:%s exec %s/usr/bin/festival "$@"\n' "$R" "$L" "$R" >"$R/wrap/festival"
  printf '#!/bin/sh\nexec %s/wrap/festival --script %s/usr/bin/text2wave "$@"\n' "$R" "$R" >"$R/wrap/text2wave"
fi
if [ -x "$R/usr/bin/sox" ]; then
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/soxlib:%s exec %s/usr/bin/sox "$@"\n' "$R" "$L" "$R" >"$R/wrap/sox"
  # sox loads its format plugins (GSM among them) from this fixed place only
  [ -e /usr/lib/x86_64-linux-gnu/sox/libsox_fmt_gsm.so ] || { mkdir -p /usr/lib/x86_64-linux-gnu/sox &&
    cp "$L/sox/libsox_fmt_gsm.so" /usr/lib/x86_64-linux-gnu/sox/; }
fi
chmod +x "$R"/wrap/* 2>/dev/null || true
export PATH=$R/wrap:$R/usr/bin:$PATH LD_LIBRARY_PATH=$L
export WORKBENCH_WORDNET_DIR=$R/usr/share/wordnet PYTHONPATH=$S:$PWD FESTIVAL_VOICES=$R/usr/share/festival/voices
[ -d "$L/espeak-ng-data" ] && export ESPEAK_DATA_PATH=$L
# Fail in seconds, not after the synthesis budget, when a synthesiser does not run on this machine.
if ! { espeak-ng -q -w /tmp/smoke.wav "smoke test" && flite -voice slt -t "smoke test" -o /tmp/smoke2.wav; }; then
  echo "speech synthesis does not run here:"; ldd "$R/usr/bin/espeak-ng" "$R/usr/bin/flite" | grep "not found"; exit 1
fi
if [ -x "$R/usr/bin/festival" ]; then
  # every festival voice carried so far, training pool and held out, must speak English here
  for dir in "$R"/usr/share/festival/voices/*/*/; do
    v=$(basename "$dir")
    case $v in *.common) continue ;; esac
    rm -f /tmp/smoke3.wav
    if ! echo "smoke test" | timeout 60 text2wave -eval "(voice_$v)" -o /tmp/smoke3.wav 2>/tmp/smoke3.err ||
      [ "$(stat -c %s /tmp/smoke3.wav 2>/dev/null || echo 0)" -lt 8000 ]; then
      echo "festival voice $v does not speak here:"; head -c 600 /tmp/smoke3.err
      LD_LIBRARY_PATH=$R/festlib:$L ldd "$R/usr/bin/festival" | grep "not found"; exit 1
    fi
    echo "festival voice $v: $(stat -c %s /tmp/smoke3.wav) bytes"
  done
fi
if [ -x "$R/usr/bin/sox" ]; then
  sox /tmp/smoke2.wav -r 8000 -c 1 /tmp/smoke.gsm && sox /tmp/smoke.gsm -r 16000 -b 16 /tmp/smoke4.wav ||
    { echo "sox (GSM round trip) does not run here"; exit 1; }
fi
# training texts: stage 2/3's file, or stage 4's compressed one, unpacked once into /root/keep
texts=.carry/train_texts.txt
if [ ! -f $texts ]; then
  texts=/root/keep/train_texts.txt
  [ -f $texts ] || [ ! -f .carry/s4/train_texts.txt.xz ] || unxz .carry/s4/train_texts.txt.xz >$texts
fi
[ "${SETUP_ONLY:-0}" = 1 ] && { echo "setup done"; exit 0; }
deadline=$1
shift
if [ -n "${BASELINE_EVAL:-}" ]; then
  python3 -m training.evaluate_demo --model "$BASELINE_EVAL" --per-slice 60 --out "$OUT/eval_baseline.json" \
    >"$OUT/eval_baseline.log" 2>&1 &
fi
python3 -m training.train_demo --config training/config_broad.json --state-dir /root/keep \
  --out-dir "$OUT/model" --deadline-s "$deadline" --workers 16 --texts $texts "$@" 2>&1 |
  grep --line-buffered -v "it/s\]" | tee "$OUT/train.log"
if [ "${EVAL:-0}" = 1 ]; then
  python3 -m training.evaluate_demo --model "$OUT/model" --per-slice 60 --out "$OUT/eval.json" 2>&1 |
    grep --line-buffered -v "it/s\]" | tee "$OUT/eval.log" || echo "evaluation failed (eval.log)"
fi
wait || echo "baseline evaluation failed (eval_baseline.log)"
split -b 15M "$OUT/model/model.safetensors" "$OUT/model.safetensors.part-"
rm "$OUT/model/model.safetensors"
tar -C "$OUT" -czf "$OUT/model_files.tgz" model && rm -r "$OUT/model"
