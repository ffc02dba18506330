#!/usr/bin/env bash
# Compares two tessera-bench binaries on one shape on a noisy machine: A-B-B-A rounds (each round
# runs both, in alternating order, so a drift of the machine hits both alike), then per part of the
# cycle (median cycle CPU, snapshot, session open and close, each action) the mean of A, the mean of
# B, and the geometric mean of the paired ratios B/A. On a 2-core VM whose speed drifts 20-40% in
# minutes, differences under ~5% need 10 rounds or more to show; the sum of the parts' means is a
# better guide than the median cycle. Decisions: the last cycle's decisions digest of A and B is
# compared too (a change meant to keep decisions must print "same").
#
#   scripts/bench-ab.sh A-BINARY B-BINARY SHAPE [ROUNDS=8] [CYCLES=4] [extra tessera-bench args...]
#   e.g. scripts/bench-ab.sh /tmp/bench-old build/bench/tessera-bench churn-nodes 10
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
A=$1 B=$2 SHAPE=$3 ROUNDS=${4:-8} CYCLES=${5:-4}
shift $(( $# < 5 ? $# : 5 ))
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
run() {  # run WHO BINARY [extra args]
  local who=$1 bin=$2
  shift 2
  echo "$who $("$bin" cycle --shape "$SHAPE" --cycles "$CYCLES" "$@" 2>/dev/null | tail -1)" >> "$OUT"
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then run A "$A" "$@"; run B "$B" "$@"; else run B "$B" "$@"; run A "$A" "$@"; fi
done
python3 - "$OUT" "$SHAPE" <<'PY'
import json, statistics, sys
rows = {"A": [], "B": []}
digests = {"A": set(), "B": set()}
for line in open(sys.argv[1]):
    who, text = line.split(" ", 1)
    d = json.loads(text)
    row = {"cycle (median cpu)": d["median_cycle_cpu_ms"], "snapshot": d["snapshot_ms"],
           "session open": d["session_open_ms"], "session close": d["session_close_ms"]}
    row.update(d["action_ms"])
    rows[who].append(row)
    digests[who].add(d["decisions_digest_last_cycle"])
A, B = rows["A"], rows["B"]
print("%s, %d rounds: part, mean A ms, mean B ms, geomean of paired B/A" % (sys.argv[2], len(A)))
for key in A[0]:
    pairs = [(a[key], b[key]) for a, b in zip(A, B) if a[key] > 0 and b[key] > 0]
    ratio = statistics.geometric_mean([b / a for a, b in pairs]) if pairs else float("nan")
    print("  %-20s %8.1f %8.1f  %.3f" % (key, statistics.mean(a[key] for a in A), statistics.mean(b[key] for b in B), ratio))
parts = [k for k in A[0] if k != "cycle (median cpu)"]
print("  %-20s %8.1f %8.1f" % ("sum of the parts", sum(statistics.mean(a[k] for a in A) for k in parts),
                               sum(statistics.mean(b[k] for b in B) for k in parts)))
print("decisions:", "same" if digests["A"] == digests["B"] else "DIFFER %s / %s" % (sorted(digests["A"]), sorted(digests["B"])))
PY
