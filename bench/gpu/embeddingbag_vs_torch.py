#!/usr/bin/env python3
"""nmpsim's CUDA embedding kernels next to PyTorch's EmbeddingBag, same workload.

Runs `nmpsim kernels bench --backend cuda --json` with the given sizes, then
builds the same workload in PyTorch (T tables of ROWS x DIM f32, a batch of B
bags of L uniform random lookups per table) and times, with CUDA events,
kernel time only, the median of --reps after a warm-up:

  * forward:  torch.nn.EmbeddingBag(mode='sum') on every table
              (compare: nmpsim gather-reduce, every table in one launch, and
              a launch per table as torch does)
  * backward: out.backward(grad) with sparse=True (an uncoalesced sparse
              gradient: PyTorch's index-select of the output gradient), and the
              same followed by .coalesce() (compare: nmpsim casted
              gather-reduce, which produces coalesced gradients)

Bandwidths use nmpsim's analytic byte counts (docs/kernels.md), so GB/s are
comparable; ratios are time_torch / time_nmpsim (> 1: nmpsim is faster).

  bench/gpu/env.sh python3 bench/gpu/embeddingbag_vs_torch.py \\
      --nmpsim target/release/nmpsim --tables 8 --rows 4000000 --dim 64
"""

import argparse
import json
import statistics
import subprocess
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nmpsim", default="target/release/nmpsim", help="path to the nmpsim binary")
    p.add_argument("--tables", type=int, default=8)
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--bag", type=int, default=80)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--skip-nmpsim", action="store_true", help="time PyTorch only")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    return p.parse_args()


def run_nmpsim(a):
    cmd = [
        a.nmpsim, "kernels", "bench", "--backend", "cuda", "--json",
        "--tables", str(a.tables), "--rows", str(a.rows), "--batch", str(a.batch),
        "--bag", str(a.bag), "--dim", str(a.dim), "--reps", str(a.reps),
        "--seed", str(a.seed), "--dist", "uniform",
    ]
    print("running:", " ".join(cmd), file=sys.stderr)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"nmpsim failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return json.loads(r.stdout)["results"]


def gather_reduce_bytes(n, bags, dim):
    # nmpsim-kernels traffic::gather_reduce_traffic (unweighted)
    return n * dim * 4 + n * 4 + (bags + 1) * 4 + bags * dim * 4


def expand_bytes(n, dim):
    # traffic::expand_traffic (unweighted): what an uncoalesced sparse backward does
    return n * dim * 4 + n * 4 + n * dim * 4


def time_ms(torch, fn, reps):
    fn()  # warm-up
    torch.cuda.synchronize()
    times = []
    for _ in range(max(reps, 1)):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run_torch(a):
    import torch

    dev = torch.device("cuda")
    g = torch.Generator(device=dev)
    g.manual_seed(a.seed)
    n = a.batch * a.bag
    bags, inputs, offsets, grads = [], [], [], []
    bound = (1.0 / a.rows) ** 0.5
    for _ in range(a.tables):
        bag = torch.nn.EmbeddingBag(a.rows, a.dim, mode="sum", sparse=True).to(dev)
        with torch.no_grad():
            bag.weight.uniform_(-bound, bound, generator=g)
        bags.append(bag)
        inputs.append(torch.randint(0, a.rows, (n,), device=dev, generator=g, dtype=torch.int64))
        offsets.append(torch.arange(0, n, a.bag, device=dev, dtype=torch.int64))
        grads.append(torch.rand(a.batch, a.dim, device=dev, generator=g) * 2 - 1)

    def forward():
        with torch.no_grad():
            for t in range(a.tables):
                bags[t](inputs[t], offsets[t])

    outs = [None] * a.tables

    def prepare_backward():
        for t in range(a.tables):
            bags[t].weight.grad = None
            outs[t] = bags[t](inputs[t], offsets[t])

    def timed_backward(coalesce):
        total = []
        # Each rep needs a fresh graph: forward outside the timed region.
        fn_reps = max(a.reps, 1)
        prepare_backward()
        for t in range(a.tables):
            outs[t].backward(grads[t])  # warm-up
        torch.cuda.synchronize()
        for _ in range(fn_reps):
            prepare_backward()
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for t in range(a.tables):
                outs[t].backward(grads[t])
                if coalesce:
                    bags[t].weight.grad = bags[t].weight.grad.coalesce()
            end.record()
            end.synchronize()
            total.append(start.elapsed_time(end))
        return statistics.median(total)

    fwd_ms = time_ms(torch, forward, a.reps)
    bwd_ms = timed_backward(False)
    bwd_coal_ms = timed_backward(True)
    unique = 0
    for t in range(a.tables):
        unique += int(torch.unique(inputs[t]).numel())
    fwd_bytes = a.tables * gather_reduce_bytes(n, a.batch, a.dim)
    bwd_bytes = a.tables * expand_bytes(n, a.dim)
    return {
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "unique_rows": unique,
        "forward_ms": fwd_ms,
        "forward_gbps": fwd_bytes / (fwd_ms * 1e-3) / 1e9,
        "backward_sparse_ms": bwd_ms,
        "backward_sparse_gbps": bwd_bytes / (bwd_ms * 1e-3) / 1e9,
        "backward_sparse_coalesce_ms": bwd_coal_ms,
    }


def main():
    a = parse_args()
    # nmpsim first, in its own process: both workloads need the tables' memory.
    nm = None if a.skip_nmpsim else run_nmpsim(a)
    th = run_torch(a)
    out = {"config": vars(a), "torch": th, "nmpsim": nm}
    if nm is not None:
        gr, cg = nm["gather_reduce"], nm["casted_gather_reduce"]
        out["ratio_forward"] = th["forward_ms"] / gr["median_ms"]
        if "gather_reduce_per_table" in nm:
            out["ratio_forward_per_table"] = th["forward_ms"] / nm["gather_reduce_per_table"]["median_ms"]
        out["ratio_backward_uncoalesced"] = th["backward_sparse_ms"] / cg["median_ms"]
        out["ratio_backward_coalesced"] = th["backward_sparse_coalesce_ms"] / cg["median_ms"]
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{th['device']}, torch {th['torch']}: {a.tables} tables x {a.rows} rows x dim {a.dim}, "
          f"batch {a.batch} x {a.bag} lookups, {a.reps} reps (median)")
    print(f"{'':42} {'ms':>10} {'GB/s':>10}")
    print(f"{'torch EmbeddingBag forward (sum)':42} {th['forward_ms']:>10.4f} {th['forward_gbps']:>10.1f}")
    print(f"{'torch backward, sparse (uncoalesced)':42} {th['backward_sparse_ms']:>10.4f} "
          f"{th['backward_sparse_gbps']:>10.1f}")
    print(f"{'torch backward, sparse + coalesce()':42} {th['backward_sparse_coalesce_ms']:>10.4f} {'':>10}")
    if nm is not None:
        print(f"{'nmpsim gather-reduce, one launch':42} {gr['median_ms']:>10.4f} {gr['gbps']:>10.1f}")
        if "gather_reduce_per_table" in nm:
            pt = nm["gather_reduce_per_table"]
            print(f"{'nmpsim gather-reduce, a launch per table':42} {pt['median_ms']:>10.4f} {pt['gbps']:>10.1f}")
        print(f"{'nmpsim casted gather-reduce':42} {cg['median_ms']:>10.4f} {cg['gbps']:>10.1f}")
        print(f"device copy bandwidth (nmpsim): {nm['copy_gbps']:.1f} GB/s")
        print(f"forward: torch / nmpsim = {out['ratio_forward']:.2f}"
              + (f" (a launch per table, as torch: {out['ratio_forward_per_table']:.2f})"
                 if "ratio_forward_per_table" in out else ""))
        print(f"backward: torch uncoalesced / nmpsim casted = {out['ratio_backward_uncoalesced']:.2f}; "
              f"torch coalesced / nmpsim casted = {out['ratio_backward_coalesced']:.2f}")


if __name__ == "__main__":
    main()
