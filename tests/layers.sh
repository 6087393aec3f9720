#!/usr/bin/env bash
# The layering check: every layer (src/LAYER/, include/rnn_dist/LAYER/, one static library each) uses only
# the layers that src/CMakeLists.txt links it with and what those expose (their PUBLIC links). Checked:
#   - includes: each #include "rnn_dist/M/..." in a layer's files names M = the layer or one it may use,
#     and an existing header; no header sits outside a layer folder;
#   - symbols: each symbol a layer's archive leaves undefined and another layer's archive defines belongs
#     to a layer it may use (so a call across the graph is caught even where an include was not needed);
#   - the graph itself has no cycle, and every source file under src/ is listed in src/CMakeLists.txt;
#   - every header and source opens with a comment line saying what it is for.
# Usage: tests/layers.sh SOURCE_DIR BUILD_DIR/layers.txt
# (layers.txt, written by CMake: "name archive public:LAYER... private:LAYER..." per layer)
set -euo pipefail
export LC_ALL=C
src=$1 layers=$2
cd "$src"
fail=0
problem() { echo "layers: $*" >&2; fail=1; }

declare -A direct public archive
names=()
while read -r name lib deps; do
  names+=("$name")
  archive[$name]=$lib
  direct[$name]=
  public[$name]=
  for d in $deps; do
    direct[$name]+=" ${d#*:}"
    [[ $d == public:* ]] && public[$name]+=" ${d#*:}"
  done
done <"$layers"

# reach L KIND: L and every layer reached from it along KIND (direct or public) links.
reach() {
  local -n edges=$2
  local seen=" $1 " queue=(${edges[$1]}) d
  while ((${#queue[@]})); do
    d=${queue[0]}
    queue=("${queue[@]:1}")
    [[ $seen == *" $d "* ]] && continue
    seen+="$d "
    queue+=(${edges[$d]:-})
  done
  echo "$seen"
}
# closure[L]: what L may use: itself, the layers it links, and what those expose (their public links).
declare -A closure
for n in "${names[@]}"; do
  closure[$n]=" $n "
  for d in ${direct[$n]}; do closure[$n]+=$(reach "$d" public); done
done

# No cycle: no layer is reachable from the layers it links.
for n in "${names[@]}"; do
  for d in ${direct[$n]}; do
    [[ $(reach "$d" direct) == *" $n "* ]] && problem "cycle: $n links $d, which leads back to $n"
  done
done

# The files of a layer; src/stub/ implements the cuda layer's headers in builds without CUDA.
files_of() {
  local dirs=("src/$1" "include/rnn_dist/$1")
  [[ $1 == cuda ]] && dirs+=(src/stub)
  find "${dirs[@]}" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' \) 2>/dev/null | sort
}

for n in "${names[@]}"; do
  while read -r f; do
    [[ -n $f ]] || continue
    head -1 "$f" | grep -q '^// .' || problem "$f: does not open with a comment saying what it is for"
    while IFS=: read -r line inc; do
      h=${inc#*\"}
      h=${h%\"*}
      [[ -f include/$h ]] || { problem "$f:$line: includes $h, which is not a header of include/"; continue; }
      m=${h#rnn_dist/}
      m=${m%%/*}
      [[ $h == rnn_dist/*/* ]] || { problem "$f:$line: includes $h, outside every layer folder"; continue; }
      [[ ${closure[$n]} == *" $m "* ]] ||
        problem "$f:$line: the $n layer includes $h, but src/CMakeLists.txt does not let $n use $m"
    done < <(grep -n '^#include "rnn_dist/' "$f" | sed 's/:#include /:/')
  done < <(files_of "$n")
done

# Headers outside every layer, layer folders without a layer, sources no target builds.
while read -r f; do problem "$f: outside every layer folder"; done < <(find include/rnn_dist -maxdepth 1 -type f)
for d in src/*/ include/rnn_dist/*/; do
  l=$(basename "$d")
  [[ $l == stub ]] && continue
  [[ -n ${direct[$l]+x} ]] || problem "$d: a folder of no layer in src/CMakeLists.txt"
done
while read -r f; do
  grep -q "\b${f#src/}\b" src/CMakeLists.txt || problem "$f: not listed in src/CMakeLists.txt"
done < <(find src -type f \( -name '*.cpp' -o -name '*.cu' \) | sort)

# Symbols: strong definitions (weak ones are the inline functions and templates every user instantiates).
owner=$(mktemp)
trap 'rm -f "$owner"' EXIT
for n in "${names[@]}"; do
  nm --defined-only -g "${archive[$n]}" 2>/dev/null | awk -v l="$n" 'NF == 3 && $2 ~ /^[TDBRu]$/ { print $3, l }'
done | sort -u >"$owner"
crossing=0
for n in "${names[@]}"; do
  while read -r sym m; do
    [[ $m == "$n" ]] || crossing=$((crossing + 1))
    [[ ${closure[$n]} == *" $m "* ]] ||
      problem "the $n layer's archive uses $(c++filt "$sym"), defined by the $m layer, which $n may not use"
  done < <(nm -u "${archive[$n]}" 2>/dev/null | awk '{ print $NF }' | sort -u | join - "$owner")
done

if ((fail)); then
  echo "layers: FAILED (the graph is in src/CMakeLists.txt)" >&2
  exit 1
fi
echo "layers: ${#names[@]} layers (${names[*]}); includes, $crossing symbols used across layers and file comments all within the graph"
