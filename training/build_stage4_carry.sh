#!/usr/bin/env bash
# Builds the carry of stage 4 (training/README.md) on a Debian bookworm machine with festival, sox, espeak-ng
# and the `.carry/debs` of stage 2 present. Stage 4 adds festival, its voices, sox and jiwer, which do not fit
# the 64 MiB a device call may carry next to stage 2's carry, so the carry is split and packed tighter:
#   .carry/s4/                    call 1 (synthesis): the espeak-ng/flite root of .carry/debs pruned (espeak-ng
#                                 dictionaries of languages never used, no docs) as one tar.xz; WordNet reduced
#                                 to its eval split (the only one used there; same sentences);
#                                 the training texts xz-compressed; festlib/, festival's private libraries
#   .carry/debs-festival/core     festival, libestools2.5
#   .carry/debs-festival/train    the festival voices of the training pool (training.voices.FESTIVAL_TRAINING)
#   .carry/debs-festival/eval     held-out festival voices and their English lexicons, sox (GSM slice)
#   .carry/s4eval/                evaluation extras: sox's libraries, jiwer + rapidfuzz wheels (cp312), the two
#                                 fortune categories (the held-out text slice)
# Usage: training/build_stage4_carry.sh   (from the repository root)
set -euo pipefail
C=.carry
T=$(mktemp -d)
mkdir -p $C/s4 $C/s4eval/whl $C/debs-festival/core $C/debs-festival/train $C/debs-festival/eval
get() { # get DIR PACKAGE...: apt-get download the packages not in DIR yet
  local dir=$1
  shift
  for p in "$@"; do ls "$dir/${p}_"*.deb >/dev/null 2>&1 || (cd "$dir" && apt-get download "$p"); done
}
get $C/debs-festival/core festival libestools2.5
# training pool (training.voices.FESTIVAL_TRAINING_VOICES) with the language support each voice loads
get $C/debs-festival/train festvox-italp16k festvox-itapc16k festlex-ifd festvox-ca-ona-hts festival-ca \
  festvox-suopuhe-mv festvox-suopuhe-common
get $C/debs-festival/eval festlex-cmu festlex-poslex festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts sox \
  libsox3 libsox-fmt-base

# espeak-ng + flite root, pruned
mkdir -p $T/root
for f in $C/debs/*.deb; do case $f in *wordnet*) ;; *) dpkg -x "$f" $T/root ;; esac; done
D=$T/root/usr/lib/x86_64-linux-gnu/espeak-ng-data
keep=" en af cs cy da de eo es et fi fr hr hu id is it lt lv ms no pt ro sk sl sq sv tr vi ga nl pl sw "
for f in $D/*_dict; do b=$(basename "$f" _dict); case $keep in *" $b "*) ;; *) rm "$f" ;; esac; done
rm -rf $T/root/usr/share/doc $T/root/usr/share/man $T/root/usr/share/lintian
tar -C $T/root -cf - . | xz -9 -T2 >$C/s4/tts-root.tar.xz

# WordNet: the device needs only the `eval` split (validation and evaluation texts; training texts come from the
# texts file), so data.noun holds each raw sentence that lands in that split as a quoted example and the other
# data files are empty: workbench.speech.text.sentence_pool()["eval"] is the same, the other splits are empty
mkdir -p $T/wn/wordnet && dpkg -x $C/debs/wordnet-base_*.deb $T/wnfull
python3 - $T/wnfull/usr/share/wordnet $T/wn/wordnet <<'EOF'
import os, sys
from pathlib import Path
from workbench.speech import text as T
full, out = Path(sys.argv[1]), Path(sys.argv[2])
keep = []
for raw in T._raw_sentences(full):
    text = T.normalise_text(raw).text
    words = text.split()
    if any(ch.isdigit() for ch in raw) or not 3 <= len(words) <= 22:
        continue
    if sum(len(w) == 1 and w not in ("A", "I") for w in words) > 1:
        continue
    if T.split_of(text) == "eval":
        keep.append(raw)
(out / "data.noun").write_text("".join(f'| "{r}"\n' for r in keep), encoding="latin-1")
for pos in ("verb", "adj", "adv"):
    (out / f"data.{pos}").write_text("", encoding="latin-1")
expected = T.sentence_pool()["eval"]
T.sentence_pool.cache_clear()
T.WORDNET_DIRS = (out,)
assert T.sentence_pool()["eval"] == expected, "reduced WordNet changes the eval split"
print(f"WordNet eval split: {len(keep)} raw sentences, {len(expected)} texts")
EOF
tar -C $T/wn -cf - wordnet | xz -9 >$C/s4/wordnet-eval.tar.xz
xz -9 -T2 -c $C/train_texts.txt >$C/s4/train_texts.txt.xz

# festival's private libraries: a stand-in for libpulse-simple (playback only; the real one pulls in libpulse,
# X11, dbus, systemd and codecs) plus the two the device image may lack; sox's libraries (GSM codec, ltdl, magic)
mkdir -p $C/s4/festlib $T/sl/soxlib
gcc -O2 -shared -fPIC -Wl,--version-script=training/stubs/pulse_simple_stub.map -Wl,-soname,libpulse-simple.so.0 \
  -o $C/s4/festlib/libpulse-simple.so.0 training/stubs/pulse_simple_stub.c
cp -L /lib/x86_64-linux-gnu/libtinfo.so.6 /lib/x86_64-linux-gnu/libgomp.so.1 $C/s4/festlib/
ldd /usr/bin/sox /usr/lib/x86_64-linux-gnu/sox/libsox_fmt_gsm.so | awk '/=>/ {print $3}' | sort -u |
  grep -v -E "/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*|libsox)\.so" |
  xargs -I{} cp -L {} $T/sl/soxlib/
tar -C $T/sl -cf - soxlib | xz -9 >$C/s4eval/sox-libs.tar.xz

python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d $C/s4eval/whl jiwer==4.0.0 rapidfuzz==3.14.6
# every fortune category file (training.corpus takes the held-out sentences minus the training categories' ones)
mkdir -p $T/fo/fortunes
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' -exec cp {} $T/fo/fortunes/ \;
tar -C $T/fo -cf - fortunes | xz -9 >$C/s4eval/fortunes.tar.xz
rm -rf $T
du -sb $C/s4 $C/s4eval $C/debs-festival/*
