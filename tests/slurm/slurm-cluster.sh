#!/bin/sh
# slurm-cluster.sh start DIR [NODES] | stop DIR
#
# A real Slurm 22.05 cluster for the tests, on this machine, under DIR:
# slurmctld and NODES (default 2) slurmd daemons started as `slurmd -N nX`
# (Debian's build runs several per host: each has its own port, spool
# directory and pid file through %n), all on loopback ports picked free.
# AuthType=auth/none and CredType=cred/none (22.05 still ships both) so
# no munged is needed; with SLURM_CLUSTER_JWT=1, auth/jwt is the
# alternative type, with a key in DIR, so that slurmrestd's rest_auth/jwt
# and `scontrol token` work (the primary auth/none checks no token);
# ProctrackType=proctrack/linuxproc and
# TaskPlugin=task/none, so no cgroups and no systemd. `start` returns once
# every node is idle and prints SLURM_CONF=DIR/slurm.conf; `stop` cancels
# every job, waits for them to end, then stops the daemons by pid.
set -eu

cmd=${1:?usage: slurm-cluster.sh start DIR [NODES] | stop DIR}
dir=${2:?usage: slurm-cluster.sh start DIR [NODES] | stop DIR}
export SLURM_CONF="$dir/slurm.conf"

stop_pid() {
	[ -f "$1" ] || return 0
	pid=$(cat "$1")
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

case $cmd in
start)
	nodes=${3:-2}
	mkdir -p "$dir/state" "$dir/log"
	# nodes + 1 free loopback ports, held until all are known.
	ports=$(python3 -c 'import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]) + 1)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))' "$nodes")
	set -- $ports
	jwt=
	if [ "${SLURM_CLUSTER_JWT:-}" = 1 ]; then
		head -c 32 /dev/urandom >"$dir/jwt.key"
		chmod 0600 "$dir/jwt.key"
		jwt="AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$dir/jwt.key"
	fi
	ctld_port=$1
	shift
	{
		cat <<CONF
ClusterName=slicetest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
JobRequeue=1
MinJobAge=600
SlurmdTimeout=30
MessageTimeout=5
InactiveLimit=0
KillWait=10
CONF
		[ -z "$jwt" ] || echo "$jwt"
		i=1
		for port in "$@"; do
			echo "NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=2 RealMemory=1000 State=UNKNOWN"
			i=$((i + 1))
		done
		echo "PartitionName=debug Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
	} >"$SLURM_CONF"
	slurmctld -i -f "$SLURM_CONF"
	i=1
	while [ "$i" -le "$nodes" ]; do
		mkdir -p "$dir/spool-n$i"
		slurmd -f "$SLURM_CONF" -N "n$i"
		i=$((i + 1))
	done
	for _ in $(seq 1 300); do
		idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
		if [ "$idle" -eq "$nodes" ]; then
			echo "SLURM_CONF=$SLURM_CONF"
			exit 0
		fi
		sleep 0.1
	done
	echo "slurm-cluster.sh: nodes not idle after 30 s:" >&2
	sinfo -N >&2 || true
	tail -n 20 "$dir"/log/* >&2 || true
	exit 1
	;;
stop)
	if [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
		scancel --full --signal=KILL -u "$(id -un)" 2>/dev/null || true
		scancel -u "$(id -un)" 2>/dev/null || true
		# A job's processes belong to its slurmstepd: gone with it.
		for _ in $(seq 1 300); do
			[ -z "$(squeue -h -o %i -t PD,R,CG,S 2>/dev/null)" ] && break
			sleep 0.1
		done
	fi
	for pid_file in "$dir"/slurmd-*.pid "$dir/slurmctld.pid"; do
		stop_pid "$pid_file"
	done
	;;
*)
	echo "slurm-cluster.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
