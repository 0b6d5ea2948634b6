#!/usr/bin/env bash
# Cross-builds the runtime, `nimble` and `nimble-bench` for aarch64 into
# build-arm/, and installs (as root, only when missing) what that and running
# the result under qemu-aarch64 take: Debian's cross compiler, the arm64
# multiarch libraries the build links, and qemu-user. Idempotent; a second run
# on a ready machine costs a dpkg query and a no-op ninja. See docs/arm.md.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  meson ninja-build pkg-config python3 g++-aarch64-linux-gnu qemu-user
  # Header-only: the build machine's copies serve the cross build.
  libboost-dev libcli11-dev nlohmann-json3-dev libdlpack-dev
  # What the arm64 programs link, and what qemu-aarch64 loads them with
  # (/lib/ld-linux-aarch64.so.1, libstdc++).
  libc6:arm64 libstdc++6:arm64 libopenblas-dev:arm64 libzip-dev:arm64
  libsqlite3-dev:arm64 libssl-dev:arm64 libmimalloc-dev:arm64
)

# The arm64 packages need the architecture enabled before the package lists
# are read.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "build-arm: the arm64 architecture is not enabled in dpkg; run as root" >&2
    exit 1
  fi
  dpkg --add-architecture arm64
fi
bash scripts/install-deps.sh "${packages[@]}"

if [ ! -f build-arm/build.ninja ]; then
  meson setup build-arm --cross-file scripts/cross/aarch64-linux-gnu.ini >/dev/null
fi
ninja -C build-arm harness/cli/nimble harness/cli/nimble-bench
