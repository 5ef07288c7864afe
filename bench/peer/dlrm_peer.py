#!/usr/bin/env python3
"""The PyTorch peer of `nmpsim train --mode baseline-cpu`: one DLRM training
step as the DLRM reference implementation builds it, on the same sizes.

It reads the resolved configuration that `nmpsim train` writes to its run
directory (`config.json`), so both sides train the same model: bottom and top
MLPs (Linear + ReLU, sigmoid at the end), sum-pooled `EmbeddingBag`s with
sparse gradients, the `dot` (or `cat`) interaction through `bmm` and the
strictly lower triangle, BCE loss, and plain SGD over dense and sparse
parameters, on CPU with a fixed number of threads.

Inputs are random, as the reference's `--data-generation=random` draws them
(uniform dense features, uniform row ids), and are generated before timing so
that only the training step is timed, as `nmpsim train` times it.

    python3 bench/peer/dlrm_peer.py RUN_DIR/config.json --iters 20 --threads 2

prints one JSON object: per-iteration milliseconds and their median.
"""

import argparse
import json
import statistics
import sys
import time


def fail(msg):
    print(f"dlrm_peer: {msg}", file=sys.stderr)
    sys.exit(2)


def load_config(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path}: line {e.lineno}: not JSON ({e.msg})")
    try:
        cfg = doc["config"]
        model = cfg["train"]["model"]
        tables = cfg["preset"]["data"]["tables"]
        lookups = []
        for t, spec in enumerate(tables):
            bag = spec["bag_size"]
            if bag.get("kind") != "fixed":
                fail(f"{path}: config.preset.data.tables[{t}].bag_size: only fixed bag sizes are supported")
            lookups.append(int(bag["size"]))
        return {
            "bottom": [int(x) for x in model["bottom"]],
            "top": [int(x) for x in model["top"]],
            "dim": int(model["dim"]),
            "rows": [int(x) for x in model["table_rows"]],
            "interaction": model["interaction"],
            "lookups": lookups,
            "batch": int(cfg["train"]["batch"]),
            "lr": float(cfg["train"]["lr"]),
            "name": cfg["preset"]["name"],
        }
    except (KeyError, TypeError, ValueError) as e:
        fail(f"{path}: not an `nmpsim train` config.json (missing or bad field {e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="config.json from an `nmpsim train` run directory")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed iterations first (default 3)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--batches", type=int, default=4, help="distinct random batches, cycled (default 4)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    c = load_config(args.config)

    try:
        import torch
        import torch.nn as nn
    except ImportError:
        fail("PyTorch is not installed in this Python (pip install torch)")

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    dim, batch = c["dim"], c["batch"]
    n_tables = len(c["rows"])

    def mlp(sizes, sigmoid_last):
        layers = []
        for i in range(len(sizes) - 1):
            n, m = sizes[i], sizes[i + 1]
            lin = nn.Linear(n, m, bias=True)
            # The reference's initialisation.
            with torch.no_grad():
                lin.weight.normal_(0.0, (2.0 / (m + n)) ** 0.5)
                lin.bias.normal_(0.0, (1.0 / m) ** 0.5)
            layers.append(lin)
            last = i == len(sizes) - 2
            layers.append(nn.Sigmoid() if (last and sigmoid_last) else nn.ReLU())
        return nn.Sequential(*layers)

    bot = mlp(c["bottom"], False)
    n_feat = n_tables + 1
    if c["interaction"] == "dot":
        top_in = dim + n_feat * (n_feat - 1) // 2
    else:
        top_in = dim * n_feat
    top = mlp([top_in] + c["top"], True)
    embs = nn.ModuleList()
    for rows in c["rows"]:
        e = nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
        with torch.no_grad():
            bound = (1.0 / rows) ** 0.5
            e.weight.uniform_(-bound, bound)
        embs.append(e)
    li, lj = torch.tril_indices(n_feat, n_feat, offset=-1)

    def forward(dense, indices, offsets):
        x = bot(dense)
        ly = [embs[t](indices[t], offsets[t]) for t in range(n_tables)]
        if c["interaction"] == "dot":
            T = torch.cat([x] + ly, dim=1).view(batch, -1, dim)
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            R = torch.cat([x, Z[:, li, lj]], dim=1)
        else:
            R = torch.cat([x] + ly, dim=1)
        return top(R)

    params = list(bot.parameters()) + list(top.parameters()) + list(embs.parameters())
    opt = torch.optim.SGD(params, lr=c["lr"])
    loss_fn = nn.BCELoss(reduction="mean")

    g = torch.Generator().manual_seed(args.seed)
    data = []
    for _ in range(args.batches):
        dense = torch.rand(batch, c["bottom"][0], generator=g)
        indices, offsets = [], []
        for rows, k in zip(c["rows"], c["lookups"]):
            indices.append(torch.randint(0, rows, (batch * k,), generator=g))
            offsets.append(torch.arange(0, batch * k, k))
        label = torch.randint(0, 2, (batch, 1), generator=g).float()
        data.append((dense, indices, offsets, label))

    times = []
    for it in range(args.warmup + args.iters):
        dense, indices, offsets, label = data[it % len(data)]
        t0 = time.perf_counter()
        opt.zero_grad()
        out = forward(dense, indices, offsets)
        loss = loss_fn(out, label)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if it >= args.warmup:
            times.append((t1 - t0) * 1e3)
    med = statistics.median(times)
    print(json.dumps({
        "peer": "pytorch",
        "torch": torch.__version__,
        "threads": args.threads,
        "model": c["name"],
        "batch": batch,
        "iters": args.iters,
        "ms_per_it": [round(t, 3) for t in times],
        "median_ms": round(med, 3),
        "samples_per_s": round(batch / med * 1e3, 1),
    }))


if __name__ == "__main__":
    main()
