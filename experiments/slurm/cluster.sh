#!/usr/bin/env bash
# A one-node Slurm cluster in a directory of its own, for trying and testing
# sweep-array.sh on one machine (a laptop, a CI machine) before a real cluster.
#
#   experiments/slurm/cluster.sh start DIR      start it; DIR must be new or empty
#   experiments/slurm/cluster.sh stop DIR       stop what `start DIR` started
#   experiments/slurm/cluster.sh run DIR CMD... start, run CMD, stop (also when CMD fails)
#
# `start` installs Debian's slurm-wlm and munge where they are missing (as
# root, with apt-get), writes DIR/slurm.conf for this node (from `slurmd -C`;
# no cgroup plugins, accounting off, its own ports), starts munged, slurmctld
# and slurmd with everything under DIR, and waits for the node to be idle. The
# commands then need SLURM_CONF=DIR/slurm.conf (`run` sets it; `start` prints
# the line). `stop` cancels the cluster's jobs and stops exactly the daemons
# `start` started (their pids are in DIR/pids). The system's own Slurm and
# munge, if any, are left alone.
#
# Exit status 77: the cluster cannot start here (not root and Slurm missing,
# no apt-get, ...); the reason is the last line on stderr, "skipped: ...".
set -euo pipefail

say() { echo "cluster: $*" >&2; }
skip() { echo "skipped: $*" >&2; exit 77; }
die() { echo "cluster: $*" >&2; exit 1; }

# The packages, where a binary is missing.
ensure_slurm() {
    local missing=()
    for b in munged slurmctld slurmd sbatch squeue sinfo scancel; do
        command -v "$b" >/dev/null 2>&1 || PATH="/usr/sbin:/sbin:$PATH" command -v "$b" >/dev/null 2>&1 \
            || missing+=("$b")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || skip "Slurm is not installed (no ${missing[*]}) and installing it needs root: apt-get install slurm-wlm munge"
    command -v apt-get >/dev/null 2>&1 || skip "Slurm is not installed (no ${missing[*]}) and there is no apt-get to install it"
    say "installing slurm-wlm and munge with apt-get (one time)"
    # (Never start the packages' own services: the cluster starts its own.)
    local policy=/usr/sbin/policy-rc.d made=
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made=1; fi
    local rc=0
    { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >&2 \
        || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >&2; }; } || rc=$?
    [ -n "$made" ] && rm -f "$policy"
    [ $rc -eq 0 ] || skip "apt-get could not install slurm-wlm and munge (exit $rc)"
}

# A TCP port nothing listens on, from $1 up.
free_port() {
    local p=$1
    while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
    echo "$p"
}

# Starts "$@" in the background, its output to DIR/$name.out, its pid noted.
spawn() {
    local name=$1; shift
    "$@" >"$dir/$name.out" 2>&1 &
    echo "$! $name" >> "$dir/pids"
}

show_logs() {
    for f in "$dir"/*.log "$dir"/*.out; do
        [ -s "$f" ] || continue
        echo "--- $f (last lines)" >&2
        tail -n 15 "$f" >&2
    done
}

start() {
    [ -d "$dir" ] || mkdir -p "$dir"
    [ -z "$(ls -A "$dir")" ] || die "$dir is not empty: start needs a new directory"
    dir=$(cd "$dir" && pwd)
    export PATH="/usr/sbin:/sbin:$PATH"
    ensure_slurm
    [ "$(id -u)" = 0 ] || skip "the test cluster runs its daemons as root (slurmd starts jobs as their users); run as root"
    chmod 700 "$dir"
    mkdir -p "$dir/state" "$dir/spool"
    # munge: its own key and socket.
    head -c 1024 /dev/urandom > "$dir/munge.key"
    chmod 400 "$dir/munge.key"
    local node cpus host ctld_port slurmd_port
    node=$(slurmd -C | head -n 1) || die "slurmd -C failed"
    case "$node" in NodeName=*) ;; *) die "slurmd -C printed '$node', not a NodeName line" ;; esac
    host=$(hostname -s)
    ctld_port=$(free_port 26817)
    slurmd_port=$(free_port $((ctld_port + 1)))
    cat > "$dir/slurm.conf" <<EOF
# A one-node test cluster (experiments/slurm/cluster.sh); everything under $dir.
ClusterName=nmpsim-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# FIFO, scheduling at once on every submission and job end: seconds matter here.
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
ReturnToService=2
KillWait=5
MinJobAge=600
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    : > "$dir/pids"
    spawn munged munged --foreground --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
        --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed"
    local i
    for i in $(seq 100); do [ -S "$dir/munge.socket" ] && break; sleep 0.1; done
    [ -S "$dir/munge.socket" ] || { show_logs; stop_quietly; die "munged did not start"; }
    spawn slurmctld slurmctld -D -f "$dir/slurm.conf"
    spawn slurmd slurmd -D -f "$dir/slurm.conf"
    export SLURM_CONF="$dir/slurm.conf"
    local state=
    for i in $(seq 150); do
        state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)
        [ "$state" = idle ] && break
        sleep 0.2
    done
    if [ "$state" != idle ]; then
        show_logs
        stop_quietly
        die "the node did not become idle in 30 s (state: '${state:-no answer}'); logs above"
    fi
    cpus=$(sinfo -h -o '%c' | head -n 1)
    say "one-node cluster up ($host, $cpus CPUs, ports $ctld_port and $slurmd_port) in $dir"
    echo "export SLURM_CONF=$dir/slurm.conf"
}

stop_quietly() {
    [ -f "$dir/pids" ] || return 0
    local pid name alive i
    export SLURM_CONF="$dir/slurm.conf" PATH="/usr/sbin:/sbin:$PATH"
    # The cluster's jobs first (its slurmd's job steps are not its children).
    if grep -q ' slurmctld$' "$dir/pids"; then
        scancel --user="$(id -un)" >/dev/null 2>&1 || true
        for i in $(seq 50); do
            [ -z "$(squeue -h -t running,completing -o %i 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    # Then the daemons: SIGTERM to all (last started first), up to 10 s for
    # them to end, SIGKILL to any left.
    tac "$dir/pids" | while read -r pid name; do kill -TERM "$pid" 2>/dev/null || true; done
    for i in $(seq 100); do
        alive=
        while read -r pid name; do kill -0 "$pid" 2>/dev/null && alive=1; done < "$dir/pids"
        [ -z "$alive" ] && break
        sleep 0.1
    done
    if [ -n "$alive" ]; then
        while read -r pid name; do
            kill -0 "$pid" 2>/dev/null && { say "$name (pid $pid) did not end on SIGTERM: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
        done < "$dir/pids"
    fi
    mv "$dir/pids" "$dir/pids.stopped"
}

stop() {
    [ -d "$dir" ] || die "no directory $dir"
    dir=$(cd "$dir" && pwd)
    [ -f "$dir/pids" ] || { say "nothing to stop in $dir"; return 0; }
    stop_quietly
    say "stopped the cluster in $dir"
}

case "${1:-}" in
    start)
        [ $# -eq 2 ] || die "usage: cluster.sh start DIR"
        dir=$2
        start
        ;;
    stop)
        [ $# -eq 2 ] || die "usage: cluster.sh stop DIR"
        dir=$2
        stop
        ;;
    run)
        [ $# -ge 3 ] || die "usage: cluster.sh run DIR CMD..."
        dir=$2
        shift 2
        trap 'stop_quietly' EXIT
        trap 'exit 130' INT TERM
        start >/dev/null
        export SLURM_CONF="$dir/slurm.conf"
        rc=0
        "$@" || rc=$?
        exit $rc
        ;;
    ""|-h|--help)
        awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
        ;;
    *)
        die "unknown command '$1' (start, stop, run, --help)"
        ;;
esac
