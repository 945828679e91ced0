#!/usr/bin/env bash
# A throw-away one-node Slurm cluster on localhost, for testing the Slurm profile for real.
#
#   scripts/slurm_cluster.sh install          # apt-get install slurm-wlm munge (root, Debian/Ubuntu)
#   scripts/slurm_cluster.sh start DIR [GPUS] # write configs under DIR, start munged, slurmctld, slurmd
#   scripts/slurm_cluster.sh stop DIR         # cancel its jobs, stop the three daemons by their pid
#
# Everything lives under DIR (an empty temp folder): slurm.conf, gres.conf, a private munge key
# and socket, state and spool folders, daemon logs and pid files. Nothing under /etc is changed.
# Clients find the cluster through `. DIR/env.sh` (sets SLURM_CONF, puts DIR/bin/srun on PATH).
#
# No accounting daemon: sacct does not work, so the Snakemake profile polls with squeue, which
# lists a finished job only for MinJobAge seconds after it ends (Slurm's default: 300). The plugin
# must read each job's final state before it disappears, and it switches from squeue to sacct
# when MinJobAge is below 3 x --slurm-init-seconds-before-status-checks; MinJobAge=600 below
# keeps finished jobs listed for 10 minutes, for the plugin and for tests/test_slurm.py.
# TaskPlugin=task/none: no CPU binding (srun says the configuration "lacks support for cpu
# binding"), so a job sees every CPU of the node, not only those it was given.
# docs/cluster.md (Testing on a real Slurm cluster) describes how the tests use this cluster.
# GPUS (default 2) fake GPUs are declared as a GPU GRES backed by dummy device files, so jobs that
# ask `--gpus=1` are scheduled and accounted like on a GPU cluster, while torch sees no CUDA.
set -euo pipefail

die() { echo "slurm_cluster: $*" >&2; exit 1; }

install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
        echo "slurm_cluster: slurm-wlm and munge are installed"
        return 0
    fi
    [ "$(id -u)" = 0 ] || die "installing slurm-wlm and munge needs root"
    command -v apt-get >/dev/null || die "no apt-get: install slurm-wlm and munge by hand"
    export DEBIAN_FRONTEND=noninteractive
    timeout 300 apt-get update -q >/dev/null || die "apt-get update failed"
    timeout 600 apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null \
        || die "apt-get install slurm-wlm munge failed"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Wait up to $1 seconds for the command in the remaining arguments to succeed.
wait_for() {
    local seconds=$1; shift
    for _ in $(seq $((seconds * 4))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.25
    done
    return 1
}

start() {
    local dir=${1:?usage: start DIR [GPUS]} gpus=${2:-2}
    [ "$(id -u)" = 0 ] || die "starting slurmd needs root"
    for exe in munged slurmctld slurmd; do command -v $exe >/dev/null || die "$exe not found (run: $0 install)"; done
    mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
    chmod 700 "$dir"
    mkdir -p "$dir"/{munge,state,spool,log}
    chmod 700 "$dir/munge"

    local node cpus mem_mb ctld_port slurmd_port
    node=$(hostname -s)
    # The CPUs this process may run on; nproc would also obey OMP_NUM_THREADS, which a caller pinned to one
    # thread (lostmid's numerics, the tests) sets to 1: a one-CPU node runs one Slurm job at a time.
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    # Offer 80% of the available memory, so jobs' --mem fits without swapping the machine.
    mem_mb=$(awk '/MemAvailable/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
    ctld_port=$(free_port)
    slurmd_port=$(free_port)

    # A private munge key and socket: the host's munged (if any) is left alone.
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"

    local gres_line="" gres_types=""
    if [ "$gpus" -gt 0 ]; then
        gres_types="GresTypes=gpu"
        gres_line="Gres=gpu:$gpus"
        # Slurm 22.05 drops a GPU GRES without device files, so each fake GPU gets one: a
        # character device (a copy of /dev/null) where mknod is allowed, else a plain file
        # (slurmd then logs "not a valid character device" but still counts it).
        mkdir -p "$dir/gpus"
        for i in $(seq 0 $((gpus - 1))); do
            mknod "$dir/gpus/fake$i" c 1 3 2>/dev/null || touch "$dir/gpus/fake$i"
        done
        echo "NodeName=$node Name=gpu File=$dir/gpus/fake[0-$((gpus - 1))]" >"$dir/gres.conf"
    else
        : >"$dir/gres.conf"
    fi

    cat >"$dir/slurm.conf" <<EOF
ClusterName=lostmid-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.daemon.pid
SlurmdPidFile=$dir/slurmd.daemon.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
$gres_types
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb $gres_line State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    # Clients find this cluster through SLURM_CONF. Snakemake's jobstep plugin strips every
    # SLURM_* variable (SLURM_CONF too) before the `srun` it runs inside a job, so that srun
    # would look for /etc/slurm/slurm.conf; a two-line srun first on PATH puts it back.
    # (A real cluster keeps its config at the default path and needs no such thing.)
    mkdir -p "$dir/bin"
    printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$dir/slurm.conf" "$(command -v srun)" >"$dir/bin/srun"
    chmod +x "$dir/bin/srun"
    printf 'export SLURM_CONF=%s\nexport PATH=%s:$PATH\n' "$dir/slurm.conf" "$dir/bin" >"$dir/env.sh"
    export SLURM_CONF=$dir/slurm.conf

    # Each daemon runs in the foreground of its own session; $! is its pid.
    setsid munged -F --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/munge/munged.daemon.pid" --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge/munged.seed" </dev/null >>"$dir/log/munged.out" 2>&1 &
    echo $! >"$dir/munged.pid"
    wait_for 10 test -S "$dir/munge/munge.socket" || die "munged did not start: $(tail -3 "$dir/log/munged.log" 2>/dev/null)"

    setsid slurmctld -D -i -f "$dir/slurm.conf" </dev/null >>"$dir/log/slurmctld.out" 2>&1 &
    echo $! >"$dir/slurmctld.pid"
    wait_for 20 scontrol ping || die "slurmctld did not start: $(tail -3 "$dir/log/slurmctld.log" 2>/dev/null)"

    setsid slurmd -D -f "$dir/slurm.conf" -N "$node" </dev/null >>"$dir/log/slurmd.out" 2>&1 &
    echo $! >"$dir/slurmd.pid"
    node_idle() { sinfo -h -N -n "$node" -o %t | grep -qx idle; }
    wait_for 30 node_idle || die "slurmd did not register an idle node: $(tail -3 "$dir/log/slurmd.log" 2>/dev/null)"
    echo "slurm_cluster: node $node up ($cpus CPUs, ${mem_mb} MB, $gpus fake GPUs); use it after: . $dir/env.sh"
}

stop() {
    local dir=${1:?usage: stop DIR}
    [ -f "$dir/slurm.conf" ] || die "no cluster under $dir"
    export SLURM_CONF=$dir/slurm.conf
    # Jobs first, while slurmctld still answers; then the daemons in reverse start order.
    timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    local name pid
    for name in slurmd slurmctld munged; do
        [ -f "$dir/$name.pid" ] || continue
        pid=$(cat "$dir/$name.pid")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            wait_for 10 bash -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$dir/$name.pid"
    done
    echo "slurm_cluster: stopped the cluster under $dir"
}

case "${1:-}" in
    install) install ;;
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    *) die "usage: $0 install | start DIR [GPUS] | stop DIR" ;;
esac
