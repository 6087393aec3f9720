#!/usr/bin/env bash
# The GPU check (issues 5 and 25), for a machine with an NVIDIA GPU but without the MPI/HDF5/Boost
# development files (so it cannot build rnn_dist itself). Two steps:
#
#   1. Here, on the build machine (with a CUDA build: cmake -S . -B build-cuda -DRNN_DIST_CUDA=ON ...):
#        scripts/gpu_check.sh bundle [BUILD_DIR=build-cuda]
#      packs rnn_dist, rnn_prep, test_cuda_backend, bench/train_throughput and h5diff with every shared
#      library they need except glibc, libstdc++ and the CUDA ones (cudart, cuBLAS, cuDNN, NCCL: large, and
#      the GPU machine has its own), plus Open MPI's plugins and data files (a single rank runs as an MPI
#      singleton), into build-gpu-bundle/bundle.tar.xz (about 20 MB; build-*/ is git-ignored).
#   2. On the GPU machine, with build-gpu-bundle carried along (the device tool: carry ["build-gpu-bundle"]):
#        scripts/gpu_check.sh run [OUT_DIR=gpu-check-out]
#      unpacks the bundle, finds the CUDA/cuDNN/NCCL libraries (system, /usr/local/cuda, or the nvidia-*
#      Python wheels) and checks, each under its own time limit:
#        - the GPU tests (test_cuda_backend, RNN_DIST_CUDA_SYNC=1): every one must run and pass;
#        - a language model (dense, and with --sparse-embedding), a bidirectional classifier and a tagger
#          trained 20 steps on the CPU and on the GPU: parameters within 1e-3 (h5diff); the GPU's checkpoint
#          evaluated on both devices to the same loss (1e-4 relative); the language model in tf32 and bf16 within 1e-2 and 5e-2 of the CPU's loss;
#        - the benchmark against PyTorch (bench/gpu_throughput.sh: configs G, S, L in fp32, tf32, bf16):
#          a missed target (>= 1.2x PyTorch, < 15% outside the LSTM, <= 2 host synchronisations per step),
#          a run without a result or one killed at its limit is a FAIL, with the numbers.
#      Results go to OUT_DIR: summary.txt (one PASS/FAIL/SKIP line per check; its last line "RESULT: PASS"
#      or "RESULT: FAIL (n failed)", and without one the run was cut short), gpu_tests.log/.xml,
#      {lm,lm_sparse,classify,tag}_{cpu,gpu}.log, lm_{tf32,bf16}.log, h5diff_*.log, eval_*.log, rnn_prep.log,
#      bench.log, bench/ (results.md, results.jsonl, one log per run). Exit status 0 when every check passed.
#        scripts/gpu_check.sh bench [OUT_DIR=gpu-bench-out]
#      runs the benchmark alone. Its size: RNN_DIST_BENCH_STEPS timed steps per run (default 30) and at
#      most RNN_DIST_BENCH_BUDGET seconds (default 300, about 2-3 of them needed on an H200; 0 skips it in
#      `run`), so that `run` stays within about 8 minutes.
#      The device tool brings back at most 8 files from $OUT, so there the whole run is one command:
#        scripts/gpu_check.sh run /tmp/gpu; rc=$?; tar -C /tmp -czf "$OUT/gpu.tgz" gpu; cat /tmp/gpu/summary.txt; exit $rc
#   0. Before either, here: scripts/gpu_check.sh rehearse [BUILD_DIR=build] [OUT_DIR] runs both steps on this
#      machine without a GPU (any build, the one without the GPU path too), the GPU side on the CPU, the
#      benchmark on S in fp32 against PyTorch on the CPU, so that every path, option and file name exists
#      (tests/cli/gpu_check.sh). RNN_DIST_GPU_CHECK_BUNDLE_DIR and RNN_DIST_GPU_CHECK_ROOT move the bundle
#      and the unpacked tree (defaults build-gpu-bundle and /tmp/rnn_dist_gpu).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
repo=$PWD
bundle_dir=${RNN_DIST_GPU_CHECK_BUNDLE_DIR:-$repo/build-gpu-bundle}

# Libraries the GPU machine must provide itself (CUDA's) or that every Linux has (glibc, libstdc++).
skip_libs='linux-vdso|ld-linux|/libc\.so|/libm\.so|/libdl\.so|/libpthread\.so|/librt\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcudnn|libnccl'
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3

bundle() {
  local build=${1:-build-cuda}
  local bins=("$build/rnn_dist" "$build/rnn_prep" "$build/tests/test_cuda_backend" "$build/bench/train_throughput")
  for b in "${bins[@]}"; do
    [[ -x $b ]] || { echo "gpu_check: $b is missing: build with -DRNN_DIST_CUDA=ON into $build first" >&2; exit 2; }
  done
  [[ -n ${RNN_DIST_GPU_CHECK_REHEARSAL:-} ]] || ldd "$build/rnn_dist" | grep -q libcudnn \
    || { echo "gpu_check: $build is not a CUDA build" >&2; exit 2; }
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
  root=${RNN_DIST_GPU_CHECK_ROOT:-/tmp/rnn_dist_gpu}
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
  rehearsal=${RNN_DIST_GPU_CHECK_REHEARSAL:-}
  gpu_device=cuda; [[ -n $rehearsal ]] && gpu_device=cpu
  if command -v nvidia-smi >/dev/null; then nvidia-smi -L 2>&1 | tee "$out/gpu.txt"; else echo "no nvidia-smi" >"$out/gpu.txt"; fi
}

note() { echo "$*" | tee -a "$summary"; }

# The throughput benchmark (bench/gpu_throughput.sh) with the bundle's binaries; returns its exit status.
bench_step() {
  local steps=${RNN_DIST_BENCH_STEPS:-30} budget=${RNN_DIST_BENCH_BUDGET:-300}
  RNN_DIST_BENCH_PY_LD_LIBRARY_PATH=$py_ld_path timeout $((budget + 60)) bash bench/gpu_throughput.sh "$bin" "$out/bench" \
    "$steps" "$budget" >"$out/bench.log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]]; then note "PASS benchmark ($steps steps per run, every target met; table in bench/results.md):"
  elif [[ $rc -eq 124 ]]; then note "FAIL benchmark killed at its time limit (see bench.log and bench/):"
  else note "FAIL benchmark (exit $rc: a target missed or a run without a result; see bench.log and bench/):"; fi
  if [[ -f $out/bench/results.md ]]; then note "$(cat "$out/bench/results.md")"
  else note "FAIL benchmark: no results.md"; rc=1; fi
  return $rc
}

bench() {
  setup "${1:-gpu-bench-out}"
  bench_step
  exit $?
}

# Trains the same small model on the CPU and on the GPU side (--device $gpu_device), SGD without dropout:
# cuDNN's inter-layer dropout masks are not the CPU's, and Adam would magnify rounding differences of
# near-zero gradients into steps of size lr. NAME labels the logs and checkpoint directories.
train_pair() {  # NAME TIMEOUT_S ARGS...
  local name=$1 limit=$2 side dev; shift 2
  for side in cpu gpu; do
    dev=cpu; [[ $side == gpu ]] && dev=$gpu_device
    rm -rf "$work/${name}_$side"
    if RNN_DIST_CUDA_SYNC=1 timeout "$limit" "$bin/rnn_dist" "$@" --device "$dev" --checkpoint-dir "$work/${name}_$side" \
        >"$out/${name}_$side.log" 2>&1; then
      note "PASS $name --device $dev: $(grep -i 'tokens/s' "$out/${name}_$side.log" | tail -1)"
    else
      note "FAIL $name --device $dev (exit $?, 124 = killed at ${limit} s; see ${name}_$side.log)"; status=1
    fi
  done
}

# The two sides' last checkpoints of train_pair NAME: /model equal within TOL (absolute).
same_model() {  # NAME TOL
  local name=$1 tol=$2 a b
  a=$(find "$work/${name}_cpu" -name 'step-*.h5' 2>/dev/null | sort | tail -1)
  b=$(find "$work/${name}_gpu" -name 'step-*.h5' 2>/dev/null | sort | tail -1)
  if [[ -z $a || -z $b ]]; then
    note "FAIL $name: no checkpoint to compare (cpu: ${a:-none}, gpu: ${b:-none})"; status=1; return
  fi
  if "$bin/h5diff" -d "$tol" "$a" "$b" /model /model >"$out/h5diff_$name.log" 2>&1; then
    note "PASS $name: $(basename "$a") cpu vs gpu, parameters equal within $tol"
  else
    note "FAIL $name: parameters differ by more than $tol (see h5diff_$name.log)"; status=1
  fi
}

# The loss of a checkpoint on DATA, from rnn_dist eval --json on DEVICE ("" on failure).
eval_loss() {  # CHECKPOINT DATA DEVICE LOG
  timeout 120 "$bin/rnn_dist" eval --checkpoint "$1" --data "$2" --device "$3" --json >"$out/$4" 2>&1
  tail -1 "$out/$4" | sed -n 's/^{"loss":\([0-9.e+-]*\),.*/\1/p'
}

# |a - b| <= tol * |b|.
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(a != "" && d <= t * m) }'; }

run() {
  setup "$@"
  status=0
  local missing; missing=$(ldd "$bin/rnn_dist" "$bin/test_cuda_backend" | grep "not found" | sort -u)
  if [[ -n $missing ]]; then
    note "FAIL libraries not found (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"; note "$missing"; finish_run 1
  fi

  # Time limits throughout: a hang (a driver or NCCL problem) must not eat the device time of the checks after it.
  # The tests and the short runs wait for every kernel (RNN_DIST_CUDA_SYNC=1), so that a kernel's error
  # names its launch; the benchmark does not.
  RNN_DIST_CUDA_SYNC=1 timeout 240 "$bin/test_cuda_backend" --gtest_output="xml:$out/gpu_tests.xml" >"$out/gpu_tests.log" 2>&1
  local rc=$?
  local ran; ran=$(grep -c '^\[ RUN      \]' "$out/gpu_tests.log")
  if [[ $rc -eq 124 ]]; then note "FAIL gpu tests killed at 240 s (the last test started is at the end of gpu_tests.log)"; status=1
  elif [[ $rc -ne 0 ]]; then note "FAIL gpu tests (exit $rc): $(grep '^\[  FAILED  \]' "$out/gpu_tests.log" | sort -u | tr '\n' ' ')"; status=1
  elif grep -q '^\[  SKIPPED \]' "$out/gpu_tests.log"; then
    if [[ -n $rehearsal ]]; then note "SKIP gpu tests: $ran ran and skipped, as a rehearsal without a GPU must"
    else note "FAIL gpu tests were skipped: $(grep -m1 -A1 '^\[ RUN' "$out/gpu_tests.log" | tail -1)"; status=1; fi
  elif [[ $ran -eq 0 ]]; then note "FAIL gpu tests: none ran"; status=1
  else note "PASS gpu tests ($ran, RNN_DIST_CUDA_SYNC=1)"; fi

  # A small deterministic corpus: 400 lines of varied length.
  work=$root/work; mkdir -p "$work"
  awk 'BEGIN { w = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex jolly boxing frogs";
               n = split(w, a, " "); srand(7);
               for (i = 0; i < 400; i++) { s = ""; k = 3 + int(rand() * 14);
                 for (j = 0; j < k; j++) s = s (j ? " " : "") a[1 + int(rand() * n)]; print s } }' >"$work/corpus.txt"
  "$bin/rnn_prep" --input "$work/corpus.txt" --output-dir "$work/data" --tokenizer char --valid-fraction 0.05 \
    >"$out/rnn_prep.log" 2>&1 || { note "FAIL rnn_prep (see rnn_prep.log)"; finish_run 1; }

  # The language model, fp32: the parameters within 1e-3 after 20 steps, and the GPU's checkpoint
  # evaluated on both devices to the same loss (checkpoints move between the devices by name).
  local lm=(train --train "$work/data/train.h5" --embed 16 --hidden 64 --layers 2 --batch-size 16 --max-steps 20
            --optimizer sgd --lr 0.5 --momentum 0.9 --seed 3 --log-every 5 --verbose --threads 4)
  train_pair lm 180 "${lm[@]}"
  same_model lm 1e-3
  local ck loss_cpu loss_gpu
  ck=$(find "$work/lm_gpu" -name 'step-*.h5' 2>/dev/null | sort | tail -1)
  if [[ -n $ck ]]; then
    loss_cpu=$(eval_loss "$ck" "$work/data/valid.h5" cpu eval_cpu.log)
    loss_gpu=$(eval_loss "$ck" "$work/data/valid.h5" "$gpu_device" eval_gpu.log)
    if within "$loss_gpu" "$loss_cpu" 1e-4; then note "PASS eval of the GPU checkpoint: cpu $loss_cpu, gpu $loss_gpu"
    else note "FAIL eval of the GPU checkpoint: cpu '$loss_cpu', gpu '$loss_gpu' (see eval_cpu.log, eval_gpu.log)"; status=1; fi
  fi
  # The same training in tf32 and bf16 (the rehearsal, on a CPU, runs them in fp32): the validation loss
  # within their tolerances of the CPU's fp32 one (backend.h: tf32 about 1e-3 per product, bf16 1e-2).
  local cpu_ck; cpu_ck=$(find "$work/lm_cpu" -name 'step-*.h5' 2>/dev/null | sort | tail -1)
  local ref=""; [[ -n $cpu_ck ]] && ref=$(eval_loss "$cpu_ck" "$work/data/valid.h5" cpu eval_ref.log)
  local prec tol loss
  for prec in tf32 bf16; do
    tol=0.01; [[ $prec == bf16 ]] && tol=0.05
    rm -rf "$work/lm_$prec"
    local run_prec=$prec; [[ -n $rehearsal ]] && run_prec=fp32
    if RNN_DIST_CUDA_SYNC=1 timeout 120 "$bin/rnn_dist" "${lm[@]}" --device "$gpu_device" --precision "$run_prec" \
        --checkpoint-dir "$work/lm_$prec" >"$out/lm_$prec.log" 2>&1; then
      ck=$(find "$work/lm_$prec" -name 'step-*.h5' | sort | tail -1)
      loss=$(eval_loss "$ck" "$work/data/valid.h5" cpu "eval_$prec.log")
      if within "$loss" "$ref" "$tol"; then note "PASS lm --precision $prec: validation loss $loss, fp32 on the CPU $ref (within $tol)"
      else note "FAIL lm --precision $prec: validation loss '$loss', fp32 on the CPU '$ref' (tolerance $tol)"; status=1; fi
    else
      note "FAIL lm --precision $prec (exit $?; see lm_$prec.log)"; status=1
    fi
  done

  # The row-sparse embedding gradient (issue 30: SparseRows' kernel and the row update on the GPU): plain
  # SGD, whose sparse update is the dense one, so the same tolerance holds.
  train_pair lm_sparse 120 train --train "$work/data/train.h5" --embed 16 --hidden 64 --layers 2 --batch-size 16 \
    --max-steps 20 --optimizer sgd --lr 0.5 --momentum 0 --sparse-embedding --seed 3 --log-every 5 --threads 4
  same_model lm_sparse 1e-3

  # A bidirectional classifier (cuDNN's CUDNN_BIDIRECTIONAL and the pooling kernels) and a tagger.
  awk 'BEGIN { srand(5); split("good great fine nice|bad awful poor sad|red green blue grey", fam, "|")
    split("pos neg col", lab, " "); n = split("the a it was very so and but", filler, " ")
    for (i = 0; i < 600; i++) { c = 1 + int(rand() * 3); split(fam[c], w, " "); k = 3 + int(rand() * 12); line = ""
      for (j = 0; j < k; j++) line = line (j ? " " : "") (rand() < 0.5 ? w[1 + int(rand() * 4)] : filler[1 + int(rand() * n)])
      print lab[c] "\t" line } }' >"$work/cls.tsv"
  awk 'BEGIN { srand(6); split("ann bob cyd|oslo rome kiev|acme ibm sony", ent, "|"); split("PER LOC ORG", typ, " ")
    n = split("met in at and the visited from saw", filler, " ")
    for (i = 0; i < 500; i++) { k = 3 + int(rand() * 7)
      for (j = 0; j < k; j++) {
        if (rand() < 0.3) { c = 1 + int(rand() * 3); split(ent[c], w, " "); print w[1 + int(rand() * 3)] " X B-" typ[c] }
        else print filler[1 + int(rand() * n)] " X O" }
      print "" } }' >"$work/tag.conll"
  "$bin/rnn_prep" --format tsv --tokenizer word --input "$work/cls.tsv" --output-dir "$work/cls" >>"$out/rnn_prep.log" 2>&1 \
    || { note "FAIL rnn_prep --format tsv (see rnn_prep.log)"; status=1; }
  "$bin/rnn_prep" --format conll --input "$work/tag.conll" --output-dir "$work/tag" >>"$out/rnn_prep.log" 2>&1 \
    || { note "FAIL rnn_prep --format conll (see rnn_prep.log)"; status=1; }
  local small=(--embed 16 --hidden 32 --layers 2 --bidirectional --batch-size 16 --max-steps 20 --optimizer sgd --lr 0.5
               --momentum 0.9 --seed 3 --log-every 5)
  train_pair classify 120 train --train "$work/cls/train.h5" --pool mean "${small[@]}"
  same_model classify 1e-3
  train_pair tag 120 train --train "$work/tag/train.h5" "${small[@]}"
  same_model tag 1e-3

  if [[ ${RNN_DIST_BENCH_BUDGET:-300} -gt 0 ]]; then bench_step || status=1; fi
  finish_run $status
}

# The verdict as the summary's last line: a summary without one was cut short (the device's time limit),
# which is a failure too.
finish_run() {
  if [[ $1 -eq 0 ]]; then note "RESULT: PASS${rehearsal:+ (rehearsal: every path, option and file exists)}"
  else note "RESULT: FAIL ($(grep -c '^FAIL' "$summary") failed)"; fi
  exit "$1"
}

# The whole device script on this machine, without a GPU: a bundle of whatever build BUILD_DIR holds (one
# without the GPU path too), then `run` with the GPU side on the CPU, the benchmark on config S in fp32
# against PyTorch on the CPU, so that every path, option and file name the device run uses is exercised
# before device time is spent on it (tests/cli/gpu_check.sh runs it).
rehearse() {
  local build=${1:-build}; shift || true
  RNN_DIST_GPU_CHECK_REHEARSAL=1 bundle "$build" >/dev/null || exit 2
  RNN_DIST_GPU_CHECK_REHEARSAL=1 RNN_DIST_BENCH_DEVICE=cpu RNN_DIST_BENCH_PRECISIONS=fp32 RNN_DIST_BENCH_CONFIGS=S \
    RNN_DIST_BENCH_MAX_LEN=40 \
    RNN_DIST_BENCH_STEPS=${RNN_DIST_BENCH_STEPS:-3} RNN_DIST_BENCH_BUDGET=${RNN_DIST_BENCH_BUDGET:-120} run "$@"
}

case ${1:-} in
  bundle) shift; bundle "$@" ;;
  run) shift; run "$@" ;;
  bench) shift; bench "$@" ;;
  rehearse) shift; rehearse "$@" ;;
  *) echo "usage: scripts/gpu_check.sh bundle [BUILD_DIR] | run [OUT_DIR] | bench [OUT_DIR] | rehearse [BUILD_DIR] [OUT_DIR]" >&2; exit 2 ;;
esac
