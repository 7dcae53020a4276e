#!/usr/bin/env bash
# A real one-node SLURM cluster on localhost, for testing `snakemake --profile profiles/slurm`.
#
#   sudo tests/slurm/cluster.sh start    # install (once), configure, start; prints the env line to use
#   sudo tests/slurm/cluster.sh status
#   sudo tests/slurm/cluster.sh stop     # stops only the daemons this script started, by PID
#
# Debian 12 packages (slurmctld, slurmd, slurm-client, munge; slurmdbd on a loopback MariaDB so that
# `sacct` works, which is what the snakemake slurm plugin polls). No systemd, no cgroups
# (proctrack/linuxproc), fake GPUs (char devices cloned from /dev/null) so `--gpus=N` jobs schedule.
# State and logs live in $SLURM_CI_DIR. The config goes to /etc/slurm (slurm.conf, gres.conf,
# slurmdbd.conf), because the snakemake slurm plugin's job step drops SLURM_CONF from the
# environment of its inner `srun`, which then only finds the default location; files there that
# this script did not write are never overwritten (it stops with an error), and `stop` removes
# the ones it wrote. Needs root: it installs packages and runs the daemons as root.
#
# Settings (environment):
#   SLURM_CI_DIR       state, logs, config            (default /tmp/posbias-slurm)
#   SLURM_CI_GPUS      fake GPUs on the node          (default 2)
#   SLURM_CI_CPUS      CPUs the node claims           (default 16; more than the machine has is fine:
#   SLURM_CI_MEM_MB    memory the node claims         (default 131072)  SlurmdParameters=config_overrides)
#   SLURM_CI_ACCOUNTS  extra accounts for user root   (default none; space-separated)
#
# Facts behind each choice: ../shared/notes/slurm.md (measured on a machine like CI's).
set -euo pipefail

DIR=${SLURM_CI_DIR:-/tmp/posbias-slurm}
GPUS=${SLURM_CI_GPUS:-2}
CPUS=${SLURM_CI_CPUS:-16}
MEM=${SLURM_CI_MEM_MB:-131072}
ACCOUNTS=${SLURM_CI_ACCOUNTS:-}
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
HOST=$(hostname -s)
ETC=/etc/slurm
MARK="# written by posbias tests/slurm/cluster.sh"

say() { echo "slurm-ci: $*" >&2; }
die() { say "error: $*"; exit 1; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    for _ in $(seq $((limit * 5))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    die "$what did not come up within ${limit}s (logs: $DIR/log)"
}

install_packages() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing ${missing[*]}"
    local policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then  # keep postinst scripts from starting daemons with default configs
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
        policy=created
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [ "$policy" = created ] && rm -f /usr/sbin/policy-rc.d
    return 0
}

record() { echo "$1 $2" >> "$DIR/started"; }  # name pid: what stop may kill

pid_of_file() { [ -s "$1" ] && cat "$1" || true; }

check_etc() {
    for f in slurm.conf gres.conf slurmdbd.conf; do
        if [ -e "$ETC/$f" ] && ! grep -qxF "$MARK" "$ETC/$f"; then
            die "$ETC/$f exists and was not written by this script; not touching a real cluster's config"
        fi
    done
}

write_config() {
    check_etc
    mkdir -p "$DIR"/{run,log,spool,ctld,dev,mysql} "$ETC"
    local gpu_files=""
    if [ "$GPUS" -gt 0 ]; then
        for i in $(seq 0 $((GPUS - 1))); do mknod -m 666 "$DIR/dev/fakegpu$i" c 1 3; done
        gpu_files="NodeName=$HOST Name=gpu File=$DIR/dev/fakegpu[0-$((GPUS - 1))]"
    fi
    cat > "$ETC/slurm.conf" <<EOF
$MARK
ClusterName=ci
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
MailProg=/bin/true
SlurmctldPort=6817
SlurmdPort=6818
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
DefMemPerCPU=1000
MinJobAge=300
KillWait=30
InactiveLimit=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
    printf '%s\nAutoDetect=off\n%s\n' "$MARK" "$gpu_files" > "$ETC/gres.conf"
    cat > "$ETC/slurmdbd.conf" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=slurm
StoragePass=slurmci
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$ETC/slurmdbd.conf"
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        say "munged already running; using it (it will not be stopped)"
        return 0
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- /usr/sbin/munged
    wait_for 10 munged sh -c 'munge -n | unmunge'
    record munged "$(cat /run/munge/munged.pid)"
}

start_mariadb() {
    mariadb-install-db --user=root --datadir="$DIR/mysql" --auth-root-authentication-method=socket \
        --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1
    setsid mariadbd --no-defaults --user=root --datadir="$DIR/mysql" --socket="$DIR/run/mysql.sock" \
        --pid-file="$DIR/run/mariadbd.pid" --bind-address=127.0.0.1 --port=3306 --skip-name-resolve \
        --innodb-buffer-pool-size=512M --innodb-lock-wait-timeout=900 >"$DIR/log/mariadbd.log" 2>&1 < /dev/null &
    wait_for 30 mariadbd test -S "$DIR/run/mysql.sock"
    wait_for 30 "mariadbd pid file" test -s "$DIR/run/mariadbd.pid"
    record mariadbd "$(cat "$DIR/run/mariadbd.pid")"
    mariadb --socket="$DIR/run/mysql.sock" -u root <<'EOF'
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmci';
CREATE USER 'slurm'@'localhost' IDENTIFIED BY 'slurmci';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF
}

start_slurm() {
    slurmdbd
    wait_for 30 slurmdbd sacctmgr -n list cluster
    record slurmdbd "$(pid_of_file "$DIR/run/slurmdbd.pid")"
    slurmctld
    wait_for 30 slurmctld scontrol ping
    record slurmctld "$(pid_of_file "$DIR/run/slurmctld.pid")"
    slurmd
    wait_for 30 "the node" sh -c "sinfo -h -n $HOST -o %T | grep -qx idle"
    record slurmd "$(pid_of_file "$DIR/run/slurmd.pid")"
    wait_for 30 "cluster registration" sh -c "sacctmgr -n list cluster format=cluster | grep -q ci"
    for account in $ACCOUNTS; do
        sacctmgr -i add account "$account" >/dev/null
        sacctmgr -i add user root account="$account" >/dev/null
    done
}

smoke() {
    local id
    id=$(sbatch --parsable --job-name=slurm-ci-smoke --output=/dev/null --wrap true)
    wait_for 60 "the smoke job" sh -c "sacct -X -n -j $id -o State | grep -q COMPLETED"
    say "smoke job $id completed; sacct works"
}

stop() {
    [ -f "$DIR/started" ] || { say "nothing started by this script in $DIR"; return 0; }
    if scontrol ping >/dev/null 2>&1; then scancel --full --quiet --user root 2>/dev/null || true; fi
    tac "$DIR/started" | while read -r name pid; do
        [ -n "$pid" ] || continue
        if [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$name" ]; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
            [ -d "/proc/$pid" ] && kill -9 "$pid" 2>/dev/null || true
            say "stopped $name ($pid)"
        fi
    done
    rm -f "$DIR/started"
    for f in slurm.conf gres.conf slurmdbd.conf; do
        if [ -e "$ETC/$f" ] && grep -qxF "$MARK" "$ETC/$f"; then rm -f "$ETC/$f"; fi
    done
}

case "${1:-}" in
    start)
        [ "$(id -u)" = 0 ] || die "needs root (installs packages, runs the daemons as root)"
        install_packages
        stop
        rm -rf "$DIR" && mkdir -p "$DIR"
        write_config
        start_munge
        start_mariadb
        start_slurm
        smoke
        say "up: node $HOST, $CPUS CPUs, ${MEM} MB, $GPUS fake GPUs (config in $ETC, state and logs in $DIR)"
        ;;
    stop) stop ;;
    status)
        sinfo -N -o "%N %T %c %m %G" && squeue ;;
    *) die "usage: $0 start|stop|status" ;;
esac
