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
# for every task with afterany, so one failed or cancelled task does not block
# the merge). Shard i writes OUT/shards/i; re-submitting the same command
# resumes every shard where it stopped and merges again. Logs, one per attempt
# (%A the job id, %a the shard):
#
#   OUT/logs/shard-%a.job%A.log   the shard's runs, one line each, then a
#                                 summary line: exit status, time, what next
#   OUT/logs/merge.job%j.log      the merge: counts, failed runs, and the
#                                 shards to re-run when runs are missing (it
#                                 then exits 1)
#
# Environment:
#
#   NMPSIM          the nmpsim binary        [default: target/release/nmpsim]
#   CPUS_PER_TASK   cores per array task, also the shard's --jobs [default: 4];
#                   more than a node has leaves the array pending for ever, so
#                   it is checked against sinfo at submission
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

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

case "${1:-}" in
    task)
        # Inside an array task: SPEC SHARDS OUT. nmpsim runs as a child, so
        # that the summary line is written also when the task is cancelled
        # (scancel sends SIGTERM, and Slurm waits KillWait before SIGKILL).
        spec=$2 shards=$3 out=$4
        i=$((SLURM_ARRAY_TASK_ID))
        jobs=${SLURM_CPUS_PER_TASK:-$CPUS_PER_TASK}
        who="shard $i/$shards (job ${SLURM_ARRAY_JOB_ID:-?}_$i on $(hostname -s))"
        echo "sweep-array: $who started $(now): $NMPSIM sweep $spec --shard $i/$shards --out $out/shards/$i --jobs $jobs --yes"
        t0=$(date +%s)
        "$NMPSIM" sweep "$spec" --shard "$i/$shards" --out "$out/shards/$i" --jobs "$jobs" --yes &
        child=$!
        trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT
        rc=0
        wait "$child" || rc=$?
        # A trapped signal ends `wait` early; the child's own status follows.
        while kill -0 "$child" 2>/dev/null; do
            rc=0
            wait "$child" || rc=$?
        done
        case $rc in
            0) what="every run of the shard completed" ;;
            1) what="the shard ran to its end, but some runs failed (their errors above and in results.csv); the merge lists them" ;;
            2) what="nmpsim rejected the spec or the arguments, nothing ran (the error above)" ;;
            130|143) what="interrupted (cancelled or out of time); its finished runs are kept: re-submit the same command to resume" ;;
            137) what="killed (SIGKILL: out of memory or time); finished runs are kept: re-submit the same command to resume" ;;
            *) what="unexpected: see the lines above; re-submit the same command to resume" ;;
        esac
        echo "sweep-array: $who: exit $rc after $(( $(date +%s) - t0 )) s at $(now): $what"
        exit "$rc"
        ;;
    merge)
        # The merge job: SHARDS OUT.
        shards=$2 out=$3
        echo "sweep-array: merge of $shards shards into $out (job ${SLURM_JOB_ID:-?} on $(hostname -s)) started $(now)"
        dirs=()
        for i in $(seq 1 "$shards"); do
            if [ -f "$out/shards/$i/sweep.json" ]; then
                dirs+=("$out/shards/$i")
            else
                echo "sweep-array: shard $i/$shards has no sweep directory ($out/shards/$i): it never started; see $out/logs/shard-$i.job*.log"
            fi
        done
        if [ ${#dirs[@]} -eq 0 ]; then
            echo "sweep-array: no shard ran, nothing to merge: re-submit the same command" >&2
            exit 1
        fi
        rc=0
        "$NMPSIM" sweep merge "$out" "${dirs[@]}" || rc=$?
        case $rc in
            0) echo "sweep-array: merged at $(now): $out/results.csv" ;;
            1) echo "sweep-array: the merge is incomplete (above): re-submit the same command to run the missing shards and merge again" ;;
            *) echo "sweep-array: the merge failed (exit $rc, above)" ;;
        esac
        exit "$rc"
        ;;
    ""|-h|--help)
        # The comment block at the top, up to the first line of code.
        awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
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
case "$CPUS_PER_TASK" in ''|*[!0-9]*|0) die "CPUS_PER_TASK must be a positive integer, not '$CPUS_PER_TASK'" ;; esac

# A task asking for more CPUs than any node of its partition has stays
# pending for ever (Slurm accepts it): check against sinfo where there is one.
partition=
set -f
# shellcheck disable=SC2086
set -- $SBATCH_ARGS
set +f
while [ $# -gt 0 ]; do
    case $1 in
        --partition=*) partition=${1#--partition=} ;;
        -p|--partition) partition=${2:-}; shift ;;
        -p*) partition=${1#-p} ;;
    esac
    shift
done
if command -v sinfo >/dev/null 2>&1; then
    if cpus=$(sinfo -h ${partition:+-p "$partition"} -o '%c' 2>/dev/null); then
        most=0
        for c in $cpus; do c=${c%+}; case $c in ''|*[!0-9]*) ;; *) [ "$c" -gt "$most" ] && most=$c ;; esac; done
        if [ "$most" -gt 0 ] && [ "$CPUS_PER_TASK" -gt "$most" ]; then
            where="any partition"
            [ -n "$partition" ] && where="partition '$partition'"
            die "CPUS_PER_TASK=$CPUS_PER_TASK, but the largest node in $where has $most CPUs (sinfo): the array would stay pending for ever; set CPUS_PER_TASK=$most or less"
        fi
    fi
fi

# Check the spec (and print its size) before queueing anything. (The whole
# plan is read, then its first line printed: a pipe closed early would end
# nmpsim with SIGPIPE, which pipefail turns into a failure.)
plan=$("$NMPSIM" sweep "$spec" --dry-run --shard "1/$shards" --out "$out/shards/1")
echo "${plan%%$'\n'*}"

# OUT and OUT/logs are made just before submitting, and removed again (when
# this made them) if sbatch refuses.
made_out= made_logs=
[ -d "$out" ] || made_out=1
[ -d "$out/logs" ] || made_logs=1
mkdir -p "$out/logs"
undo() {
    [ -n "$made_logs" ] && rmdir "$out/logs" 2>/dev/null || true
    [ -n "$made_out" ] && rmdir "$out" 2>/dev/null || true
}
self=$(realpath "$0")
# shellcheck disable=SC2086 # SBATCH_ARGS is a list of flags
if ! array=$(sbatch --parsable $SBATCH_ARGS \
    --job-name="nmpsim-sweep" \
    --array="1-$shards" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --output="$out/logs/shard-%a.job%A.log" \
    --export="ALL,NMPSIM=$NMPSIM" \
    "$self" task "$spec" "$shards" "$out"); then
    undo
    die "sbatch refused the array job (its message above); nothing was submitted"
fi
array=${array%%;*}
# shellcheck disable=SC2086
if ! merge=$(sbatch --parsable $SBATCH_ARGS \
    --job-name="nmpsim-sweep-merge" \
    --dependency="afterany:$array" \
    --cpus-per-task=1 \
    --output="$out/logs/merge.job%j.log" \
    --export="ALL,NMPSIM=$NMPSIM" \
    "$self" merge "$shards" "$out"); then
    scancel "$array" 2>/dev/null || true
    die "sbatch refused the merge job (its message above); the array job $array was cancelled again"
fi
merge=${merge%%;*}
echo "submitted array job $array ($shards shards) and merge job $merge; logs: $out/logs/; results: $out/results.csv"
