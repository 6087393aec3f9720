#!/usr/bin/env bash
# Installs the Debian packages rnn_dist needs when any is missing: as root with apt-get, otherwise it
# prints the one command to run and fails; rnn_dist_build also builds the Release tree in build/. Sourced
# by scripts/test.sh, demo.sh, classify_demo.sh, fuzz.sh and sanitize.sh.
RNN_DIST_PACKAGES="build-essential cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools libboost-program-options-dev libopenblas-dev libgtest-dev fortunes slurm-wlm munge iproute2 python3-torch python3-h5py python3-onnx python3-matplotlib nodejs npm"

rnn_dist_install_deps() {
  local missing=()
  for p in $RNN_DIST_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages; run: sudo apt-get install -y ${missing[*]}" >&2
    return 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Missing packages installed, then build/ configured (Release, plus $RNN_DIST_CMAKE_ARGS) and built.
rnn_dist_build() {
  rnn_dist_install_deps
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${RNN_DIST_CMAKE_ARGS:-} "$@"
  cmake --build build -j"$(nproc)"
}
