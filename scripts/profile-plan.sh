#!/usr/bin/env bash
# Where a plan spends its time and what it allocates: runs one figure of the planner bench
# (benches/plan.rs, release build with line tables) under `perf record` (CPU-clock sampling,
# DWARF call graphs: no hardware counters needed), prints the top of the profile (self time
# per function, then time with callees), and draws a flame graph with inferno (installed
# from crates.io into target/tools on first use, pinned). With PROFILE_HEAP=1, heaptrack
# records the same run's allocations and its summary is printed too.
#
#   scripts/profile-plan.sh [FIGURE] [ROUTES]
#
#   FIGURE  a bench figure: plan_gateway_new, plan_route, plan_gateway_converged,
#           plan_memo, plan_converged (default)
#   ROUTES  routes on the bench's Gateway (default 50; 1000 for a shared Gateway)
#
# Writes target/profile/<figure>-<routes>.{perf.data,folded,svg,top.txt} (and .heap.zst).
# Needs perf (Debian: linux-perf) and, for PROFILE_HEAP=1, heaptrack.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
figure="${1:-plan_converged}"
routes="${2:-50}"
inferno_version=0.12.8
command -v perf >/dev/null || { echo "profile-plan: perf is needed (apt-get install linux-perf)" >&2; exit 1; }

tools="$root/target/tools"
if [ ! -x "$tools/bin/inferno-flamegraph" ] ||
  [ "$(cat "$tools/.inferno" 2>/dev/null)" != "$inferno_version" ]; then
  echo "installing inferno $inferno_version into $tools..." >&2
  cargo install --quiet --locked --root "$tools" --version "$inferno_version" inferno >&2
  echo "$inferno_version" >"$tools/.inferno"
fi

bin="$(cargo bench --bench plan --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    try: m=json.loads(l)
    except ValueError: continue
    if m.get("reason")=="compiler-artifact" and m.get("target",{}).get("name")=="plan" and m.get("executable"):
        print(m["executable"])' | tail -n1)"
[ -x "$bin" ] || { cargo bench --bench plan --no-run; exit 1; }

out="$root/target/profile"
mkdir -p "$out"
base="$out/$figure-$routes"
echo "recording $figure with $routes routes (perf, cpu-clock, DWARF call graphs)..." >&2
PLAN_BENCH_ROUTES="$routes" perf record -q -e cpu-clock -F 499 --call-graph dwarf,16384 \
  -o "$base.perf.data" -- "$bin" --bench "$figure" | tee "$base.figures.txt"
{
  echo "# self time per function ($figure, $routes routes)"
  perf report -i "$base.perf.data" --stdio --no-children --sort symbol -g none \
    --percent-limit 0.7 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 || true
  echo
  # (`|| true`: `head` closing its input early makes the pipeline fail under pipefail.)
  echo "# time with callees, gatewright's own functions"
  perf report -i "$base.perf.data" --stdio --children --sort symbol -g none \
    --percent-limit 2 2>/dev/null | grep 'gatewright::' | head -40 || true
} | tee "$base.top.txt"
perf script -i "$base.perf.data" 2>/dev/null | "$tools/bin/inferno-collapse-perf" >"$base.folded"
"$tools/bin/inferno-flamegraph" --title "$figure, $routes routes" <"$base.folded" >"$base.svg"
echo "flame graph: $base.svg; top: $base.top.txt" >&2

if [ "${PROFILE_HEAP:-0}" = 1 ]; then
  command -v heaptrack >/dev/null || { echo "profile-plan: heaptrack is needed (apt-get install heaptrack)" >&2; exit 1; }
  rm -f "$base".heap*
  PLAN_BENCH_ROUTES="$routes" heaptrack -o "$base.heap" "$bin" --bench "$figure" >/dev/null
  heaptrack --analyze "$base".heap.* 2>/dev/null | grep -E '^(total runtime|calls to allocation|temporary memory|peak heap)' || true
  heaptrack --analyze "$base".heap.* 2>/dev/null | sed -n '/^MOST CALLS TO ALLOCATION FUNCTIONS/,/^$/p' | head -30
fi
