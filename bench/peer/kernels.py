#!/usr/bin/env python3
"""nmpsim's CPU embedding primitives against PyTorch's, on identical inputs, in one run.

For each workload, `nmpsim trace gen` writes a trace and `nmpsim trace export
--npy` hands PyTorch exactly those lookups. Both sides build the same seeded
tables and output gradients (SplitMix64, rebuilt here in NumPy bit for bit),
then:

  1. agreement: nmpsim dumps its outputs on batch 0 from fresh tables
     (`kernels bench --dump`); PyTorch computes the same and every array must
     agree (forward, coalesced gradients, rows after one SGD / Adagrad step)
     within --tolerance (row-wise relative error, as `nmpsim kernels check`
     measures it) before any time counts;
  2. timing: rounds alternate the two sides (`nmpsim kernels bench --trace`,
     then PyTorch in this process), each timing every primitive over every
     table of one batch per repetition (the batches in turn), after warm-up
     repetitions. A side's figure is the median over rounds of its per-round
     median; the ratio is PyTorch / nmpsim (above 1: nmpsim faster). GB/s are
     both sides' times over the same analytic bytes (the Fig. 6 accounting
     nmpsim reports).

PyTorch side: `F.embedding_bag(..., include_last_offset=True)` under
`torch.no_grad()` (its forward-only path, the fastest it has) for sum, mean
and sum with `per_sample_weights`; backward = `torch.autograd.grad` of a
`sparse=True` bag (the expanded sparse gradient) then `.coalesce()`; updates
= `torch.optim.SGD` and `torch.optim.Adagrad` `step()` on that coalesced
gradient. nmpsim's Tensor Casting backward (tensor-cast + casted
gather-reduce) is compared with PyTorch's expand + coalesce.

    python bench/peer/kernels.py                      # the four workloads below
    python bench/peer/kernels.py --workloads rm1-zipf --rounds 3 --reps 10
    python bench/peer/kernels.py --smoke              # tiny, agreement only (CI)

Workloads: rm1-uniform, rm1-zipf (10 tables x 1M rows, dim 64, batch 2048,
80 lookups per bag, uniform / Zipf 1.05 rows), kaggle (the criteo-kaggle
profile: 26 tables of the real Kaggle sizes, dim 16, one lookup per table,
its Zipf 1.05 rows), kaggle-uniform (the same shapes, uniform rows). Needs
NumPy and PyTorch in the Python that runs it, and a release nmpsim
(cargo build --release).
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Seeds of the tables and gradients (nmpsim_kernels::bench): table t is seeded
# seed + t, its output gradient seed + GRAD_SEED_OFFSET + t.
GRAD_SEED_OFFSET = 10_000
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB

WORKLOADS = {
    "rm1-uniform": dict(gen=["--profile", "rm1", "--dist", "uniform"], dim=64),
    "rm1-zipf": dict(gen=["--profile", "rm1", "--dist", "zipf:1.05"], dim=64),
    "kaggle": dict(gen=["--profile", "criteo-kaggle"], dim=16),
    "kaggle-uniform": dict(gen=["--profile", "criteo-kaggle", "--dist", "uniform"], dim=16),
    # CI's smoke test: both sides, agreement only, in seconds.
    "smoke": dict(gen=["--tables", "3", "--rows", "2000", "--bag", "6", "--dist", "zipf:1.05"], dim=8),
}

# Targets (ratio PyTorch / nmpsim), from the issue that set them.
TARGETS = {
    "forward-sum": 1.25,
    "forward-mean": 1.25,
    "forward-weighted": 1.25,
    "scatter-sgd": 2.0,
    "scatter-adagrad": 3.0,
    "cast+casted-gather-reduce": 5.0,
}

# nmpsim primitive -> the PyTorch measurement it is compared with.
PEER_OF = {
    "forward-sum": "forward-sum",
    "forward-mean": "forward-mean",
    "forward-weighted": "forward-weighted",
    "expand": "expand",
    "coalesce": "coalesce",
    "expand+coalesce": "expand+coalesce",
    "cast+casted-gather-reduce": "expand+coalesce",
    "scatter-sgd": "scatter-sgd",
    "scatter-adagrad": "scatter-adagrad",
}


def fail(msg):
    print(f"kernels.py: {msg}", file=sys.stderr)
    sys.exit(2)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def splitmix_uniform(np, n, lo, hi, seed, out=None, chunk=1 << 23):
    """fill_uniform(out, lo, hi, seed) of nmpsim_kernels::table, bit for bit."""
    if out is None:
        out = np.empty(n, dtype=np.float32)
    lo32, span = np.float32(lo), np.float32(np.float32(hi) - np.float32(lo))
    scale = np.float32(1.0 / (1 << 24))
    with np.errstate(over="ignore"):
        for start in range(0, n, chunk):
            k = min(chunk, n - start)
            z = np.arange(start + 1, start + k + 1, dtype=np.uint64)
            z *= np.uint64(GOLDEN)
            z += np.uint64(seed % (1 << 64))
            z ^= z >> np.uint64(30)
            z *= np.uint64(MIX1)
            z ^= z >> np.uint64(27)
            z *= np.uint64(MIX2)
            z ^= z >> np.uint64(31)
            z >>= np.uint64(40)
            u = z.astype(np.float32)
            u *= scale
            u *= span
            u += lo32
            out[start:start + k] = u
    return out


def seeded_table(np, rows, dim, seed):
    bound = float(np.float32(math.sqrt(1.0 / max(rows, 1))))
    return splitmix_uniform(np, rows * dim, -bound, bound, seed).reshape(rows, dim)


def row_rel_err(np, got, want):
    """max over rows of max_k |got - want| / max(max_k |want|, 1% of max |want|)."""
    got = np.asarray(got, dtype=np.float64).reshape(want.shape[0], -1)
    want = np.asarray(want, dtype=np.float64).reshape(want.shape[0], -1)
    if got.shape != want.shape:
        return math.inf
    if want.size == 0:
        return 0.0
    floor = 0.01 * np.abs(want).max()
    scale = np.maximum(np.abs(want).max(axis=1), floor)
    scale[scale == 0] = 1.0
    return float((np.abs(got - want).max(axis=1) / scale).max())


class Peer:
    """PyTorch's side: the trace's batches, the seeded tables, the primitives."""

    def __init__(self, np, torch, npy_dir, dim, seed, lr, eps):
        self.np, self.torch, self.dim, self.seed, self.lr, self.eps = np, torch, dim, seed, lr, eps
        with open(os.path.join(npy_dir, "manifest.json")) as f:
            m = json.load(f)
        self.rows = [t["rows"] for t in m["tables"]]
        load = lambda name: np.load(os.path.join(npy_dir, name))  # noqa: E731
        self.batches = []
        for b in m["batches"]:
            tables = []
            for files in b["tables"]:
                w = files.get("weights")
                tables.append((torch.from_numpy(load(files["offsets"])),
                               torch.from_numpy(load(files["indices"])),
                               torch.from_numpy(load(w)) if w else None))
            self.batches.append((b["batch_size"], tables))
        bags = max(b for b, _ in self.batches)
        self.grads = [torch.from_numpy(splitmix_uniform(np, bags * dim, -1.0, 1.0,
                                                        seed + GRAD_SEED_OFFSET + t).reshape(bags, dim))
                      for t in range(len(self.rows))]
        self.weighted = all(w is not None for _, ts in self.batches for _, _, w in ts)
        self.fresh()

    def fresh(self):
        torch, np = self.torch, self.np
        self.tables = [torch.nn.Parameter(torch.from_numpy(seeded_table(np, r, self.dim, self.seed + t)))
                       for t, r in enumerate(self.rows)]
        self.sgd = [torch.optim.SGD([w], lr=self.lr) for w in self.tables]
        self.adagrad = [torch.optim.Adagrad([w], lr=self.lr, eps=self.eps) for w in self.tables]

    def forward(self, w, off, idx, wts, mode):
        F = self.torch.nn.functional
        with self.torch.no_grad():
            if mode == "weighted":
                return F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=wts,
                                       include_last_offset=True)
            return F.embedding_bag(idx, w, off, mode=mode, include_last_offset=True)

    def backward_parts(self, t, batch):
        """(expanded sparse gradient, its forward's graph) of table t; untimed forward."""
        torch = self.torch
        bags, tables = self.batches[batch]
        off, idx, _ = tables[t]
        out = torch.nn.functional.embedding_bag(idx, self.tables[t], off, mode="sum",
                                                include_last_offset=True, sparse=True)
        return out, self.grads[t][:bags]

    def coalesced(self, t, batch):
        out, g = self.backward_parts(t, batch)
        (expanded,) = self.torch.autograd.grad(out, self.tables[t], g)
        return expanded.coalesce()

    def agreement(self, dump_dir, tolerance):
        """Worst error of each checked array against nmpsim's dump of batch 0."""
        np, torch = self.np, self.torch
        worst = {}
        _, tables = self.batches[0]

        def note(what, err):
            worst[what] = max(worst.get(what, 0.0), err)

        modes = ["sum", "mean"] + (["weighted"] if self.weighted else [])
        for t, (off, idx, wts) in enumerate(tables):
            for mode in modes:
                want = np.load(os.path.join(dump_dir, f"forward_{mode}_t{t:03}.npy"))
                got = self.forward(self.tables[t], off, idx, wts, mode).numpy()
                note(f"forward-{mode}", row_rel_err(np, got, want))
            rows_file = os.path.join(dump_dir, f"coalesced_rows_t{t:03}.npy")
            if not os.path.exists(rows_file):
                continue
            c = self.coalesced(t, 0)
            rows = c.indices()[0].numpy()
            want_rows = np.load(rows_file)
            if not np.array_equal(rows, want_rows):
                note("coalesced-rows", math.inf)
                continue
            note("coalesced-rows", 0.0)
            grads = c.values().numpy()
            note("coalesced-grads", row_rel_err(np, grads, np.load(os.path.join(dump_dir, f"coalesced_grads_t{t:03}.npy"))))
            for name, make in [("sgd", lambda p: torch.optim.SGD([p], lr=self.lr)),
                               ("adagrad", lambda p: torch.optim.Adagrad([p], lr=self.lr, eps=self.eps))]:
                p = torch.nn.Parameter(self.tables[t].detach().clone())
                opt = make(p)
                p.grad = c
                opt.step()
                got = p.detach()[torch.from_numpy(rows)].numpy()
                want = np.load(os.path.join(dump_dir, f"{name}_rows_t{t:03}.npy"))
                note(f"{name}-rows", row_rel_err(np, got, want))
        bad = {k: v for k, v in worst.items() if not v <= tolerance}
        return worst, bad

    def bench(self, reps, warmup):
        """Per-primitive median ms over `reps` timed repetitions."""
        torch = self.torch
        names = ["forward-sum", "forward-mean"] + (["forward-weighted"] if self.weighted else []) + [
            "expand", "coalesce", "expand+coalesce", "scatter-sgd", "scatter-adagrad"]
        times = {n: [] for n in names}
        T = len(self.rows)
        for rep in range(warmup + reps):
            k = rep % len(self.batches)
            _, tables = self.batches[k]
            ms = {}
            for mode in ["sum", "mean"] + (["weighted"] if self.weighted else []):
                t0 = time.perf_counter()
                for t in range(T):
                    off, idx, wts = tables[t]
                    self.forward(self.tables[t], off, idx, wts, mode)
                ms[f"forward-{mode}"] = (time.perf_counter() - t0) * 1e3
            graphs = [self.backward_parts(t, k) for t in range(T)]
            t0 = time.perf_counter()
            expanded = [torch.autograd.grad(out, self.tables[t], g)[0] for t, (out, g) in enumerate(graphs)]
            ms["expand"] = (time.perf_counter() - t0) * 1e3
            t0 = time.perf_counter()
            coalesced = [e.coalesce() for e in expanded]
            ms["coalesce"] = (time.perf_counter() - t0) * 1e3
            ms["expand+coalesce"] = ms["expand"] + ms["coalesce"]
            del graphs, expanded
            for name, opts in [("scatter-sgd", self.sgd), ("scatter-adagrad", self.adagrad)]:
                for t in range(T):
                    self.tables[t].grad = coalesced[t]
                t0 = time.perf_counter()
                for t in range(T):
                    opts[t].step()
                ms[name] = (time.perf_counter() - t0) * 1e3
            for t in range(T):
                self.tables[t].grad = None
            if rep >= warmup:
                for n in names:
                    times[n].append(ms[n])
        return {n: statistics.median(v) for n, v in times.items()}


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{what} failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.strip()}")
    return p.stdout


def workload(args, np, torch, name, tmp):
    spec = WORKLOADS[name]
    dim = args.dim or spec["dim"]
    trace = os.path.join(tmp, f"{name}.nmpt")
    npy_dir = os.path.join(tmp, f"{name}-npy")
    batch = "64" if name == "smoke" else str(args.batch)
    run([args.nmpsim, "trace", "gen", *spec["gen"], "--batch", batch, "--weighted",
         "--batches", str(args.batches), "--seed", str(args.seed), "-q", "-o", trace], "nmpsim trace gen")
    run([args.nmpsim, "trace", "export", trace, "--npy", npy_dir], "nmpsim trace export")
    bench = [args.nmpsim, "kernels", "bench", "--backend", "cpu", "--trace", trace, "--dim", str(dim),
             "--seed", str(args.seed), "--threads", str(args.threads), "--lr", str(args.lr), "--json", "-q"]
    log(f"{name}: building PyTorch's tables")
    peer = Peer(np, torch, npy_dir, dim, args.seed, args.lr, args.eps)
    dump = os.path.join(tmp, f"{name}-dump")
    out = json.loads(run(bench + ["--reps", "1", "--warmup", "0", "--dump", dump], "nmpsim kernels bench --dump"))
    worst, bad = peer.agreement(dump, args.tolerance)
    shutil.rmtree(dump, ignore_errors=True)
    log(f"{name}: agreement " + ", ".join(f"{k} {v:.1e}" for k, v in sorted(worst.items())))
    result = {"workload": name, "dim": dim, "tables": len(peer.rows), "table_rows": peer.rows,
              "agreement": worst, "tolerance": args.tolerance, "agree": not bad}
    if bad:
        log(f"{name}: DISAGREE beyond {args.tolerance:g}: {bad}; its times are not reported")
        return result
    if args.smoke:
        return result
    ours, theirs = {}, {}
    analytic = {}
    for r in range(args.rounds):
        o = json.loads(run(bench + ["--reps", str(args.reps), "--warmup", str(args.warmup)], "nmpsim kernels bench"))
        for p in o["results"]["primitives"]:
            ours.setdefault(p["primitive"], []).append(p["median_ms"])
            analytic[p["primitive"]] = p["bytes"]
        for k, v in peer.bench(args.reps, args.warmup).items():
            theirs.setdefault(k, []).append(v)
        log(f"{name}: round {r + 1}/{args.rounds}: forward-sum nmpsim {ours['forward-sum'][-1]:.2f} ms, "
            f"pytorch {theirs['forward-sum'][-1]:.2f} ms")
    rows = []
    for prim, peer_prim in PEER_OF.items():
        if prim not in ours or peer_prim not in theirs:
            continue
        o, q = statistics.median(ours[prim]), statistics.median(theirs[peer_prim])
        b = analytic[prim]
        rows.append({"primitive": prim, "pytorch": peer_prim, "nmpsim_ms": o, "pytorch_ms": q,
                     "ratio": q / o, "nmpsim_gbps": b / o / 1e6,
                     # PyTorch's bytes by the same accounting as the primitive it is compared with.
                     "pytorch_gbps": analytic[peer_prim] / q / 1e6 if peer_prim in analytic else None,
                     "target": TARGETS.get(prim), "nmpsim_rounds_ms": ours[prim],
                     "pytorch_rounds_ms": theirs[peer_prim]})
    result["rows"] = rows
    if "row-read-bound" in ours:
        # nmpsim's own rate of reading these lookups' rows (no bags, no output):
        # the bound any forward on this machine approaches; not a PyTorch figure.
        result["read_bound_ms"] = statistics.median(ours["row-read-bound"])
        result["read_bound_rounds_ms"] = ours["row-read-bound"]
    return result


def table(results, torch_version, args):
    lines = [f"PyTorch {torch_version}, {args.threads} threads, {args.rounds} rounds x {args.reps} reps "
             f"(+{args.warmup} warm-up), {args.batches} batches, seed {args.seed}; "
             "ratio = PyTorch / nmpsim (above 1: nmpsim faster); all times measured", ""]
    lines.append("| workload | primitive (nmpsim vs PyTorch) | PyTorch ms | nmpsim ms | ratio | target | "
                 "PyTorch GB/s | nmpsim GB/s |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in results:
        if not r.get("rows"):
            continue
        for x in r["rows"]:
            vs = x["primitive"] if x["pytorch"] == x["primitive"] else f"{x['primitive']} vs {x['pytorch']}"
            tgt = x["target"]
            mark = "" if tgt is None else (f">= {tgt:g}: {'met' if x['ratio'] >= tgt else 'MISSED'}")
            pg = "" if x["pytorch_gbps"] is None else f"{x['pytorch_gbps']:.2f}"
            lines.append(f"| {r['workload']} | {vs} | {x['pytorch_ms']:.2f} | {x['nmpsim_ms']:.2f} | "
                         f"{x['ratio']:.2f} | {mark} | {pg} | {x['nmpsim_gbps']:.2f} |")
    bounds = [r for r in results if r.get("read_bound_ms")]
    if bounds:
        lines += ["", "The forward against the rate of reading its rows (nmpsim's `row-read-bound`: the same "
                  "lookups' rows, read by the forward's code in bags of 4096 (fewer where a thread would have none), no output, timed apart from the "
                  "other primitives with the batches back to back; measured):", "",
                  "| workload | row-read bound ms | nmpsim forward-sum / bound | PyTorch forward-sum / bound "
                  "(the ratio a forward at the bound would reach) |", "|---|---|---|---|"]
        for r in bounds:
            fwd = next((x for x in r["rows"] if x["primitive"] == "forward-sum"), None)
            if fwd is None:
                continue
            b = r["read_bound_ms"]
            lines.append(f"| {r['workload']} | {b:.2f} | {fwd['nmpsim_ms'] / b:.2f} | {fwd['pytorch_ms'] / b:.2f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="rm1-uniform,rm1-zipf,kaggle,kaggle-uniform",
                    help=f"comma-separated, of: {', '.join(WORKLOADS)}")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--batches", type=int, default=4, help="batches per trace, run in turn (default 4)")
    ap.add_argument("--dim", type=int, help="embedding dim (default: 64 for rm1, 16 for kaggle)")
    ap.add_argument("--reps", type=int, default=8, help="timed repetitions per side and round (default 8)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed repetitions first (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--threads", type=int, default=2, help="threads of both sides (default 2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--eps", type=float, default=1e-10, help="Adagrad epsilon (nmpsim's bench uses 1e-10)")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="agreement bound (default 1e-5)")
    ap.add_argument("--smoke", action="store_true", help="tiny workload, agreement only (CI)")
    ap.add_argument("--nmpsim", default=os.path.join(ROOT, "target", "release", "nmpsim"))
    ap.add_argument("--out", help="also write the results as JSON to this file")
    args = ap.parse_args()
    try:
        import numpy as np
        import torch
    except ImportError as e:
        fail(f"needs NumPy and PyTorch in this Python ({sys.executable}): {e}")
    if not os.access(args.nmpsim, os.X_OK):
        fail(f"{args.nmpsim}: no nmpsim binary (build it: cargo build --release)")
    names = ["smoke"] if args.smoke else [w.strip() for w in args.workloads.split(",") if w.strip()]
    for n in names:
        if n not in WORKLOADS:
            fail(f"--workloads: unknown `{n}`; known: {', '.join(WORKLOADS)}")
    torch.set_num_threads(args.threads)
    import warnings
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    results = []
    with tempfile.TemporaryDirectory(prefix="nmpsim-kernels-peer-") as tmp:
        for n in names:
            results.append(workload(args, np, torch, n, tmp))
    report = {"torch": torch.__version__, "threads": args.threads, "rounds": args.rounds, "reps": args.reps,
              "warmup": args.warmup, "batches": args.batches, "seed": args.seed, "results": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    if args.smoke:
        r = results[0]
        print(f"smoke: nmpsim and PyTorch {torch.__version__} agree: {r['agree']} "
              + "(" + ", ".join(f"{k} {v:.1e}" for k, v in sorted(r["agreement"].items())) + ")")
    else:
        print(table(results, torch.__version__, args))
    sys.exit(0 if all(r["agree"] for r in results) else 1)


if __name__ == "__main__":
    main()
