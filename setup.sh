#!/usr/bin/env bash
# Installs everything the workbench needs on a fresh Debian machine (run as root):
# system packages (TTS voices, sox, WordNet text, libsndfile, Chromium for browser tests, a C++ compiler and
# zlib for the kenlm module), the CPU build of PyTorch, the workbench with its extras (Ray for --ray among
# them), and the beam-search decoder: pyctcdecode (pure Python; installed without its dependency pins, which
# would downgrade NumPy 2 to 1.x, plus its one real dependency pygtrie) and kenlm (builds from source).
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
APT_PACKAGES=(espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k sox libsndfile1 wordnet-base chromium chromium-driver g++ zlib1g-dev)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
PIP="python3 -m pip"
python3 -c "import torch; assert torch.__version__.startswith('2.13')" 2>/dev/null || $PIP install -q torch==2.13.0
$PIP install -q -e ".[app,dev,trt,ray]"
$PIP install -q --no-deps "pyctcdecode==0.5.0" && $PIP install -q "pygtrie>=2.1,<3" "kenlm==0.3.0"
echo "setup complete"
