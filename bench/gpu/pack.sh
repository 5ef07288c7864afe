#!/usr/bin/env bash
# Builds what a GPU machine runs, here (x86-64), into .gpu/ (ignored by git):
# the release nmpsim binary and the GPU test executables, stripped so that
# they travel light. Then, on the GPU machine, from the repository root:
#
#   bench/gpu/session.sh .gpu          # every GPU check, logs under $OUT or .gpu/logs
#
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu
rm -rf "$out"
mkdir -p "$out"
cargo build --release --locked --bin nmpsim >&2
strip -o "$out/nmpsim" target/release/nmpsim
# The GPU test executables (they skip without a GPU; NMPSIM_REQUIRE_GPU=1 makes
# them fail instead; `cuda_tt`: EL-Rec's TT kernels), and nmpsim-dlrm's unit
# tests, of which session.sh runs the GPU ones (`cuda_tests`: the strategies'
# primitives on CUDA, eltt's TT tables among them).
cargo test --release --locked --no-run --message-format=json \
    -p nmpsim-kernels --features cuda --test cuda --test cuda_tt \
    -p nmpsim-dlrm --lib --test cuda_dense --test emulate 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kind, name = m["target"]["kind"], m["target"]["name"]
    if kind == ["test"]:
        print("test-" + name, m["executable"])
    elif kind == ["lib"] and name == "nmpsim_dlrm":
        print("test-lib-" + name, m["executable"])
' | while read -r name exe; do
    strip -o "$out/$name" "$exe"
done
cp bench/gpu/embeddingbag_vs_torch.py "$out/"
ls -la "$out" >&2
du -sh "$out" >&2
