#!/usr/bin/env bash
# Counts what the steady cycles of one shape execute, load and miss, the same on every run:
# `tessera-bench cycle` under callgrind's cache simulation (first level 32 KiB, last level 8 MiB:
# LL=BYTES to change it), counting only inside the bench's laterCycle frame (the cycles after the
# first), for two binaries side by side. Per cycle: instructions (Ir), first-level read misses
# (D1mr) and last-level read misses (DLmr), for the whole cycle and each part, then the functions
# with the most last-level misses of their own. Decisions: the last cycle's digest of A and B is
# compared (a change meant to keep decisions must print "same").
#
# Why: on a VM whose memory latency swings 2-5x within minutes, timings (scripts/bench-ab.sh) need
# many rounds to show a 10% change, and the heavy shapes' cycle waits on memory. These counts do
# not move between runs: a change that makes the cycle load fewer distant lines shows as fewer
# DLmr. They do not model hardware or software prefetch (a prefetch instruction counts as
# nothing), the TLB or the memory's speed: a change meant to overlap misses needs timing.
# Slow: ~50x the native time (the full default size takes 5-12 minutes; A and B run at once).
#
#   scripts/bench-misses.sh A-BINARY B-BINARY SHAPE [CYCLES=3] [extra tessera-bench args...]
#   e.g. scripts/bench-misses.sh /tmp/bench-old build/bench/tessera-bench churn-nodes
#        scripts/bench-misses.sh /tmp/bench-old build/bench/tessera-bench fractional 3 --nodes 1000 --pods 35000
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
command -v valgrind > /dev/null || { echo "bench-misses: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
A=$1 B=$2 SHAPE=$3 CYCLES=${4:-3}
shift $(( $# < 4 ? $# : 4 ))
if [ "$CYCLES" -lt 2 ]; then echo "bench-misses: CYCLES must be 2 or more (the first is not counted)" >&2; exit 2; fi
LL=${LL:-8388608}
DIR=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "bench-misses: kept $DIR" >&2 || rm -rf "$DIR"' EXIT
run() {  # run WHO BINARY [extra args]
  local who=$1 bin=$2
  shift 2
  # (TESSERA_MALLOC_REEXEC: the binary must not re-execute itself with its malloc settings, which
  # valgrind's own allocator replaces anyway.)
  TESSERA_MALLOC_REEXEC=1 valgrind --tool=callgrind --cache-sim=yes --LL="$LL",16,64 --collect-atstart=no \
    "--toggle-collect=*laterCycle*" --callgrind-out-file="$DIR/$who.out" \
    "$bin" cycle --shape "$SHAPE" --cycles "$CYCLES" --one-thread "$@" > "$DIR/$who.json" 2> "$DIR/$who.log" ||
    { echo "bench-misses: $who failed:" >&2; tail -5 "$DIR/$who.log" >&2; return 1; }
  callgrind_annotate --inclusive=yes --threshold=100 --show=Ir,D1mr,DLmr "$DIR/$who.out" > "$DIR/$who.incl"
  callgrind_annotate --show=Ir,D1mr,DLmr --sort=DLmr "$DIR/$who.out" > "$DIR/$who.self"
}
run A "$A" "$@" &
pa=$!
run B "$B" "$@" &
pb=$!
wait $pa || { pkill -P $pb 2> /dev/null; wait $pb 2> /dev/null; exit 1; }  # (B's valgrind not left running)
wait $pb
python3 - "$DIR" "$SHAPE" "$CYCLES" "$LL" <<'PY'
import json, re, sys
d, shape, cycles, ll = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
steady = cycles - 1
row = re.compile(r'^\s*([\d,.]+)(?: \([^)]*\))?\s+([\d,.]+)(?: \([^)]*\))?\s+([\d,.]+)(?: \([^)]*\))?\s+(\S.*)$')
def num(s): return 0 if s == '.' else int(s.replace(',', ''))
def rows(path):
    out = []
    for line in open(path, errors='replace'):
        m = row.match(line)
        if not m or 'PROGRAM TOTALS' in line: continue
        name = re.sub(r' \[[^\]]*\]$', '', m.group(4))
        name = name.split(':', 1)[1] if re.match(r'^[^:(]*:', name) else name
        out.append((name, (num(m.group(1)), num(m.group(2)), num(m.group(3)))))
    return out
def parts(path):
    p, seen = {}, set()
    for name, c in rows(path):
        if re.search(r'laterCycle', name): p.setdefault('cycle', c)
        elif re.search(r'Cache::snapshot\(\)', name): p.setdefault('snapshot', c)
        elif re.search(r'framework::Session::(Session|open)\(', name):  # (the session is built in its constructor)
            if ('open', name) not in seen:
                seen.add(('open', name))
                was = p.get('session open', (0, 0, 0))
                p['session open'] = tuple(x + y for x, y in zip(was, c))
        elif re.search(r'framework::Session::close\(\)', name): p.setdefault('session close', c)
        else:
            m = re.search(r'::(\w+)::execute\(tessera::framework::Session&\)$', name)
            if m: p.setdefault(m.group(1).lower(), c)
    return p
pa, pb = parts(d + '/A.incl'), parts(d + '/B.incl')
print("%s, %d steady cycles (LL %d KiB), per cycle: part, then Ir / D1mr / DLmr of A, of B, B/A of DLmr" % (shape, steady, ll // 1024))
for key in ['cycle', 'snapshot', 'session open'] + sorted(k for k in pa if k not in ('cycle', 'snapshot', 'session open', 'session close')) + ['session close']:
    a, b = pa.get(key, (0, 0, 0)), pb.get(key, (0, 0, 0))
    ratio = "%.3f" % (b[2] / a[2]) if a[2] else "-"
    print("  %-18s A %12s %10s %9s   B %12s %10s %9s   %s" % ((key,) + tuple(format(x // steady, ',') for x in a) +
                                                          tuple(format(x // steady, ',') for x in b) + (ratio,)))
sa, sb = dict(rows(d + '/A.self')), dict(rows(d + '/B.self'))
top = sorted(set(sa) | set(sb), key=lambda k: -max(sa.get(k, (0, 0, 0))[2], sb.get(k, (0, 0, 0))[2]))[:15]
print("functions with the most last-level read misses of their own, per cycle: DLmr of A, of B, then Ir of A, of B")
for k in top:
    a, b = sa.get(k, (0, 0, 0)), sb.get(k, (0, 0, 0))
    short = re.sub(r'\((?:[^()]|\([^()]*\))*\)', '()', k)
    short = re.sub(r'std::_Function_handler<[^,]*, ', 'fn<', short)
    print("  %9s %9s  %12s %12s  %s" % (format(a[2] // steady, ','), format(b[2] // steady, ','), format(a[0] // steady, ','),
                                        format(b[0] // steady, ','), short[:110]))
def digest(path):
    lines = [l for l in open(path) if l.startswith('{')]
    return json.loads(lines[-1])['decisions_digest_last_cycle'] if lines else None
da, db = digest(d + '/A.json'), digest(d + '/B.json')
print("decisions:", "same" if da == db else "DIFFER %s / %s" % (da, db))
PY
