#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then the installed programs alone (no build tree on the PATH
# or in the run path): rnn_prep, rnn_dist train and eval, the plot
# script, the Python exporters from the prefix's module directory, the job scripts finding the installed
# binaries. A part whose Python modules are missing says so and is left out. $1 = build directory.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/harness.sh"
P=$T/prefix
cmake --install "$BUILD" --prefix "$P" > install.log 2>&1 || { bad "cmake --install: $(tail -2 install.log)"; finish; exit; }
for f in bin/rnn_dist bin/rnn_prep bin/rnn_dist_plot share/rnn_dist/jobs/train_node.sbatch; do
  [ -x "$P/$f" ] || bad "not installed (executable): $f"
done
pydir=$(dirname "$(find "$P" -name rnn_dist_torch.py | head -1)")
[ -f "$pydir/rnn_dist_onnx.py" ] && ok "installed: programs, job scripts and Python modules (in ${pydir#$P/})" \
  || bad "Python modules: $(find "$P" -name '*.py')"
# The run path may name system library directories, never the build tree.
readelf -d "$P/bin/rnn_dist" | grep -i "runpath\|rpath" | grep -q "$BUILD" && bad "the installed rnn_dist's run path names $BUILD"
ldd "$P/bin/rnn_dist" "$P/bin/rnn_prep" | grep -q "not found" && bad "missing libraries: $(ldd "$P/bin/rnn_dist" | grep 'not found')"

export PATH=$P/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
awk 'BEGIN { srand(2); for (i = 0; i < 150; i++) { k = 5 + int(rand() * 30); s = ""
  for (j = 0; j < k; j++) s = s substr("abcde fgh", 1 + int(rand() * 9), 1); print s } }' > text.txt
if rnn_prep --input text.txt --output-dir data --test-fraction 0.1 > prep.log 2>&1 \
   && rnn_dist train --train data/train.h5 --valid data/valid.h5 --embed 8 --hidden 8 --layers 1 --max-steps 4 \
        --checkpoint-dir ck --metrics m.jsonl --device cpu > train.log 2>&1 \
   && rnn_dist eval --checkpoint ck/step-00000004.h5 --data data/test.h5 --device cpu > eval.log 2>&1 \
   && [ "$(command -v rnn_dist)" = "$P/bin/rnn_dist" ]; then
  ok "installed rnn_prep, rnn_dist train and eval run: $(head -1 eval.log)"
else
  bad "installed programs: $(tail -1 prep.log) $(tail -1 train.log) $(tail -1 eval.log)"
fi
if python_with matplotlib > /dev/null; then
  "$PY" "$P/bin/rnn_dist_plot" --metrics m.jsonl --output m.png > plot.log 2>&1 && [ -s m.png ] \
    && ok "installed rnn_dist_plot draws $(cat plot.log)" || bad "rnn_dist_plot: $(cat plot.log)"
else
  echo "skip: rnn_dist_plot (no python3 with matplotlib)"
fi
if python_with onnx h5py > /dev/null; then
  PYTHONPATH=$pydir "$PY" -m rnn_dist_onnx --checkpoint ck/step-00000004.h5 --onnx m.onnx > onnx.log 2>&1 \
    && ok "the installed ONNX exporter runs as a module: $(cat onnx.log)" || bad "rnn_dist_onnx: $(cat onnx.log)"
else
  echo "skip: the ONNX exporter (no python3 with onnx and h5py)"
fi
if python_with torch h5py > /dev/null; then
  PYTHONPATH=$pydir "$PY" -c "import rnn_dist_torch as rt; print(type(rt.load('ck/step-00000004.h5').lstm).__name__)" > torch.log 2>&1 \
    && grep -q "^LSTM$" torch.log && ok "the installed PyTorch module loads the checkpoint" || bad "rnn_dist_torch: $(cat torch.log)"
else
  echo "skip: the PyTorch module (no python3 with torch and h5py)"
fi
# The job scripts' common part, from the prefix, finds the installed programs.
build=$(RNN_DIST_HOME=$P/share/rnn_dist bash -c 'source "$RNN_DIST_HOME/jobs/common.sh"; echo "$RNN_DIST_BUILD"')
[ "$build" = "$P/bin" ] && ok "jobs/common.sh from the prefix runs $build/rnn_dist" || bad "jobs: RNN_DIST_BUILD '$build'"
finish
