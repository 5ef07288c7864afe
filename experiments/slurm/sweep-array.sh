#!/usr/bin/env bash
# Run an nmpsim sweep as a Slurm job array: one array task per shard, then
# one merge job that joins the shards into a single sweep directory.
#
#   experiments/slurm/sweep-array.sh SPEC [SHARDS] [OUT]
#
#   SPEC    the sweep spec (TOML)
#   SHARDS  array tasks, each running one shard i/SHARDS   [default: 8]
#   OUT     the merged sweep directory                     [default: runs/sweep-<spec name>]
#
# Run it on a login node: it submits the array and the merge job (which waits
# for every task with afterany, so one failed task does not block the merge;
# `nmpsim sweep merge` then exits 1 and lists the runs no shard holds).
# Shard i writes OUT/shards/i; re-submitting the same command resumes every
# shard where it stopped. Environment:
#
#   NMPSIM          the nmpsim binary        [default: target/release/nmpsim]
#   CPUS_PER_TASK   cores per array task, also the shard's --jobs [default: 4]
#   SBATCH_ARGS     extra sbatch flags (partition, account, time), e.g.
#                   SBATCH_ARGS="--partition=cpu --time=02:00:00"
#
# The script calls itself inside the jobs with the internal verbs `task` and
# `merge`; those are not meant to be run by hand.
set -euo pipefail

NMPSIM=${NMPSIM:-target/release/nmpsim}
CPUS_PER_TASK=${CPUS_PER_TASK:-4}
SBATCH_ARGS=${SBATCH_ARGS:-}

die() { echo "sweep-array: $*" >&2; exit 2; }

default_out() { echo "runs/sweep-$(basename "${1%.toml}")"; }

case "${1:-}" in
    task)
        # Inside an array task: SPEC SHARDS OUT.
        spec=$2 shards=$3 out=$4
        i=$((SLURM_ARRAY_TASK_ID))
        exec "$NMPSIM" sweep "$spec" --shard "$i/$shards" --out "$out/shards/$i" \
            --jobs "${SLURM_CPUS_PER_TASK:-$CPUS_PER_TASK}" --yes --quiet
        ;;
    merge)
        # The merge job: SHARDS OUT.
        shards=$2 out=$3
        dirs=()
        for i in $(seq 1 "$shards"); do
            [ -f "$out/shards/$i/sweep.json" ] && dirs+=("$out/shards/$i")
        done
        [ ${#dirs[@]} -gt 0 ] || die "no shard directory under $out/shards holds a sweep"
        exec "$NMPSIM" sweep merge "$out" "${dirs[@]}"
        ;;
    ""|-h|--help)
        sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
esac

spec=$1
shards=${2:-8}
out=${3:-$(default_out "$spec")}
[ -f "$spec" ] || die "no spec file '$spec'"
[ -x "$NMPSIM" ] || die "no nmpsim binary at '$NMPSIM' (build with 'cargo build --release' or set NMPSIM)"
command -v sbatch >/dev/null 2>&1 || die "sbatch not found: run this on a Slurm login node"
case "$shards" in ''|*[!0-9]*|0) die "SHARDS must be a positive integer, not '$shards'" ;; esac

# Check the spec (and print its size) before queueing anything. (The whole
# plan is read, then its first line printed: a pipe closed early would end
# nmpsim with SIGPIPE, which pipefail turns into a failure.)
plan=$("$NMPSIM" sweep "$spec" --dry-run --shard "1/$shards" --out "$out/shards/1")
echo "${plan%%$'\n'*}"

mkdir -p "$out/logs"
self=$(realpath "$0")
# shellcheck disable=SC2086 # SBATCH_ARGS is a list of flags
array=$(sbatch --parsable $SBATCH_ARGS \
    --job-name="nmpsim-sweep" \
    --array="1-$shards" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --output="$out/logs/shard-%a.log" \
    --export="ALL,NMPSIM=$NMPSIM" \
    "$self" task "$spec" "$shards" "$out")
array=${array%%;*}
# shellcheck disable=SC2086
merge=$(sbatch --parsable $SBATCH_ARGS \
    --job-name="nmpsim-sweep-merge" \
    --dependency="afterany:$array" \
    --cpus-per-task=1 \
    --output="$out/logs/merge.log" \
    --export="ALL,NMPSIM=$NMPSIM" \
    "$self" merge "$shards" "$out")
echo "submitted array job $array ($shards shards) and merge job $merge; results: $out/results.csv"
