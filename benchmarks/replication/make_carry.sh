#!/usr/bin/env bash
# Builds the device carry of benchmarks/replication/device_run.sh into DEST (default /work/main/.carry/56) on a
# Debian bookworm machine with apt lists and gcc: the TTS packages as one pruned root, the stand-in libraries, the
# wheels the device image lacks, and this checkout's workbench/ (without the demo model) and benchmarks/.
# Usage, from the repository root: benchmarks/replication/make_carry.sh [DEST]
# CODE_ONLY=1 refreshes only the code (workbench/ and benchmarks/) of a carry built before.
set -euo pipefail
DEST=${1:-/work/main/.carry/56}
code() {
  rm -rf "$DEST/workbench" && cp -r workbench "$DEST/workbench"
  rm -rf "$DEST/workbench/demo_model" && find "$DEST/workbench" -name __pycache__ -prune -exec rm -rf {} +
  rm -rf "$DEST/benchmarks" && mkdir -p "$DEST/benchmarks/replication"
  cp benchmarks/search_replication.py "$DEST/benchmarks/"
  cp benchmarks/replication/device_run.sh benchmarks/replication/pick_rule.py "$DEST/benchmarks/replication/"
}
if [ "${CODE_ONLY:-0}" = 1 ]; then
  [ -f "$DEST/tts-root.tar.xz" ] || { echo "error: $DEST holds no carry to refresh; run without CODE_ONLY" >&2; exit 1; }
  code && du -sb "$DEST" && exit 0
fi
T=$(mktemp -d)
mkdir -p "$DEST/lib" "$DEST/festlib" "$DEST/whl" "$T/debs" "$T/root"
(cd "$T/debs" && apt-get download espeak-ng espeak-ng-data libespeak-ng1 libpcaudio0 libsonic0 flite libflite1 \
  festival libestools2.5 festlex-cmu festlex-poslex festvox-kallpc16k festvox-kdlpc16k wordnet-base)
for f in "$T"/debs/*.deb; do dpkg -x "$f" "$T/root"; done
for f in "$T"/root/usr/lib/x86_64-linux-gnu/espeak-ng-data/*_dict; do
  [ "$(basename "$f")" = en_dict ] || rm "$f"  # every voice of workbench.speech.tts is English
done
rm -rf "$T"/root/usr/share/doc "$T"/root/usr/share/man "$T"/root/usr/share/lintian
tar -C "$T/root" -cf - . | xz -9 -T0 >"$DEST/tts-root.tar.xz"
gcc -O2 -shared -fPIC -Wl,-soname,libpcaudio.so.0 -o "$DEST/lib/libpcaudio.so.0" training/stubs/pcaudio_stub.c
gcc -O2 -shared -fPIC -Wl,--version-script=training/stubs/pulse_simple_stub.map -Wl,-soname,libpulse-simple.so.0 \
  -o "$DEST/festlib/libpulse-simple.so.0" training/stubs/pulse_simple_stub.c
cp -L /lib/x86_64-linux-gnu/libtinfo.so.6 /lib/x86_64-linux-gnu/libgomp.so.1 "$DEST/festlib/"
# flite links libasound for playback; the device machine has none
cp -L /usr/lib/x86_64-linux-gnu/libasound.so.2 "$DEST/lib/"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$DEST/whl" soundfile==0.14.0 onnx_graphsurgeon==0.6.1 polygraphy==0.53.6 \
  jiwer==4.0.0 rapidfuzz==3.14.6 cffi==2.0.0 pycparser==3.0
code
rm -rf "$T"
du -sb "$DEST"
