// kube-fidelity.js SERVER CA_FILE TOKEN YAML_DUMPS...: the real
// Kubernetes JavaScript client (@kubernetes/client-node) against
// kube_fake.py over TLS with a bearer token: it creates the Kueue objects
// and a JobSet, reads, lists and watches it, follows its pods with an
// informer, lists them and reads a pod's log, sees the server's errors
// as ApiExceptions, and deletes it.
// First, js-yaml checks that the fake's YAML reader (kube_yaml.py) gave,
// for every CRD file, what a real YAML parser gives (YAML_DUMPS:
// "file.yaml=file.json" pairs written by the reader). Exits 0 when every check passes.
'use strict';

const fs = require('fs');
const {pathToFileURL} = require('url');
const yaml = require('js-yaml');

const [server, caFile, token, ...dumps] = process.argv.slice(2);
let failures = 0;

function check(ok, what, detail) {
	if (ok) {
		console.log('ok   ' + what);
	} else {
		failures++;
		console.log('FAIL ' + what + (detail ? ': ' + detail : ''));
	}
}

// Sorted keys: JSON texts compare equal exactly when the values do.
function canon(v) {
	return JSON.stringify(v, (k, x) => x && typeof x === 'object' &&
		!Array.isArray(x) ? Object.keys(x).sort().reduce((o, key) => {
			o[key] = x[key];
			return o;
		}, {}) : x);
}

for (const pair of dumps) {
	const [yamlPath, jsonPath] = pair.split('=');
	const want = yaml.loadAll(fs.readFileSync(yamlPath, 'utf8'))
		.filter((d) => d !== null && d !== undefined);
	const got = JSON.parse(fs.readFileSync(jsonPath, 'utf8'));
	check(canon(want) === canon(got), 'YAML reader = js-yaml for ' +
	      yamlPath.split('/').pop());
}

let k8s, custom, core;

// @kubernetes/client-node 1.x is an ES module: Debian 12's Node 18 cannot
// require() it, and import() does not search NODE_PATH, so the path comes
// from require.resolve, which does.
async function connect() {
	k8s = await import(pathToFileURL(
		require.resolve('@kubernetes/client-node')).href);
	const kc = new k8s.KubeConfig();
	kc.loadFromOptions({
		clusters: [{name: 'fake', server: server, caData: Buffer.from(
			fs.readFileSync(caFile)).toString('base64')}],
		users: [{name: 'tester', token: token}],
		contexts: [{name: 'fake', cluster: 'fake', user: 'tester',
			    namespace: 'default'}],
		currentContext: 'fake',
	});
	custom = kc.makeApiClient(k8s.CustomObjectsApi);
	core = kc.makeApiClient(k8s.CoreV1Api);
	return kc;
}
const KUEUE = {group: 'kueue.x-k8s.io', version: 'v1beta2'};
const JS = {group: 'jobset.x-k8s.io', version: 'v1alpha2',
	    namespace: 'default', plural: 'jobsets'};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function jobset(name) {
	return {
		apiVersion: 'jobset.x-k8s.io/v1alpha2', kind: 'JobSet',
		metadata: {name: name, labels: {
			'kueue.x-k8s.io/queue-name': 'lq'}},
		spec: {
			failurePolicy: {maxRestarts: 1},
			replicatedJobs: [{name: 'slice', replicas: 1, template: {
				spec: {parallelism: 2, completions: 2,
				       completionMode: 'Indexed', backoffLimit: 0,
				       template: {spec: {
					       restartPolicy: 'Never',
					       containers: [{
						       name: 'worker', image: 'x',
						       command: ['/bin/sh', '-c',
							'echo hello-$JOB_COMPLETION_INDEX; ' +
							'sleep 1'],
						       resources: {limits: {
							       'google.com/tpu': 4}}}]}}}}}]}};
}

async function status(promise) {
	try {
		await promise;
		return 200;
	} catch (err) {
		return err.code || String(err);
	}
}

async function main() {
	const kc = await connect();
	await custom.createClusterCustomObject({...KUEUE,
		plural: 'resourceflavors', body: {
			apiVersion: 'kueue.x-k8s.io/v1beta2',
			kind: 'ResourceFlavor', metadata: {name: 'tpu'}}});
	await custom.createClusterCustomObject({...KUEUE,
		plural: 'clusterqueues', body: {
			apiVersion: 'kueue.x-k8s.io/v1beta2', kind: 'ClusterQueue',
			metadata: {name: 'cq'}, spec: {namespaceSelector: {},
			resourceGroups: [{coveredResources: ['google.com/tpu'],
				flavors: [{name: 'tpu', resources: [{
					name: 'google.com/tpu',
					nominalQuota: 8}]}]}]}}});
	await custom.createNamespacedCustomObject({...KUEUE,
		namespace: 'default', plural: 'localqueues', body: {
			apiVersion: 'kueue.x-k8s.io/v1beta2', kind: 'LocalQueue',
			metadata: {name: 'lq'}, spec: {clusterQueue: 'cq'}}});
	check(true, 'Kueue objects created');

	// Watch from before the create, so every change is seen.
	const events = [];
	const list = await custom.listNamespacedCustomObject(JS);
	check(list.kind === 'JobSetList' && Array.isArray(list.items),
	      'list JobSets', JSON.stringify(list).slice(0, 200));
	const watch = new k8s.Watch(kc);
	const req = await watch.watch(
		'/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets',
		{resourceVersion: list.metadata.resourceVersion},
		(type, obj) => events.push([type, obj]),
		(err) => { if (err && err.name !== 'AbortError') events.push(['end', err]); });

	// An informer (list, then watch from the list's version, as
	// controllers do) on the pods the JobSet will make.
	const informed = new Set();
	const informer = k8s.makeInformer(kc,
		'/api/v1/namespaces/default/pods',
		() => core.listNamespacedPod({namespace: 'default',
			labelSelector: 'jobset.sigs.k8s.io/jobset-name=fid'}),
		'jobset.sigs.k8s.io/jobset-name=fid');
	informer.on('add', (pod) => informed.add(pod.metadata.name));
	await informer.start();

	const made = await custom.createNamespacedCustomObject({...JS,
		body: jobset('fid'), fieldValidation: 'Strict'});
	check(made.metadata.uid && made.spec.suspend === true,
	      'create: uid, and suspended by Kueue');
	const again = await status(custom.createNamespacedCustomObject({
		...JS, body: jobset('fid')}));
	check(again === 409, 'create again: 409', again);
	const bad = jobset('bad');
	bad.spec.replicatedJobs[0].template.spec.parallelizm = 2;
	const strict = await status(custom.createNamespacedCustomObject({
		...JS, body: bad, fieldValidation: 'Strict'}));
	check(strict === 400, 'unknown field, Strict: 400', strict);
	const invalid = jobset('invalid');
	invalid.spec.replicatedJobs[0].replicas = 'two';
	try {
		await custom.createNamespacedCustomObject({...JS, body: invalid});
		check(false, 'invalid: 422');
	} catch (err) {
		const body = typeof err.body === 'string' ? JSON.parse(err.body) :
			err.body;
		check(err.code === 422 && body.reason === 'Invalid' &&
		      body.details.causes[0].field ===
		      'spec.replicatedJobs[0].replicas', 'invalid: 422 with causes',
		      err.code + ' ' + JSON.stringify(body));
	}

	let done = null;
	for (let i = 0; i < 300 && !done; i++) {
		const js = await custom.getNamespacedCustomObject({...JS,
			name: 'fid'});
		if (js.status && js.status.terminalState)
			done = js;
		else
			await sleep(100);
	}
	check(done && done.status.terminalState === 'Completed',
	      'get: the JobSet completed', done && JSON.stringify(done.status));

	const pods = await core.listNamespacedPod({namespace: 'default',
		labelSelector: 'jobset.sigs.k8s.io/jobset-name=fid'});
	check(pods.items.length === 2 && pods.items.every((p) =>
		p.status.phase === 'Succeeded' && p.spec.nodeName ===
		'gke-tpu-slice-0'), 'list pods by label',
	      JSON.stringify(pods.items.map((p) => p.status.phase)));
	await informer.stop();
	check(pods.items.every((p) => informed.has(p.metadata.name)),
	      'informer: every pod added', JSON.stringify([...informed]));
	const byIndex = pods.items.find((p) => p.metadata.labels[
		'batch.kubernetes.io/job-completion-index'] === '1');
	const log = await core.readNamespacedPodLog({namespace: 'default',
		name: byIndex.metadata.name, container: 'worker'});
	check(log === 'hello-1\n', 'read a pod log', JSON.stringify(log));

	await custom.deleteNamespacedCustomObject({...JS, name: 'fid',
		propagationPolicy: 'Foreground'});
	let gone = false;
	for (let i = 0; i < 100 && !gone; i++) {
		gone = await status(custom.getNamespacedCustomObject({...JS,
			name: 'fid'})) === 404;
		if (!gone)
			await sleep(100);
	}
	check(gone, 'delete: then 404');
	for (let i = 0; i < 50 && !events.some((e) => e[0] === 'DELETED'); i++)
		await sleep(100);
	req.abort();
	const types = events.map((e) => e[0]);
	check(types[0] === 'ADDED' && types.includes('MODIFIED') &&
	      types[types.length - 1] === 'DELETED' && events.every(
		      (e) => e[0] === 'end' || e[1].metadata.name === 'fid'),
	      'watch: ADDED, MODIFIED..., DELETED', types.join(' '));
}

main().then(() => {
	console.log(failures ? failures + ' check(s) failed' : 'all passed');
	process.exit(failures ? 1 : 0);
}, (err) => {
	console.log('FAIL ' + (err && err.stack || err));
	if (err && err.body)
		console.log(typeof err.body === 'string' ? err.body :
			    JSON.stringify(err.body));
	process.exit(1);
});
