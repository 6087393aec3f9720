#!/usr/bin/env bash
# The GPU check of issue 5, for a machine with an NVIDIA GPU but without the MPI/HDF5/Boost development
# files (so it cannot build rnn_dist itself). Two steps:
#
#   1. Here, on the build machine (with a CUDA build: cmake -S . -B build-cuda -DRNN_DIST_CUDA=ON ...):
#        scripts/gpu_check.sh bundle [BUILD_DIR=build-cuda]
#      packs rnn_dist, rnn_prep, test_cuda_backend, bench/train_throughput and h5diff with every shared
#      library they need except glibc, libstdc++ and the CUDA ones (cudart, cuBLAS, cuDNN, NCCL: large, and
#      the GPU machine has its own), plus Open MPI's plugins and data files (a single rank runs as an MPI
#      singleton), into build-gpu-bundle/bundle.tar.xz (about 20 MB; build-*/ is git-ignored).
#   2. On the GPU machine, with build-gpu-bundle carried along (the device tool: carry ["build-gpu-bundle"]):
#        scripts/gpu_check.sh run [OUT_DIR=gpu-check-out]
#      unpacks the bundle to /tmp, finds the CUDA/cuDNN/NCCL libraries (system, /usr/local/cuda, or the
#      nvidia-* Python wheels), runs the GPU tests, then trains the same small model for 20 steps on the CPU
#      and on the GPU and compares the two checkpoints' /model with h5diff -d 1e-3 and evaluates the GPU one on
#      both devices (rnn_dist eval --device, losses within 1e-4), then runs the throughput
#      benchmark against PyTorch (bench/gpu_throughput.sh: tokens/s of configurations G, S, L). Results go
#      to OUT_DIR: gpu_tests.log/.xml, train_cpu.log, train_gpu.log, h5diff.log, eval_*.log, bench/ (results.md,
#      results.jsonl, one log per run), summary.txt. Exit status 0 when every check passed.
#        scripts/gpu_check.sh bench [OUT_DIR=gpu-bench-out]
#      runs the benchmark alone. Its size: RNN_DIST_BENCH_STEPS timed steps per run (default 30) and at
#      most RNN_DIST_BENCH_BUDGET seconds (default 300, about 2-3 of them needed on an H200; 0 skips it in
#      `run`), so that `run` stays within about 8 minutes.
#      The device tool brings back at most 8 files from $OUT, so there the whole run is one command:
#        scripts/gpu_check.sh run /tmp/gpu; rc=$?; tar -C /tmp -czf "$OUT/gpu.tgz" gpu; cat /tmp/gpu/summary.txt; exit $rc
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
repo=$PWD
bundle_dir=$repo/build-gpu-bundle

# Libraries the GPU machine must provide itself (CUDA's) or that every Linux has (glibc, libstdc++).
skip_libs='linux-vdso|ld-linux|/libc\.so|/libm\.so|/libdl\.so|/libpthread\.so|/librt\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcudnn|libnccl'
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3

bundle() {
  local build=${1:-build-cuda}
  local bins=("$build/rnn_dist" "$build/rnn_prep" "$build/tests/test_cuda_backend" "$build/bench/train_throughput")
  for b in "${bins[@]}"; do
    [[ -x $b ]] || { echo "gpu_check: $b is missing: build with -DRNN_DIST_CUDA=ON into $build first" >&2; exit 2; }
  done
  ldd "$build/rnn_dist" | grep -q libcudnn || { echo "gpu_check: $build is not a CUDA build" >&2; exit 2; }
  local h5diff_bin; h5diff_bin=$(command -v h5diff) || { echo "gpu_check: h5diff not found (apt-get install hdf5-tools)" >&2; exit 2; }
  local stage; stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/ompi/lib" "$stage/ompi/share" "$stage/ompi/etc"
  cp "${bins[@]}" "$h5diff_bin" "$stage/bin/"
  cp -r "$ompi_lib" "$stage/ompi/lib/"
  cp -r /usr/share/openmpi "$stage/ompi/share/"
  cp -r /etc/openmpi/. "$stage/ompi/etc/"
  # Every library the programs and Open MPI's plugins load, resolved here, except those skipped above.
  { for f in "$stage"/bin/* "$stage"/ompi/lib/openmpi3/*.so; do ldd "$f"; done; } |
    awk '/=> \//{print $3}' | grep -v -E "$skip_libs" | sort -u |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  mkdir -p "$bundle_dir"
  tar -C "$stage" -cJf "$bundle_dir/bundle.tar.xz" .
  rm -rf "$stage"
  echo "gpu_check: wrote $bundle_dir/bundle.tar.xz ($(du -h "$bundle_dir/bundle.tar.xz" | cut -f1)); carry build-gpu-bundle"
}

# Directories holding the CUDA libraries the programs need, when the dynamic loader does not find them.
cuda_lib_dirs() {
  local need=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2) dirs=() lib d
  local roots=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu)
  # The nvidia-* wheels (PyTorch's image) keep each library under site-packages/nvidia/<name>/lib.
  local site; site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for d in $site; do [[ -d $d/nvidia ]] && roots+=("$d"/nvidia/*/lib); done
  for lib in "${need[@]}"; do
    ldconfig -p 2>/dev/null | grep -q "$lib" && continue
    for d in "${roots[@]}"; do
      if [[ -e $d/$lib ]]; then dirs+=("$d"); break; fi
    done
  done
  local IFS=:; echo "${dirs[*]}"
}

# Unpacks the bundle and sets the environment its programs need; sets root, bin, out and summary, and
# py_ld_path: the LD_LIBRARY_PATH from before, for python3 (PyTorch must not load the bundle's libraries).
setup() {
  out=${1:-gpu-check-out}
  mkdir -p "$out"; out=$(cd "$out" && pwd)
  [[ -f $bundle_dir/bundle.tar.xz ]] || { echo "gpu_check: $bundle_dir/bundle.tar.xz missing: run 'scripts/gpu_check.sh bundle' on the build machine and carry build-gpu-bundle" >&2; exit 2; }
  root=/tmp/rnn_dist_gpu
  rm -rf "$root"; mkdir -p "$root"; tar -C "$root" -xJf "$bundle_dir/bundle.tar.xz"
  bin=$root/bin
  py_ld_path=${LD_LIBRARY_PATH-}
  local cuda_dirs; cuda_dirs=$(cuda_lib_dirs)
  export LD_LIBRARY_PATH="$root/lib:$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Open MPI relocated to the bundle; one process, no daemon, no network transports.
  export OPAL_PKGLIBDIR=$root/ompi/lib/openmpi3 OPAL_PKGDATADIR=$root/ompi/share/openmpi OPAL_SYSCONFDIR=$root/ompi/etc
  export OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_btl=self OMPI_MCA_pml=ob1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  summary=$out/summary.txt
  : >"$summary"
  { nvidia-smi -L 2>&1 || true; } | tee "$out/gpu.txt"
}

note() { echo "$*" | tee -a "$summary"; }

# The throughput benchmark (bench/gpu_throughput.sh) with the bundle's binaries; returns its exit status.
bench_step() {
  local steps=${RNN_DIST_BENCH_STEPS:-30} budget=${RNN_DIST_BENCH_BUDGET:-300}
  RNN_DIST_BENCH_PY_LD_LIBRARY_PATH=$py_ld_path bash bench/gpu_throughput.sh "$bin" "$out/bench" "$steps" "$budget" \
    >"$out/bench.log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]]; then note "PASS benchmark ($steps steps per run; table in bench/results.md):"
  else note "FAIL benchmark (exit $rc, see bench.log and bench/):"; fi
  [[ -f $out/bench/results.md ]] && note "$(cat "$out/bench/results.md")"
  return $rc
}

bench() {
  setup "${1:-gpu-bench-out}"
  bench_step
  exit $?
}

run() {
  setup "$@"
  local status=0
  local missing; missing=$(ldd "$bin/rnn_dist" "$bin/test_cuda_backend" | grep "not found" | sort -u)
  if [[ -n $missing ]]; then
    note "FAIL libraries not found (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"; note "$missing"; exit 1
  fi

  # Time limits throughout: a hang (a driver or NCCL problem) must not eat the device time of the checks after it.
  # The tests and the short runs wait for every kernel (RNN_DIST_CUDA_SYNC=1), so that a kernel's error
  # names its launch; the benchmark does not.
  RNN_DIST_CUDA_SYNC=1 timeout 240 "$bin/test_cuda_backend" --gtest_output="xml:$out/gpu_tests.xml" 2>&1 | tee "$out/gpu_tests.log"
  local rc=${PIPESTATUS[0]}
  [[ $rc -eq 124 ]] && note "FAIL gpu tests timed out after 240 s (see gpu_tests.log for the last test started)"
  if grep -q "SKIPPED" "$out/gpu_tests.log" && ! grep -q "PASSED  \] [1-9]" "$out/gpu_tests.log"; then
    note "FAIL gpu tests were skipped: no GPU visible to the program"; status=1
  elif [[ $rc -ne 0 ]]; then note "FAIL gpu tests (exit $rc, see gpu_tests.log)"; status=1
  else note "PASS gpu tests"; fi

  # A small deterministic corpus: 400 lines of varied length.
  local work=$root/work; mkdir -p "$work"
  awk 'BEGIN { w = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex jolly boxing frogs";
               n = split(w, a, " "); srand(7);
               for (i = 0; i < 400; i++) { s = ""; k = 3 + int(rand() * 14);
                 for (j = 0; j < k; j++) s = s (j ? " " : "") a[1 + int(rand() * n)]; print s } }' >"$work/corpus.txt"
  "$bin/rnn_prep" --input "$work/corpus.txt" --output-dir "$work/data" --tokenizer char --valid-fraction 0.05 \
    >"$out/rnn_prep.log" 2>&1 || { note "FAIL rnn_prep (see rnn_prep.log)"; exit 1; }

  # SGD without dropout: cuDNN's inter-layer dropout masks are not the CPU's, and Adam would magnify
  # rounding differences of near-zero gradients into steps of size lr.
  local args=(train --train "$work/data/train.h5" --embed 16 --hidden 64 --layers 2 --batch-size 16 --max-steps 20
              --optimizer sgd --lr 0.5 --momentum 0.9 --seed 3 --log-every 5 --verbose)
  local dev
  for dev in cpu cuda; do
    rm -rf "$work/ckpt_$dev"
    if RNN_DIST_CUDA_SYNC=1 timeout 180 "$bin/rnn_dist" "${args[@]}" --device "$dev" --threads 4 --checkpoint-dir "$work/ckpt_$dev" \
        >"$out/train_$dev.log" 2>&1; then
      note "PASS train --device $dev: $(grep -i 'tokens/s' "$out/train_$dev.log" | tail -1)"
    else
      note "FAIL train --device $dev (see train_$dev.log)"; status=1
    fi
  done
  local ckpt_cpu ckpt_gpu
  ckpt_cpu=$(find "$work/ckpt_cpu" -name 'step-*.h5' 2>/dev/null | sort | tail -1)
  ckpt_gpu=$(find "$work/ckpt_cuda" -name 'step-*.h5' 2>/dev/null | sort | tail -1)
  if [[ -n $ckpt_cpu && -n $ckpt_gpu ]]; then
    if "$bin/h5diff" -d 1e-3 "$ckpt_cpu" "$ckpt_gpu" /model /model >"$out/h5diff.log" 2>&1; then
      note "PASS checkpoints equal within 1e-3: $(basename "$ckpt_cpu") cpu vs cuda"
    else
      note "FAIL checkpoints differ by more than 1e-3 (see h5diff.log)"; status=1
    fi
    # The GPU-trained checkpoint evaluated on each device: the same loss to 4 decimals.
    local dev loss_cpu="" loss_cuda=""
    for dev in cpu cuda; do
      timeout 120 "$bin/rnn_dist" eval --checkpoint "$ckpt_gpu" --data "$work/data/valid.h5" --device "$dev" --json \
        >"$out/eval_$dev.log" 2>&1
      printf -v "loss_$dev" '%s' "$(tail -1 "$out/eval_$dev.log" | sed -n 's/^{"loss":\([0-9.]*\),.*/\1/p')"
    done
    if [[ -n $loss_cpu && $(awk -v a="$loss_cpu" -v b="$loss_cuda" 'BEGIN { d = a - b; print (d < 0 ? -d : d) < 1e-4 }') == 1 ]]; then
      note "PASS eval of the GPU checkpoint: cpu $loss_cpu, cuda $loss_cuda"
    else
      note "FAIL eval of the GPU checkpoint: cpu '${loss_cpu}', cuda '${loss_cuda}' (see eval_cpu.log, eval_cuda.log)"; status=1
    fi
  else
    note "FAIL no checkpoint to compare (cpu: ${ckpt_cpu:-none}, cuda: ${ckpt_gpu:-none})"; status=1
  fi
  # A bidirectional classifier (cuDNN's CUDNN_BIDIRECTIONAL and the pooling kernels) trained on each
  # device: the same parameters within 1e-3.
  awk 'BEGIN { srand(5); split("good great fine nice|bad awful poor sad|red green blue grey", fam, "|")
    split("pos neg col", lab, " "); n = split("the a it was very so and but", filler, " ")
    for (i = 0; i < 600; i++) { c = 1 + int(rand() * 3); split(fam[c], w, " "); k = 3 + int(rand() * 12); line = ""
      for (j = 0; j < k; j++) line = line (j ? " " : "") (rand() < 0.5 ? w[1 + int(rand() * 4)] : filler[1 + int(rand() * n)])
      print lab[c] "\t" line } }' >"$work/cls.tsv"
  "$bin/rnn_prep" --format tsv --tokenizer word --input "$work/cls.tsv" --output-dir "$work/cls" >>"$out/rnn_prep.log" 2>&1 \
    || { note "FAIL rnn_prep --format tsv (see rnn_prep.log)"; status=1; }
  local cargs=(train --train "$work/cls/train.h5" --embed 16 --hidden 32 --layers 2 --bidirectional --pool mean
               --batch-size 16 --max-steps 20 --optimizer sgd --lr 0.5 --momentum 0.9 --seed 3 --log-every 5)
  for dev in cpu cuda; do
    rm -rf "$work/cls_$dev"
    RNN_DIST_CUDA_SYNC=1 timeout 120 "$bin/rnn_dist" "${cargs[@]}" --device "$dev" --checkpoint-dir "$work/cls_$dev" \
      >"$out/classify_$dev.log" 2>&1 || { note "FAIL classifier --device $dev (see classify_$dev.log)"; status=1; }
  done
  if "$bin/h5diff" -d 1e-3 "$work/cls_cpu/step-00000020.h5" "$work/cls_cuda/step-00000020.h5" /model /model \
      >"$out/h5diff_classify.log" 2>&1; then
    note "PASS bidirectional classifier: checkpoints equal within 1e-3, cpu vs cuda"
  else
    note "FAIL bidirectional classifier: checkpoints differ by more than 1e-3 (see h5diff_classify.log)"; status=1
  fi
  if [[ ${RNN_DIST_BENCH_BUDGET:-300} -gt 0 ]]; then bench_step || status=1; fi
  exit $status
}

case ${1:-} in
  bundle) shift; bundle "$@" ;;
  run) shift; run "$@" ;;
  bench) shift; bench "$@" ;;
  *) echo "usage: scripts/gpu_check.sh bundle [BUILD_DIR] | run [OUT_DIR] | bench [OUT_DIR]" >&2; exit 2 ;;
esac
