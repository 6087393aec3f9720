#!/usr/bin/env bash
# End-to-end throughput of `rnn_prep --tokenizer char` on generated fortune-format text: prints MB/s, the
# peak RSS and the user and system CPU time of rnn_prep. Builds nothing.
# Usage: prep_throughput.sh BUILD_DIR [SIZE_MB (default 1024)]
# Needs about 6x SIZE_MB of free space in ${TMPDIR:-/tmp} (input, token spool, output); removes it all.
set -euo pipefail

BUILD_DIR=$(cd "${1:?usage: prep_throughput.sh BUILD_DIR [SIZE_MB]}" && pwd)
SIZE_MB=${2:-1024}
PREP="$BUILD_DIR/rnn_prep"
[[ -x $PREP ]] || { echo "prep_throughput: $PREP not found (build first)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# A 16 MB block of random sentences (a few non-ASCII words), records of 1-6 lines separated by "%",
# repeated up to the size: repetition does not help a tokenizer that looks at every byte.
awk 'BEGIN {
  srand(1);
  n = split("the of and to a in is it you that he was for on are with as his they be at one have this " \
            "from or had by word but what some we can out other were all there when up use your how said " \
            "an each she which do their time if will way about many then them write would like so these " \
            "her long make thing see him two has look more day could go come did number sound no most " \
            "people my over know water than call first who may down side been now find any new work part " \
            "take get place made live where after back little only round man year came show every good me " \
            "give our under name very through just form sentence great think say help low line differ turn " \
            "cause much mean before move right boy old too same tell does set three want air well also play " \
            "café naïve Grüße façade über 日本 東京 «quoted» — π≈3.14159 emoji🙂", w, " ");
  out = 0;
  while (out < 16 * 1024 * 1024) {
    lines = 1 + int(rand() * 6);
    rec = "";
    for (l = 0; l < lines; l++) {
      words = 5 + int(rand() * 11);
      s = "";
      for (k = 0; k < words; k++) s = s (k ? " " : "") w[1 + int(rand() * n)];
      s = toupper(substr(s, 1, 1)) substr(s, 2) (rand() < 0.8 ? "." : "?");
      rec = rec s "\n";
    }
    printf "%s%%\n", rec;
    out += length(rec) + 2;
  }
}' >"$WORK/block.txt"
block_bytes=$(stat -c %s "$WORK/block.txt")
target=$((SIZE_MB * 1024 * 1024))
for ((i = 0; i * block_bytes < target; i++)); do cat "$WORK/block.txt"; done >"$WORK/input.txt"
rm "$WORK/block.txt"
bytes=$(stat -c %s "$WORK/input.txt")

cmd=("$PREP" --input "$WORK/input.txt" --output-dir "$WORK/out" --format records --tokenizer char)
echo "input: $bytes bytes ($((bytes / 1024 / 1024)) MB) of generated fortune-format text"
echo "command: ${cmd[*]}"
if [[ -x /usr/bin/time ]]; then
  /usr/bin/time -f "%e %M %U %S" -o "$WORK/time.txt" "${cmd[@]}"
  read -r seconds rss_kb user_s sys_s <"$WORK/time.txt"
else
  start=$(date +%s.%N)
  "${cmd[@]}"
  seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
  rss_kb="" user_s="" sys_s=""
fi
awk -v b="$bytes" -v s="$seconds" -v r="$rss_kb" -v u="$user_s" -v k="$sys_s" 'BEGIN {
  printf "elapsed: %.2f s\nthroughput: %.1f MB/s (MB = 2^20 bytes)\n", s, b / 1048576 / s;
  if (r != "") printf "peak RSS: %.1f MB\ncpu: user %.2f s, system %.2f s\n", r / 1024, u, k;
  else print "peak RSS and cpu: unknown (no /usr/bin/time)";
}'
du -sh "$WORK/out" | awk '{ print "output size: " $1 }'
