#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, for the end-to-end test of profiles/slurm.
#
#   tests/slurm/cluster.sh start DIR   install slurm-wlm and munge if missing (apt, as root), write DIR/slurm.conf,
#                                      start munged, slurmctld and slurmd (all private to DIR), wait until the
#                                      node is idle; then `export PATH=DIR/bin:$PATH` to use it
#   tests/slurm/cluster.sh stop DIR    cancel the cluster's jobs and stop the daemons that `start DIR` started
#
# Everything lives in DIR: configuration, state, logs, pid files, a munge key and socket, its own ports; the
# machine's own /etc/slurm, /etc/munge and any running munged or SLURM daemons are left alone. DIR/bin holds the
# client commands (sbatch, srun, squeue, ...) bound to DIR/slurm.conf: SLURM_CONF alone does not reach the
# `srun` inside a job (the Snakemake job step drops SLURM_* variables), a PATH entry does. No accounting
# database: job states come from squeue, kept for an hour after a job ends (MinJobAge). No cgroups (containers
# often have none): processes are tracked through /proc (proctrack/linuxproc), no task binding. The node offers
# at least 4 CPUs whatever the machine has (config_overrides), so that a test's few single-threaded jobs run at once.
# Two partitions on the one node: `hetfl` (the default) and `gpu`, and one GRES "gpu" without a device, so that a
# test can see where a job asking for a GPU is placed (it runs without CUDA).
#
# Exit status of `start`: 0 ready; 3 the packages are missing and cannot be installed here (not root, no apt,
# apt failed): callers skip; anything else: the cluster did not come up (see DIR/*.log).
set -euo pipefail

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}
[ $# -eq 2 ] || usage
action=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
PATH=$(printf %s "$PATH" | tr : '\n' | grep -vx "$dir/bin" | paste -sd :) # the real commands, not ours
PACKAGES=(slurm-wlm munge)
DAEMONS=(slurmd slurmctld munged) # stop order

have_slurm() {
    for tool in slurmctld slurmd munged sbatch squeue sinfo scancel; do
        command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || return 1
    done
}

install() {
    if [ "$(id -u)" != 0 ]; then # the daemons run as root too
        echo "cannot install and run ${PACKAGES[*]}: not root" >&2
        exit 3
    fi
    have_slurm && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "cannot install ${PACKAGES[*]}: no apt-get on this machine" >&2
        exit 3
    fi
    echo "installing ${PACKAGES[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    # the package lists may be stale or absent: update and try again once
    if ! apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >"$dir/apt.log" 2>&1; then
        if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"; } \
            >>"$dir/apt.log" 2>&1; then
            echo "cannot install ${PACKAGES[*]}: apt-get failed (last lines of $dir/apt.log):" >&2
            tail -5 "$dir/apt.log" >&2
            exit 3
        fi
    fi
    have_slurm || {
        echo "cannot install ${PACKAGES[*]}: installed, but the SLURM tools are not found" >&2
        exit 3
    }
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {
    local host cpus mem_mb
    host=$(hostname -s)
    cpus=$(($(nproc) > 4 ? $(nproc) : 4)) # at least 4 job slots: test jobs mostly start up and wait
    mem_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
    mkdir -p "$dir/state" "$dir/spool"
    chmod 700 "$dir"
    # munge: a fresh key and a private socket (munged refuses keys and sockets others can read or write)
    head -c 1024 /dev/urandom >"$dir/munge.key"
    chmod 400 "$dir/munge.key"
    cat >"$dir/slurm.conf" <<EOF
# One-node test cluster written by tests/slurm/cluster.sh
ClusterName=hetfl-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
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
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=3600
SlurmdTimeout=60
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:1 State=UNKNOWN
PartitionName=hetfl Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
EOF
    # one "GPU" with no device behind it: jobs can ask for it (sbatch --gpus=1) and be placed, nothing more
    echo "NodeName=$host Name=gpu File=/dev/null" >"$dir/gres.conf"
}

CLIENTS=(sbatch srun salloc squeue scancel sinfo scontrol sacct sacctmgr sshare sstat sprio)

write_clients() { # DIR/bin/<command>: the command with SLURM_CONF set to this cluster's
    mkdir -p "$dir/bin"
    for tool in "${CLIENTS[@]}"; do
        command -v "$tool" >/dev/null 2>&1 || continue
        printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$dir/slurm.conf" "$(command -v "$tool")" >"$dir/bin/$tool"
        chmod +x "$dir/bin/$tool"
    done
}

# start NAME CMD...: run a daemon in the foreground of a new session, its pid in DIR/NAME.pid
start_daemon() {
    local name=$1
    shift
    setsid "$@" >"$dir/$name.out" 2>&1 </dev/null &
    echo $! >"$dir/$name.pid"
}

wait_for() { # wait_for SECONDS DESCRIPTION CMD...
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq $((seconds * 5))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "timed out after ${seconds}s waiting for $what; logs in $dir" >&2
    return 1
}

node_idle() {
    [ "$(sinfo -h -N -o %t 2>/dev/null | sort -u)" = idle ] # one line per partition of the node
}

fail() { # fail MESSAGE: show the daemons' last words, stop what was started, exit 1
    echo "$1" >&2
    for log in "$dir"/*.out "$dir"/*.log; do
        [ -s "$log" ] && { echo "--- $log" && tail -5 "$log"; } >&2
    done
    stop
    exit 1
}

start() {
    install
    [ -e "$dir/slurmctld.pid" ] && stop
    write_config
    write_clients
    export SLURM_CONF="$dir/slurm.conf"
    PATH="$PATH:/usr/sbin"
    start_daemon munged munged --foreground --force --socket="$dir/munge.socket" --key-file="$dir/munge.key" \
        --pid-file="$dir/munged.pidfile" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed"
    wait_for 10 munged test -S "$dir/munge.socket" || fail "munged did not start"
    start_daemon slurmctld slurmctld -D -f "$SLURM_CONF"
    wait_for 30 slurmctld scontrol ping || fail "slurmctld did not start"
    start_daemon slurmd slurmd -D -f "$SLURM_CONF"
    wait_for 60 "the node to be idle" node_idle || fail "the node did not come up"
    echo "PATH=$dir/bin:\$PATH"
}

stop() {
    export SLURM_CONF="$dir/slurm.conf"
    if [ -e "$dir/slurmctld.pid" ] && [ -e "$SLURM_CONF" ]; then
        # every job of this private cluster is ours
        scancel --full --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null || true
        wait_for 15 "the jobs to end" sh -c '[ -z "$(squeue -h -t running,completing -o %i)" ]' || true
    fi
    for name in "${DAEMONS[@]}"; do
        [ -e "$dir/$name.pid" ] || continue
        pid=$(cat "$dir/$name.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
        rm -f "$dir/$name.pid"
    done
}

case $action in
start) start ;;
stop) stop ;;
*) usage ;;
esac
