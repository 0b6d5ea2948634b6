#!/usr/bin/env bash
# Installs the Debian packages Nimble builds and tests with, or the packages
# named as arguments (scripts/build-arm.sh names the cross build's).
# Idempotent and non-interactive: only packages that are missing are
# installed, so a second run on a ready machine costs a dpkg query and
# nothing else.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config
  llvm-19-dev clang-19 lld-19 libzstd-dev
  libzip-dev libdlpack-dev
  libdnnl-dev libopenblas-dev libsqlite3-dev libboost-dev libmimalloc-dev
  libssl-dev openssl libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  python3-torch python3-numpy python3-onnx libonnx-dev libprotobuf-dev
  chromium fonts-dejavu-core zlib1g-dev valgrind
  # `agents start --via ssh` runs ssh and scp; its suite runs real sshds.
  openssh-client openssh-server
  # The agent bundle's suite makes bare Debian roots with it.
  debootstrap
)
if [ $# -gt 0 ]; then
  packages=("$@")
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
