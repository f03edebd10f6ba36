#!/usr/bin/env bash
# The planner bench (benches/plan.rs) of another commit beside this work tree's, on the same
# machine: REV is checked out in a scratch worktree (target/compare/src), both benches are
# built in release (REV's in target/compare/target, which keeps the dependencies between
# runs), then run in turn, REV first, RUNS times each (A B A B ...), so that a drift of the
# machine's speed reaches both alike. Prints per figure the median of each and the ratio
# (this tree / REV: below 1 is faster), and the spread (min-max) of each.
#
#   scripts/bench-compare.sh REV [RUNS] [FILTER]
#
#   REV     a commit, tag or branch (the previous release, for a change that touches planning)
#   RUNS    runs of each bench (default 4)
#   FILTER  only the figures whose name contains it (see benches/plan.rs; default all but
#           render, which is a whole-process figure of its own)
#
# Environment: PLAN_BENCH_ROUTES is passed to both (a bench that does not read it plans its
# own 50 routes, so compare only at the default unless both know it).
# Figures are CPU time per call of the bench thread. Nothing else should run beside it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
rev="${1:?usage: scripts/bench-compare.sh REV [RUNS] [FILTER]}"
runs="${2:-4}"
filter="${3:-plan}"
commit="$(git rev-parse --verify "$rev^{commit}")"
scratch="$root/target/compare"
mkdir -p "$scratch"

# REV's tree, refreshed in place (a worktree of this repository: no second clone).
if [ -e "$scratch/src/.git" ]; then
  git -C "$scratch/src" checkout -q --detach "$commit"
else
  rm -rf "$scratch/src"
  git worktree prune
  git worktree add -q --detach "$scratch/src" "$commit"
fi

bench_bin() { # dir target-dir -> path of the plan bench executable
  (cd "$1" && CARGO_TARGET_DIR="$2" cargo bench --bench plan --no-run --message-format=json 2>/dev/null) |
    python3 -c 'import json,sys
for l in sys.stdin:
    try: m=json.loads(l)
    except ValueError: continue
    if m.get("reason")=="compiler-artifact" and m.get("target",{}).get("name")=="plan" and m.get("executable"):
        print(m["executable"])'
}
echo "building the bench of $rev ($commit) and of this work tree (release)..." >&2
(cd "$scratch/src" && CARGO_TARGET_DIR="$scratch/target" cargo bench --bench plan --no-run >&2)
cargo bench --bench plan --no-run >&2
old="$(bench_bin "$scratch/src" "$scratch/target" | tail -n1)"
new="$(bench_bin "$root" "$root/target" | tail -n1)"
[ -x "$old" ] && [ -x "$new" ] || { echo "bench-compare: a bench binary was not found" >&2; exit 1; }

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 "$runs"); do
  echo "run $i of $runs: $rev" >&2
  (cd "$scratch/src" && "$old" --bench "$filter") >"$out/old.$i"
  echo "run $i of $runs: this tree" >&2
  "$new" --bench "$filter" >"$out/new.$i"
done

python3 - "$out" "$runs" "$rev" <<'PY'
import re, statistics, sys
out, runs, rev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
unit = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
pat = re.compile(r"^(.*?\)): ([0-9.]+)(ns|µs|us|ms|s)\b")
def read(side):
    figs = {}
    for i in range(1, runs + 1):
        for line in open(f"{out}/{side}.{i}", encoding="utf-8"):
            m = pat.match(line.strip())
            if m:
                figs.setdefault(m.group(1), []).append(float(m.group(2)) * unit[m.group(3)])
    return figs
old, new = read("old"), read("new")
def show(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"
print(f"planner bench: {rev} (A) against this tree (B), {runs} runs each, alternately; medians of CPU time per call")
print(f"{'figure':<100} {'A':>10} {'B':>10} {'B/A':>6}  spread A / B")
for name in list(old) + [n for n in new if n not in old]:
    a, b = old.get(name), new.get(name)
    ma = statistics.median(a) if a else None
    mb = statistics.median(b) if b else None
    ratio = f"{mb / ma:.2f}" if ma and mb else "-"
    spread = lambda v: f"{show(min(v))}-{show(max(v))}" if v else "-"
    print(f"{name[:100]:<100} {show(ma) if ma else '-':>10} {show(mb) if mb else '-':>10} {ratio:>6}  {spread(a)} / {spread(b)}")
PY
