#!/bin/sh
# kube-fidelity-kubectl.sh WORKDIR SERVER CA TOKEN: kubectl against a
# running kube_fake.py (kube-fidelity.sh starts it and has created the
# LocalQueue "lq"): create -f (kubectl's default validation, which the
# server does), get (tables), wait (a watch), get pods by label, logs,
# delete of a JobSet. Discovery is cached under WORKDIR, never in
# the real $HOME.
set -u
work=$1
export HOME="$work/home"
mkdir -p "$HOME"
server=$2 ca=$3 token=$4
kc() {
	kubectl --server "$server" --certificate-authority "$ca" \
		--token "$token" --cache-dir "$work/kube-cache" -n default "$@"
}
fail=0
check() { # WHAT WANT GOT
	if [ "$2" = "$3" ]; then
		echo "ok   kubectl: $1"
	else
		echo "FAIL kubectl: $1: want [$2], got [$3]"
		fail=1
	fi
}

cat >"$work/jobset.json" <<'JSON'
{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
 "metadata": {"name": "kfid", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
 "spec": {"replicatedJobs": [{"name": "slice", "replicas": 1, "template": {
  "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
   "backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
    "containers": [{"name": "worker", "image": "x",
     "command": ["/bin/sh", "-c", "echo kubectl-$JOB_COMPLETION_INDEX"],
     "resources": {"limits": {"google.com/tpu": 4}}}]}}}}}]}}
JSON

# kubectl's default validation: the server's (fieldValidation=Strict),
# found through the fake's /openapi/v3.
sed 's/"completions"/"completionz"/; s/"kfid"/"typo"/' "$work/jobset.json" \
	>"$work/typo.json"
out=$(kc create -f "$work/typo.json" 2>&1)
check "create -f refuses an unknown field" 'Error from server (BadRequest): error when creating "'"$work/typo.json"'": JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: unknown field "spec.replicatedJobs[0].template.spec.completionz"' "$out"
out=$(kc create -f "$work/jobset.json" 2>&1)
check "create -f" "jobset.jobset.x-k8s.io/kfid created" "$out"
out=$(kc get jobsets -o name 2>&1)
check "get jobsets" "jobset.jobset.x-k8s.io/kfid" "$out"
out=$(kc wait --for=jsonpath='{.status.terminalState}'=Completed \
	jobset/kfid --timeout=60s 2>&1)
check "wait (watch) for Completed" "jobset.jobset.x-k8s.io/kfid condition met" "$out"
# The server's tables: the CRD's printer columns, kubelet's pod status.
out=$(kc get jobset kfid --no-headers 2>&1 | awk '{print $1, $2, $3, $4}')
check "get (table)" "kfid Completed 0 True" "$out"
out=$(kc get pods -l jobset.sigs.k8s.io/jobset-name=kfid --no-headers \
	2>&1 | awk '{print $2, $3}' | sort -u)
check "get pods (table)" "0/1 Completed" "$out"
out=$(kc get pods -l jobset.sigs.k8s.io/jobset-name=kfid \
	-o jsonpath='{range .items[*]}{.status.phase} {end}' 2>&1)
check "get pods -l" "Succeeded Succeeded " "$out"
pod=$(kc get pods -l batch.kubernetes.io/job-completion-index=1,jobset.sigs.k8s.io/jobset-name=kfid \
	-o jsonpath='{.items[0].metadata.name}' 2>&1)
out=$(kc logs "$pod" 2>&1)
check "logs" "kubectl-1" "$out"
out=$(kc logs -f "$pod" 2>&1)
check "logs -f (a finished container)" "kubectl-1" "$out"
out=$(kc get jobset kfid -o jsonpath='{.metadata.labels.kueue\.x-k8s\.io/queue-name}' 2>&1)
check "get -o jsonpath" "lq" "$out"
out=$(kc delete jobset kfid 2>&1)
check "delete" 'jobset.jobset.x-k8s.io "kfid" deleted' "$out"
out=$(kc get jobset kfid 2>&1)
check "get after delete" 'Error from server (NotFound): jobsets.jobset.x-k8s.io "kfid" not found' "$out"
exit "$fail"
