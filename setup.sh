#!/usr/bin/env bash
# Installs everything the workbench needs on a fresh Debian machine (run as root):
# system packages (TTS voices, sox, WordNet text, libsndfile, Chromium for browser tests),
# the CPU build of PyTorch, and the workbench with its extras (Ray for --ray, and flashlight-text, the beam-search
# decoder with KenLM inside, as binary wheels: nothing is compiled).
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
APT_PACKAGES=(espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k sox libsndfile1 wordnet-base chromium chromium-driver)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
PIP="python3 -m pip"
python3 -c "import torch; assert torch.__version__.startswith('2.13')" 2>/dev/null || $PIP install -q torch==2.13.0
$PIP install -q -e ".[app,dev,trt,ray,beam]"
echo "setup complete"
