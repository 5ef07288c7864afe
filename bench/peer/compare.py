#!/usr/bin/env python3
"""`nmpsim train --mode baseline-cpu` against its PyTorch peer, in one run.

Rounds alternate the two sides on the same machine, so both see the same
conditions; each side's number is the median per-iteration wall time over its
timed iterations (warm-up iterations dropped), and the reported figure is the
median over rounds with the ratio peer / nmpsim (above 1: nmpsim is faster).

    python3 bench/peer/compare.py --model criteo-kaggle --rows-scale 1 --rounds 3
    python3 bench/peer/compare.py --model rm1 --iters 10 --rounds 2 \\
        --python /path/to/venv-with-torch/bin/python

The peer (bench/peer/dlrm_peer.py) needs PyTorch in the Python given by
--python (default: this one). Both sides: batch 2048 unless --batch, SGD,
random data, the thread count of --threads.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def fail(msg):
    print(f"compare: {msg}", file=sys.stderr)
    sys.exit(2)


def median_wall(run_dir, warmup):
    path = os.path.join(run_dir, "iterations.csv")
    try:
        with open(path) as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    walls = [float(r["wall_ms"]) for r in rows[warmup:]]
    if not walls:
        fail(f"{path}: no iterations after the {warmup} warm-up ones")
    return statistics.median(walls)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="criteo-kaggle", help="nmpsim train --model (default criteo-kaggle)")
    ap.add_argument("--rows-scale", help="nmpsim train --rows-scale (Kaggle table sizes; 1 = full)")
    ap.add_argument("--rows", help="nmpsim train --rows (RM tables)")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--iters", type=int, default=30, help="iterations per side and round (default 30)")
    ap.add_argument("--warmup", type=int, default=3, help="leading iterations not counted (default 3)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    ap.add_argument("--threads", type=int, default=2, help="threads of both sides (default 2)")
    ap.add_argument("--nmpsim", default=os.path.join(ROOT, "target", "release", "nmpsim"))
    ap.add_argument("--python", default=sys.executable, help="Python with PyTorch for the peer")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    if not os.access(args.nmpsim, os.X_OK):
        fail(f"{args.nmpsim}: no nmpsim binary (build it: cargo build --release)")
    if args.iters <= args.warmup:
        fail(f"--iters ({args.iters}) must exceed --warmup ({args.warmup})")

    ours, peer = [], []
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory(prefix="nmpsim-peer-") as tmp:
        for r in range(args.rounds):
            run_dir = os.path.join(tmp, f"round{r}")
            cmd = [args.nmpsim, "train", "--model", args.model, "--mode", "baseline-cpu",
                   "--batch", str(args.batch), "--iters", str(args.iters), "--test-batches", "1",
                   "--quiet", "--out", run_dir]
            if args.rows_scale:
                cmd += ["--rows-scale", args.rows_scale]
            if args.rows:
                cmd += ["--rows", args.rows]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if p.returncode != 0:
                fail(f"nmpsim train failed ({p.returncode}):\n{p.stderr.strip()}")
            ours.append(median_wall(run_dir, args.warmup))
            p = subprocess.run([args.python, os.path.join(HERE, "dlrm_peer.py"),
                                os.path.join(run_dir, "config.json"),
                                "--iters", str(args.iters - args.warmup), "--warmup", str(args.warmup),
                                "--threads", str(args.threads)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                fail(f"the peer failed ({p.returncode}):\n{p.stderr.strip()}")
            result = json.loads(p.stdout)
            peer.append(result["median_ms"])
            print(f"round {r + 1}/{args.rounds}: nmpsim {ours[-1]:.2f} ms/it, "
                  f"pytorch {peer[-1]:.2f} ms/it", file=sys.stderr)
    o, q = statistics.median(ours), statistics.median(peer)
    out = {
        "model": args.model, "batch": args.batch, "threads": args.threads,
        "torch": result["torch"], "rounds": args.rounds,
        "nmpsim_ms": [round(v, 3) for v in ours], "pytorch_ms": [round(v, 3) for v in peer],
        "nmpsim_median_ms": round(o, 3), "pytorch_median_ms": round(q, 3),
        "nmpsim_samples_per_s": round(args.batch / o * 1e3, 1),
        "pytorch_samples_per_s": round(args.batch / q * 1e3, 1),
        "speedup": round(q / o, 3),
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{'side':<10}{'ms/it (median)':>16}{'samples/s':>12}")
        print(f"{'nmpsim':<10}{o:>16.2f}{out['nmpsim_samples_per_s']:>12.0f}")
        print(f"{'pytorch':<10}{q:>16.2f}{out['pytorch_samples_per_s']:>12.0f}")
        print(f"speed-up of nmpsim over PyTorch {result['torch']}: {out['speedup']:.2f}x "
              f"({args.model}, batch {args.batch}, {args.threads} threads, {args.rounds} rounds)")


if __name__ == "__main__":
    main()
