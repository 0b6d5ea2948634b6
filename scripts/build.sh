#!/usr/bin/env bash
# Installs what is missing, configures (once) and builds Nimble into build/.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
if [ ! -f build/build.ninja ]; then
  meson setup build --native-file llvm-native.ini >/dev/null
fi
ninja -C build
