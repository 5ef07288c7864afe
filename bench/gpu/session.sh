#!/usr/bin/env bash
# Every check of docs/gpu.md on a GPU machine, in order, from what
# bench/gpu/pack.sh built. Goes on past a failing step and ends with a table
# of the steps and their exit statuses. Logs go to DIR/logs; when $OUT is
# set (a device call), session.log and logs.tgz (every log and run
# directory) are copied there.
#
#   bench/gpu/session.sh .gpu [quick|perf|full]
#
# `quick`: the GPU tests and `kernels check` (equivalence); `perf`: the
# kernel bench, the PyTorch comparison and the training runs (the
# strategies' too); `strategies`: the GPU tests and the strategies' training
# runs alone; `full` (the default): all of it, inside one device call.
set -uo pipefail
dir=${1:-.gpu}
mode=${2:-full}
here=$(cd "$(dirname "$0")" && pwd)
logs=$dir/logs
mkdir -p "$logs"
summary=()

# NMPSIM_GPU_DEADLINE (seconds, default 560) bounds the whole script, so that
# the logs come back from a device call of 10 minutes even when a step hangs:
# each step's limit is cut to what is left, and a step with under 20 s left
# is skipped (rc=skip).
deadline=${NMPSIM_GPU_DEADLINE:-560}

step() {
    local name=$1 limit=$2
    shift 2
    local left=$((deadline - SECONDS - 15))
    if [ "$left" -lt 20 ]; then
        echo "=== $name: skipped, ${left}s left of the ${deadline}s deadline" | tee -a "$logs/session.log"
        summary+=("$(printf '%-28s rc=%-4s %4ss' "$name" skip 0)")
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "=== $name: $*" | tee -a "$logs/session.log"
    local t0=$SECONDS
    timeout "$limit" "$here/env.sh" "$@" >"$logs/$name.log" 2>&1
    local rc=$?
    tail -n 40 "$logs/$name.log" | tee -a "$logs/session.log"
    summary+=("$(printf '%-28s rc=%-4s %4ss' "$name" "$rc" $((SECONDS - t0)))")
    # Keep what has run so far where a device call brings it back.
    [ -n "${OUT:-}" ] && cp "$logs/session.log" "$OUT/session.log"
    return 0
}

export NMPSIM_REQUIRE_GPU=1
# The log's first lines say when and on what it ran: bench/gpu/keep.sh files
# the log under bench/gpu/results/<date>-<device>/ from them.
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee -a "$logs/session.log"
echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)" | tee -a "$logs/session.log"
echo "build: $("$dir/nmpsim" --version 2>/dev/null | head -n 1)" | tee -a "$logs/session.log"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
    2>&1 | tee -a "$logs/session.log"
bin="$dir/nmpsim"
step gpu-info 60 "$bin" gpu
if [ "$mode" != perf ]; then
    for t in "$dir"/test-*; do
        [ -x "$t" ] || continue
        # (Of a crate's unit tests, the GPU ones.)
        filter=()
        case "$(basename "$t")" in test-lib-*) filter=(cuda_tests) ;; esac
        step "$(basename "$t")" 240 "$t" ${filter[@]+"${filter[@]}"} --nocapture --test-threads 1
    done
fi
if [ "$mode" = full ] || [ "$mode" = quick ]; then
    step check-sum 120 "$bin" kernels check --backend all
    step check-mean 120 "$bin" kernels check --backend all --pooling mean --dist uniform
    step check-weighted 120 "$bin" kernels check --backend all --pooling weighted-sum
fi
if [ "$mode" = full ] || [ "$mode" = perf ]; then
    step bench-kernels 120 "$bin" kernels bench --backend cuda --json
    step bench-vs-torch 120 python3 "$dir/embeddingbag_vs_torch.py" --nmpsim "$bin"
    step train-kaggle 150 "$bin" train --model criteo-kaggle --device cuda --batch 2048 \
        --iters 50 --mode baseline-cpu --out "$logs/train-kaggle"
    step train-rm1-all 180 "$bin" train --model rm1 --device cuda --mode all --batch 2048 \
        --iters 12 --sim-batches 1 --engine native --out "$logs/train-rm1"
fi
if [ "$mode" != quick ]; then
    # The strategies' GPU-placed primitives measured on CUDA, and the same
    # run with them modelled, beside it (docs/strategies.md).
    for device in cuda cpu; do
        step "train-strategies-$device" 150 "$bin" train --model criteo-kaggle --device "$device" \
            --mode fae,scars,cdlrm,eltt --batch 2048 --iters 12 --out "$logs/train-strategies-$device"
    done
    step train-fae-nmp 120 "$bin" train --model rm1 --device cuda --mode fae-nmp --batch 2048 \
        --iters 12 --sim-batches 1 --engine native --out "$logs/train-fae-nmp"
    # EL-Rec's TT forward on the GPU, with and without reuse, on issue 43's
    # table (10M rows, dim 16, R 128, batch 2048, one lookup a table).
    step tt-bench-cuda 120 "$bin" tt --rows 10000000 --dim 16 --bench --device cuda \
        --batches 8 --reps 5 --out "$logs/tt-bench-cuda"
fi
printf '%s\n' "--- summary" "${summary[@]}" | tee -a "$logs/session.log"
if [ -n "${OUT:-}" ]; then
    cp "$logs/session.log" "$OUT/session.log"
    tar czf "$OUT/logs.tgz" -C "$dir" logs
fi
