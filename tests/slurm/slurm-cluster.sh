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
# TaskPlugin=task/none, so no cgroups and no systemd. SLURM_CLUSTER_CONF
# (lines) is appended to slurm.conf. SLURM_CLUSTER_GPUS=G gives every
# node G fake GPUs (gres gpu:G): 22.05's gres/gpu drops a GPU without a
# device File, and wants a character device there, so gres.conf names
# DIR/dev/nvidia0.. as symlinks to /dev/null; steps then get
# SLURM_GPUS_ON_NODE and CUDA_VISIBLE_DEVICES as on real GPUs. `start` returns once every node is
# idle and prints SLURM_CONF=DIR/slurm.conf; when a daemon exits first, or
# after START_S seconds, it prints the logs' last lines, stops what it
# started and fails. `stop` cancels every job, waits for them to end, then
# stops the daemons by pid. Every wait has a deadline, and every client
# call a timeout: a dead slurmctld makes each one wait out its retries.
set -eu

# Bounds for a loaded machine, not paces: a daemon that dies is seen at
# once by its pid. Seconds for the start, and for one client call (sinfo,
# squeue, scancel).
START_S=90
CALL_S=6

cmd=${1:?usage: slurm-cluster.sh start DIR [NODES] | stop DIR}
dir=${2:?usage: slurm-cluster.sh start DIR [NODES] | stop DIR}
export SLURM_CONF="$dir/slurm.conf"

# deadline S: the time S seconds from now, for past().
deadline() {
	echo $(($(date +%s) + $1))
}

past() {
	[ "$(date +%s)" -ge "$1" ]
}

# alive PID_FILE: the daemon that wrote it still runs.
alive() {
	[ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# stop_pid PID_FILE [GRACE_S]: SIGTERM, and SIGKILL after GRACE_S (10).
stop_pid() {
	[ -f "$1" ] || return 0
	pid=$(cat "$1")
	kill -TERM "$pid" 2>/dev/null || return 0
	end=$(deadline "${2:-10}")
	while kill -0 "$pid" 2>/dev/null; do
		if past "$end"; then
			kill -KILL "$pid" 2>/dev/null || true
			return 0
		fi
		sleep 0.1
	done
}

# stop_cluster [GRACE_S]: cancels the jobs, stops the daemons (stop_pid).
stop_cluster() {
	if alive "$dir/slurmctld.pid"; then
		timeout "$CALL_S" scancel --full --signal=KILL -u "$(id -un)" \
			2>/dev/null || true
		timeout "$CALL_S" scancel -u "$(id -un)" 2>/dev/null || true
		# A job's processes belong to its slurmstepd: gone with it.
		end=$(deadline 30)
		while ! past "$end" && alive "$dir/slurmctld.pid"; do
			jobs=$(timeout "$CALL_S" squeue -h -o %i -t PD,R,CG,S \
				2>/dev/null) || jobs=unknown
			[ -z "$jobs" ] && break
			sleep 0.1
		done
	fi
	for pid_file in "$dir"/slurmd-*.pid "$dir/slurmctld.pid"; do
		stop_pid "$pid_file" "${1:-10}"
	done
}

# failed_start WHY [LOG...]: says why with the last lines of the logs
# (by default all), stops the cluster.
failed_start() {
	echo "slurm-cluster.sh: $1; the logs' last lines:" >&2
	shift
	[ $# -gt 0 ] || set -- "$dir"/log/*
	for log in "$@"; do
		[ -f "$log" ] || continue
		echo "==> $log <==" >&2
		tail -n 20 "$log" >&2
		if grep -q 'plugin name for auth/jwt' "$log"; then
			echo "slurm-cluster.sh: auth/jwt is Debian's" \
				"slurm-wlm-jwt-plugin (scripts/deps installs it)" >&2
		fi
	done
	# Nothing to keep: slurmd's clean stop waits out a dead slurmctld.
	stop_cluster 1
	exit 1
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
	# shellcheck disable=SC2086 # $ports is a list of words
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
	gpus=${SLURM_CLUSTER_GPUS:-0}
	gres=
	if [ "$gpus" -gt 0 ]; then
		mkdir -p "$dir/dev"
		k=0
		while [ "$k" -lt "$gpus" ]; do
			ln -sf /dev/null "$dir/dev/nvidia$k"
			k=$((k + 1))
		done
		echo "NodeName=n[1-$nodes] Name=gpu File=$dir/dev/nvidia[0-$((gpus - 1))]" \
			>"$dir/gres.conf"
		gres=" Gres=gpu:$gpus"
	fi
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
		[ -z "$gres" ] || echo "GresTypes=gpu"
		[ -z "${SLURM_CLUSTER_CONF:-}" ] || echo "$SLURM_CLUSTER_CONF"
		i=1
		for port in "$@"; do
			echo "NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=2 RealMemory=1000$gres State=UNKNOWN"
			i=$((i + 1))
		done
		echo "PartitionName=debug Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
	} >"$SLURM_CONF"
	end=$(deadline "$START_S")
	# The daemons detach and write their pid files a moment later.
	slurmctld -i -f "$SLURM_CONF" || failed_start "slurmctld failed"
	i=1
	while [ "$i" -le "$nodes" ]; do
		mkdir -p "$dir/spool-n$i"
		slurmd -f "$SLURM_CONF" -N "n$i" ||
			failed_start "slurmd -N n$i failed"
		i=$((i + 1))
	done
	daemons="slurmctld $(seq -f slurmd-n%g -s ' ' "$nodes")"
	for daemon in $daemons; do
		while [ ! -s "$dir/$daemon.pid" ]; do
			past "$end" && failed_start "no $daemon.pid after" \
				"$START_S s"
			sleep 0.1
		done
	done
	while :; do
		for daemon in $daemons; do
			alive "$dir/$daemon.pid" || failed_start "$daemon (pid \
$(cat "$dir/$daemon.pid")) exited at start" "$dir/log/$daemon.log"
		done
		idle=$(timeout "$CALL_S" sinfo -h -N -t idle -o %N 2>/dev/null |
			sort -u | wc -l)
		if [ "$idle" -eq "$nodes" ]; then
			echo "SLURM_CONF=$SLURM_CONF"
			exit 0
		fi
		past "$end" && failed_start "nodes not idle after $START_S s"
		sleep 0.1
	done
	;;
stop)
	stop_cluster
	;;
*)
	echo "slurm-cluster.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
