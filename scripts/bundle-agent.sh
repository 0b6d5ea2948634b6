#!/usr/bin/env bash
# Packs nimble-bench (agent, run and baseline in one binary) for bare hosts
# (issue 47): one tarball, nimble-agent-COMMIT-ARCH.tar.gz, whose folder
# nimble-agent/ runs with nothing installed but glibc. It holds the binary
# (and, where the build generates code, the ld.lld it links kernels with), every
# library of their dependency closure except glibc's own, each found through
# RUNPATH ($ORIGIN/../lib on the programs, $ORIGIN on the libraries), the
# systemd unit, a cloud-init example, BUNDLE (what is in it) and README.txt.
#
#   scripts/bundle-agent.sh [--arch x86_64|aarch64] [--build-dir DIR] [--out FILE|DIR]
#
# Without --build-dir it packages build/ (x86_64) or build-arm/ (aarch64),
# building them first when their nimble-bench is missing; with it, it only
# packages that build. Installs (as root, only when missing) patchelf and
# binutils, and qemu-user for aarch64 (to ask the binary its commit).
# Idempotent: the tarball is written beside its final name and renamed.
set -euo pipefail

caller_dir=$PWD
cd "$(dirname "$0")/.."
source_dir=$PWD

usage() {
  echo "usage: scripts/bundle-agent.sh [--arch x86_64|aarch64] [--build-dir DIR] [--out FILE|DIR]"
}
die() {
  echo "bundle-agent: $*" >&2
  exit 1
}
absolute() {
  case "$1" in
    /*) echo "$1" ;;
    *) echo "$caller_dir/$1" ;;
  esac
}

arch=x86_64
build_dir=
out=
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=${2:?--arch needs a value}; shift 2 ;;
    --arch=*) arch=${1#*=}; shift ;;
    --build-dir) build_dir=$(absolute "${2:?--build-dir needs a value}"); shift 2 ;;
    --build-dir=*) build_dir=$(absolute "${1#*=}"); shift ;;
    --out) out=$(absolute "${2:?--out needs a value}"); shift 2 ;;
    --out=*) out=$(absolute "${1#*=}"); shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument $1" ;;
  esac
done

case "$arch" in
  x86_64) triplet=x86_64-linux-gnu machine='X86-64' loader=/lib64/ld-linux-x86-64.so.2 ;;
  aarch64) triplet=aarch64-linux-gnu machine='AArch64' loader=/lib/ld-linux-aarch64.so.1 ;;
  *) die "--arch is x86_64 or aarch64, not $arch" ;;
esac

tools=(patchelf binutils)
# An aarch64 binary runs here only through qemu-user (no binfmt_misc).
[ "$arch" = aarch64 ] && tools+=(qemu-user)
bash scripts/install-deps.sh "${tools[@]}"

if [ -z "$build_dir" ]; then
  if [ "$arch" = x86_64 ]; then
    build_dir=$source_dir/build
    [ -x "$build_dir/harness/cli/nimble-bench" ] || bash scripts/build.sh
  else
    build_dir=$source_dir/build-arm
    [ -x "$build_dir/harness/cli/nimble-bench" ] || bash scripts/build-arm.sh
  fi
fi
binary=$build_dir/harness/cli/nimble-bench
[ -x "$binary" ] || die "no $binary (build it first)"

# The ELF machine of a file ("X86-64", "AArch64"), or "" for a non-ELF file.
elf_machine() {
  LC_ALL=C readelf -h "$1" 2>/dev/null | sed -n 's/^ *Machine: *//p' |
    sed 's/Advanced Micro Devices //'
}
[ "$(elf_machine "$binary")" = "$machine" ] ||
  die "$binary is not an $arch program ($(elf_machine "$binary"))"

# What runs a program of $arch here.
runner=()
if [ "$arch" = aarch64 ] && [ "$(uname -m)" != aarch64 ]; then
  runner=(qemu-aarch64)
fi

# glibc's own libraries: every host has them, and they must match its loader.
is_glibc() {
  case "$1" in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | \
      libutil.so.* | libmvec.so.* | libanl.so.* | libBrokenLocale.so.* | libnss_*.so.* | \
      libthread_db.so.* | ld-linux*.so.*)
      return 0 ;;
  esac
  return 1
}
# The CUDA runtime comes with the GPU host's CUDA installation (the module
# that needs it finds it at /usr/local/cuda/lib64); far too large to ship.
is_from_cuda() {
  case "$1" in
    libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.*) return 0 ;;
  esac
  return 1
}

dynamic_entries() {
  LC_ALL=C readelf -d "$1" 2>/dev/null | sed -n "s/.*($2).*\[\(.*\)\]$/\1/p"
}

# Where the loader would find `name` for `file`: its own RUNPATH/RPATH
# first, then the multiarch directories (readelf, not ldd: ldd cannot run a
# foreign binary). The right machine only: /usr/lib may hold others.
search_dirs=("/usr/local/lib/$triplet" "/lib/$triplet" "/usr/lib/$triplet" /usr/local/lib /lib /usr/lib)
find_library() {
  local name=$1 file=$2 origin dir
  origin=$(dirname "$(readlink -f "$file")")
  local dirs=()
  local path
  for path in $(dynamic_entries "$file" 'RUNPATH\|RPATH' | tr ':' ' '); do
    dirs+=("${path//\$ORIGIN/$origin}")
  done
  for dir in "${dirs[@]}" "${search_dirs[@]}"; do
    if [ -e "$dir/$name" ] && [ "$(elf_machine "$dir/$name")" = "$machine" ]; then
      readlink -f "$dir/$name"
      return 0
    fi
  done
  return 1
}

stage=$(mktemp -d "${TMPDIR:-/tmp}/nimble-bundle-XXXXXX")
trap 'rm -rf "$stage"' EXIT
top=$stage/nimble-agent
mkdir -p "$top/bin" "$top/lib"

# Each file in the bundle and where it came from: its NEEDED entries resolve
# against the original's RUNPATH and directory.
declare -A original_of=()
cp "$binary" "$top/bin/nimble-bench"
original_of[$top/bin/nimble-bench]=$binary
roots=("$top/bin/nimble-bench")

# Kernel code generation links with ld.lld beside the binary
# (nimble/compiler/codegen/link.cc); only a build with LLVM generates code
# (the aarch64 cross build has none).
binary_needs=$(dynamic_entries "$binary" NEEDED)
if grep -q '^libLLVM' <<<"$binary_needs"; then
  linker=
  for candidate in /usr/lib/llvm-19/bin/ld.lld /usr/bin/ld.lld-19; do
    if [ -e "$candidate" ] && [ "$(elf_machine "$(readlink -f "$candidate")")" = "$machine" ]; then
      linker=$(readlink -f "$candidate")
      break
    fi
  done
  [ -n "$linker" ] || die "the build generates code but there is no $arch ld.lld-19 (install lld-19)"
  # lld is one binary for every flavour: the name ld.lld makes it the ELF linker.
  cp "$linker" "$top/bin/ld.lld"
  original_of[$top/bin/ld.lld]=$linker
  roots+=("$top/bin/ld.lld")
fi

# Libraries the runtime opens by name (dlopen), outside any NEEDED list.
dlopened=()
if openblas=$(find_library libopenblas.so.0 "$binary"); then
  dlopened+=("libopenblas.so.0:$openblas")
else
  echo "bundle-agent: warning: no $arch libopenblas.so.0 to bundle (dense kernels need it)" >&2
fi
if [ -e "$build_dir/nimble/vm/libnimble_cuda.so" ]; then
  dlopened+=("libnimble_cuda.so:$build_dir/nimble/vm/libnimble_cuda.so")
fi

# The dependency closure, breadth first, each library under its soname.
declare -A source_of=()
from_host=()
pending=()
copy_library() {
  local name=$1 path=$2
  [ -n "${source_of[$name]:-}" ] && return 0
  source_of[$name]=$path
  cp -L "$path" "$top/lib/$name"
  chmod u+w "$top/lib/$name"
  original_of[$top/lib/$name]=$path
  pending+=("$top/lib/$name")
}
for entry in "${dlopened[@]}"; do copy_library "${entry%%:*}" "${entry#*:}"; done
pending+=("${roots[@]}")
while [ ${#pending[@]} -gt 0 ]; do
  file=${pending[0]}
  pending=("${pending[@]:1}")
  original=${original_of[$file]}
  for needed in $(dynamic_entries "$original" NEEDED); do
    if is_glibc "$needed" || is_from_cuda "$needed"; then
      from_host+=("$needed")
      continue
    fi
    [ -n "${source_of[$needed]:-}" ] && continue
    path=$(find_library "$needed" "$original") || die "$(basename "$original") needs $needed: not found"
    copy_library "$needed" "$path"
  done
done

# $ORIGIN is the loader's, not the shell's.
# shellcheck disable=SC2016
for program in "${roots[@]}"; do patchelf --set-rpath '$ORIGIN/../lib' "$program"; done
# shellcheck disable=SC2016
for library in "$top"/lib/*; do
  if [ "$(basename "$library")" = libnimble_cuda.so ]; then
    patchelf --set-rpath '$ORIGIN:/usr/local/cuda/lib64' "$library"
  else
    patchelf --set-rpath '$ORIGIN' "$library"
  fi
done

# Every file must now load from the bundle and glibc alone: the loader's own
# list, with no library path from our environment.
for file in "${roots[@]}" "$top"/lib/*; do
  listing=$(env -i "${runner[@]}" "$loader" --list "$file" 2>&1) ||
    die "the loader cannot list $(basename "$file"): $listing"
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_glibc "$name" && continue
    is_from_cuda "$name" && continue
    case "$(readlink -m "$path")" in
      "$top"/lib/*) ;;
      *) die "$(basename "$file") loads $name from $path, not from the bundle" ;;
    esac
  done <<<"$listing"
done

# The commit the binary itself reports: what its agent will send.
probe=$(env -i PATH=/usr/bin:/bin "${runner[@]}" "$top/bin/nimble-bench" probe 2>&1) ||
  die "the bundled nimble-bench does not run: $probe"
commit=$(sed -n 's/.*"commit":"\([^"]*\)".*/\1/p' <<<"$probe")
[ -n "$commit" ] || die "no commit in the bundled nimble-bench's probe: $probe"

# The newest glibc symbol version any file asks for: the oldest host glibc.
glibc=$(for file in "${roots[@]}" "$top"/lib/*; do
  LC_ALL=C readelf -V --wide "$file" | grep -o 'Name: GLIBC_[0-9][0-9.]*' | sed 's/Name: GLIBC_//' ||
    true
done | sort -V | tail -n 1)

# The Debian package (and version) a library came from, for its licence and
# for security updates; the build's own files have none.
package_arch=${arch/x86_64/amd64}
package_arch=${package_arch/aarch64/arm64}
package_of() {
  local path owner version
  for path in "$@"; do
    owner=$(dpkg -S "$path" 2>/dev/null || dpkg -S "${path#/usr}" 2>/dev/null || true)
    owner=${owner%%:*}
    owner=${owner%%,*}
    [ -n "$owner" ] || continue
    version=$(dpkg-query -W -f='${Version}' "$owner:$package_arch" 2>/dev/null ||
      dpkg-query -W -f='${Version}' "$owner" 2>/dev/null || true)
    echo "$owner:$package_arch $version"
    return 0
  done
  echo "(not from a package)"
}

{
  echo "commit: $commit"
  echo "arch: $arch"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # shellcheck disable=SC1091
  echo "built on: $(. /etc/os-release && echo "$PRETTY_NAME") $(uname -m)"
  echo "needs: Linux $arch, glibc >= $glibc"
  echo "from the host: $(printf '%s\n' "${from_host[@]}" | sort -u | tr '\n' ' ' | sed 's/ $//')"
  programs=()
  for program in "${roots[@]}"; do programs+=("bin/$(basename "$program")"); done
  echo "programs: $(printf '%s\n' "${programs[@]}" | sort | tr '\n' ' ' | sed 's/ $//')"
  echo "libraries (file, copied from, Debian package):"
  for name in $(printf '%s\n' "${!source_of[@]}" | sort); do
    path=${source_of[$name]}
    echo "  lib/$name  $path  $(package_of "$path" "$(dirname "$path")/$name")"
  done
} >"$top/BUNDLE"

cp harness/agent/deploy/nimble-agent.service harness/agent/deploy/cloud-init.yaml "$top/"
cat >"$top/README.txt" <<EOF
Nimble agent $commit for $arch: nimble-bench with every library it needs
but glibc (>= $glibc), runs on a bare Debian 12 or Ubuntu 24.04.

Start it (the secret is the fleet's, the coordinator's HOST:PORT yours):

  sudo tar -xzf nimble-agent-$commit-$arch.tar.gz -C /opt
  sudo /opt/nimble-agent/bin/nimble-bench agent --coordinator HOST:7450 --secret-file /etc/nimble-agent/secret

The secret file must be mode 0600. As a service: write
/etc/nimble-agent/agent.env (NIMBLE_COORDINATOR=HOST:7450), copy
nimble-agent.service to /etc/systemd/system/ and
"systemctl enable --now nimble-agent"; cloud-init.yaml does all of it on a
new cloud host. BUNDLE lists what is inside.
EOF

if [ -z "$out" ]; then
  out=$caller_dir
fi
if [ -d "$out" ] || [ "${out%/}" != "$out" ]; then
  mkdir -p "$out"
  out=${out%/}/nimble-agent-$commit-$arch.tar.gz
fi
mkdir -p "$(dirname "$out")"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -cf - nimble-agent |
  gzip -6 -n >"$out.partial"
mv -f "$out.partial" "$out"

packed=$(du -h --apparent-size "$out" | cut -f1)
unpacked=$(du -sh --apparent-size "$top" | cut -f1)
echo "$out ($packed; $unpacked unpacked, ${#source_of[@]} libraries)"
