#!/usr/bin/env bash
# Installs the Debian packages rnn_dist needs when any is missing: as root with apt-get, otherwise it
# prints the one command to run and fails; rnn_dist_build also builds the Release tree in build/. Sourced
# by scripts/test.sh, demo.sh, classify_demo.sh, fuzz.sh and sanitize.sh.
RNN_DIST_PACKAGES="build-essential cmake pkg-config xz-utils libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools libboost-program-options-dev libopenblas-dev libdnnl-dev ocl-icd-opencl-dev libsentencepiece-dev python3-sentencepiece libgtest-dev fortunes slurm-wlm munge iproute2 strace python3-torch python3-h5py python3-onnx python3-matplotlib nodejs"
# onnxruntime's CPU runtime for the ONNX export's test, from the npm registry into .cache/node (its install
# script would fetch GPU extras, hence --ignore-scripts; the CPU binary ships inside the package).
RNN_DIST_NPM_PACKAGES="onnxruntime-node@1.20.1"

rnn_dist_install_deps() {
  local missing=()
  for p in $RNN_DIST_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Debian's nodejs comes without npm; NodeSource's includes it (and conflicts with Debian's npm package).
  command -v npm > /dev/null || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages; run: sudo apt-get install -y ${missing[*]}" >&2
    return 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The npm packages, once, into .cache/node of the working directory (the repository root). Without the
# registry (no network, a proxy whose certificate npm does not trust: set NODE_EXTRA_CA_CERTS) this warns
# and goes on: the ONNX runtime test then says it is skipped, and why.
rnn_dist_install_npm() {
  [ -d .cache/node/node_modules/onnxruntime-node ] && return 0
  mkdir -p .cache/node
  echo "installing from npm: $RNN_DIST_NPM_PACKAGES"
  npm install --prefix .cache/node --ignore-scripts --no-audit --no-fund $RNN_DIST_NPM_PACKAGES > .cache/node/install.log 2>&1 \
    || echo "warning: npm install $RNN_DIST_NPM_PACKAGES failed ($(grep -m1 'npm ERR! code' .cache/node/install.log)):" \
      "the ONNX runtime test will be skipped; see .cache/node/install.log" >&2
}

# Missing packages installed, then build/ configured (Release, plus $RNN_DIST_CMAKE_ARGS) and built.
rnn_dist_build() {
  rnn_dist_install_deps
  rnn_dist_install_npm
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${RNN_DIST_CMAKE_ARGS:-} "$@"
  cmake --build build -j"$(nproc)"
}
