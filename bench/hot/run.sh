#!/usr/bin/env bash
# The performance checks of the hot-row strategies (docs/strategies.md), on
# this machine, each as alternating rounds whose medians and ratios are
# printed:
#   1. `nmpsim trace hot` against `nmpsim trace stats` on one input: 26
#      Criteo-Kaggle-sized tables, 10M samples (4883 batches of 2048);
#   2. the trainer's `fae` step against `baseline-cpu` on all-cold
#      mini-batches (a 760 KB hot budget, the small tables and a few rows,
#      leaves no sample hot): the embedding primitives' measured host time per
#      iteration, one process per strategy, in the order A B, then B A.
# Usage: bench/hot/run.sh [ROUNDS] [WORKDIR]   (release build of nmpsim first)
set -euo pipefail
rounds=${1:-5}
work=${2:-$(mktemp -d)}
mkdir -p "$work"
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$here/target/release/nmpsim
[ -x "$bin" ] || { echo "build it first: cargo build --release" >&2; exit 2; }
trace=$work/kaggle-10m.nmpt
[ -f "$trace" ] || "$bin" trace gen --profile criteo-kaggle --batch 2048 --batches 4883 -o "$trace" >&2
echo "# trace hot vs trace stats on $trace (seconds, wall)"
for r in $(seq "$rounds"); do
  s=$( { /usr/bin/time -f %e "$bin" trace stats "$trace" --json >/dev/null; } 2>&1 | tail -1)
  h=$( { /usr/bin/time -f %e "$bin" trace hot "$trace" --dim 16 --json >/dev/null; } 2>&1 | tail -1)
  echo "round $r stats $s hot $h"
done | tee "$work/trace.txt"
echo "# fae vs baseline-cpu on all-cold mini-batches (criteo-kaggle, batch 2048, 40 iterations)"
for r in $(seq "$rounds"); do
  order="baseline-cpu fae"
  [ $((r % 2)) -eq 0 ] && order="fae baseline-cpu"
  for m in $order; do
    rm -rf "$work/train-$r-$m"
    "$bin" train --model criteo-kaggle --mode "$m" --batch 2048 --iters 40 \
      --hot-budget 760KB --json --out "$work/train-$r-$m" >/dev/null 2>&1
  done
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
t = [l.split() for l in open(f"{work}/trace.txt") if l.startswith("round")]
ratios = [float(x[5]) / float(x[3]) for x in t]
print("trace: median stats %.2f s, hot %.2f s, median hot/stats time %.3f (%s)" % (
    statistics.median(float(x[3]) for x in t), statistics.median(float(x[5]) for x in t),
    statistics.median(ratios), " ".join("%.3f" % r for r in ratios)))
# (The embedding primitives, a hot step's too: its numbers are computed here.)
emb = ("gather-reduce", "expand-coalesce", "scatter", "hot check")
rs, rows = [], []
for r in range(1, rounds + 1):
    d = [json.load(open(f"{work}/train-{r}-{m}/results.json"))["results"]["modes"][0]
         for m in ("baseline-cpu", "fae")]
    ms = {}
    for m in d:
        share = dict(m["host_share"])
        ms[m["mode"]] = (m["wall_ms_per_iteration"] * sum(v for k, v in share.items() if k.startswith(emb)),
                         m["wall_ms_per_iteration"] * share.get("hot check", 0.0))
    hot = [n for n in d if n["mode"] == "fae"][0]["notes"]
    rows.append("round %d: baseline-cpu %.2f ms, fae %.2f ms (hot check %.3f ms); %s" % (
        r, ms["baseline-cpu"][0], ms["fae"][0], ms["fae"][1],
        ", ".join(f"{k} {v}" for k, v in hot if k in ("hot steps", "cold steps"))))
    rs.append(ms["fae"][0] / ms["baseline-cpu"][0])
print("\n".join(rows))
print("train: median fae/baseline-cpu embedding time %.3f (%s)" % (
    statistics.median(rs), " ".join("%.3f" % r for r in rs)))
PY
