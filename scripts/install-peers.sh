#!/usr/bin/env bash
# Installs the peer frameworks of `nimble-bench baseline` from PyPI, each into
# a virtual environment of its own, at the versions pinned in
# harness/baselines/peers.txt:
#   scripts/install-peers.sh [FRAMEWORK...]     (default: every framework there)
# Environments live in ${NIMBLE_PEERS_DIR:-$HOME/.local/share/nimble/peers}/FRAMEWORK,
# where `nimble-bench baseline` looks first. They are made from python3
# (Debian 12: Python 3.11; python3-venv is installed when missing), or
# NIMBLE_PEERS_PYTHON, or for one framework NIMBLE_PEERS_PYTHON_<FRAMEWORK>
# (DyNet's wheels stop at Python 3.8: NIMBLE_PEERS_PYTHON_DYNET=python3.8
# where there is one); without either, an existing environment keeps its
# interpreter. Idempotent: an environment made from the same pins and
# interpreter, with its framework in it, is left alone. Wheels only: a framework without a wheel for the
# interpreter and platform is reported as not installable, with pip's reason,
# rather than built from source.
# Prints one line per framework. Exit status 1 when an install failed for
# another reason (the network, a conflict), else 0.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
pins_file="$root/harness/baselines/peers.txt"
peers_dir=${NIMBLE_PEERS_DIR:-$HOME/.local/share/nimble/peers}

declare -A pins=()
order=()
while read -r framework requirements; do
  [[ -z "$framework" || "$framework" == \#* ]] && continue
  read -ra words <<<"$requirements"
  pins[$framework]=${words[*]}
  order+=("$framework")
done <"$pins_file"

frameworks=("$@")
[ ${#frameworks[@]} -eq 0 ] && frameworks=("${order[@]}")
for framework in "${frameworks[@]}"; do
  if [ -z "${pins[$framework]:-}" ]; then
    echo "install-peers: unknown framework '$framework' (${pins_file#"$root"/} has ${order[*]})" >&2
    exit 1
  fi
done

# The interpreter each framework's environment is made from: its
# NIMBLE_PEERS_PYTHON_<FRAMEWORK>, else NIMBLE_PEERS_PYTHON, else the one its
# environment was made from, else python3. Each is checked once.
declare -A interpreters=() versions=()
find_interpreter() {
  local framework=$1 override="NIMBLE_PEERS_PYTHON_${1^^}" wanted=python3 interpreter
  local stamp="$peers_dir/$1/nimble-pins.txt"
  if [ -n "${!override:-}" ]; then
    wanted=${!override}
  elif [ -n "${NIMBLE_PEERS_PYTHON:-}" ]; then
    wanted=$NIMBLE_PEERS_PYTHON
  elif [ -f "$stamp" ] && [ -x "$(sed -n 2p "$stamp")" ]; then
    wanted=$(sed -n 2p "$stamp")
  fi
  interpreter=$(command -v "$wanted") || {
    echo "install-peers: no interpreter '$wanted' (set NIMBLE_PEERS_PYTHON or $override)" >&2
    exit 1
  }
  interpreters[$framework]=$interpreter
  [ -n "${versions[$interpreter]:-}" ] && return
  # Debian splits venv's ensurepip into python3-venv.
  if ! "$interpreter" -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(readlink -f "$interpreter")" = "$(readlink -f /usr/bin/python3)" ]; then
      "$root/scripts/install-deps.sh" python3-venv
    else
      echo "install-peers: $interpreter cannot make virtual environments (no ensurepip)" >&2
      exit 1
    fi
  fi
  versions[$interpreter]=$("$interpreter" -c 'import sys; print(sys.version.split()[0])')
}
for framework in "${frameworks[@]}"; do find_interpreter "$framework"; done

failed=0
mkdir -p "$peers_dir"
for framework in "${frameworks[@]}"; do
  env_dir="$peers_dir/$framework"
  stamp="$env_dir/nimble-pins.txt"
  module=$framework
  [ "$framework" = pytorch ] && module=torch
  interpreter=${interpreters[$framework]}
  # What the environment is made from: a change of any line remakes it.
  wanted=$(printf '%s\n%s\n%s' "${pins[$framework]}" "$interpreter" "${versions[$interpreter]}")
  # Found, not imported: importing TensorFlow alone takes seconds.
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] &&
     "$env_dir/bin/python" -c "import importlib.util as u, sys; sys.exit(not u.find_spec('$module'))" \
       2>/dev/null; then
    echo "$framework: already there ($env_dir)"
    continue
  fi
  rm -rf "$env_dir"
  log=$(mktemp)
  # shellcheck disable=SC2086  # the requirements are words
  if "$interpreter" -m venv "$env_dir" >"$log" 2>&1 &&
     "$env_dir/bin/python" -m pip install --quiet --disable-pip-version-check \
       --only-binary :all: ${pins[$framework]} >"$log" 2>&1 &&
     "$env_dir/bin/python" -c "import $module" >"$log" 2>&1; then
    echo "$wanted" >"$stamp"
    echo "$framework: installed ${pins[$framework]} on Python ${versions[$interpreter]} ($env_dir)"
  else
    reason=$(grep -E '^(ERROR|[A-Za-z]*Error)' "$log" | head -1 || true)
    [ -z "$reason" ] && reason=$(tail -1 "$log")
    rm -rf "$env_dir"
    if grep -q 'Could not find a version that satisfies' "$log"; then
      echo "$framework: cannot be installed: PyPI has no wheel of it for Python" \
        "${versions[$interpreter]%.*} on $(uname -m) (pip: ${reason#ERROR: }; another" \
        "interpreter: NIMBLE_PEERS_PYTHON_${framework^^})"
    else
      echo "$framework: cannot be installed: ${reason#ERROR: }"
      failed=1
    fi
  fi
  rm -f "$log"
done
exit $failed
