// vertex-fidelity.js: drives tests/fakes/vertex_fake.py with Google's own
// Node.js client, @google-cloud/aiplatform (v1 JobServiceClient, its REST
// transport), through the custom job calls slicectl makes: create (two
// worker pools, SPOT scheduling, restartJobOnWorkerRestart, env), get until
// RUNNING, list, cancel until CANCELLED, delete followed through its
// long-running operation as the client does it, and a missing job's
// NOT_FOUND. If the fake drifted from the API's protocol (paths, bodies,
// enums, operations, errors), the client, which works against
// REGION-aiplatform.googleapis.com, would fail here.
//
// Usage: node vertex-fidelity.js http://127.0.0.1:PORT
// (with NODE_PATH naming the node_modules that holds the client).
// Exits 0 when every check passes, 1 on the first mismatch.
'use strict';

const assert = require('node:assert/strict');
const {v1} = require('@google-cloud/aiplatform');
const {OAuth2Client} = require('google-auth-library');

const endpoint = process.argv[2];
if (!endpoint) {
	console.error('usage: node vertex-fidelity.js http://127.0.0.1:PORT');
	process.exit(2);
}
const url = new URL(endpoint);
const PARENT = 'projects/p/locations/us-central1';

// A fixed token: the fake checks there is one, the client sends it.
const auth = new OAuth2Client();
auth.setCredentials({access_token: 'tok', expiry_date: Date.now() + 3600e3});

const client = new v1.JobServiceClient({
	apiEndpoint: url.hostname,
	port: Number(url.port),
	protocol: 'http',
	fallback: 'rest',
	authClient: auth,
});

async function fake(method, path) {
	const res = await fetch(endpoint + path, {method});
	const doc = await res.json();
	assert.equal(res.status, 200, `${method} ${path}: ${JSON.stringify(doc)}`);
	return doc;
}

function pool(replicaCount, command) {
	return {
		machineSpec: {machineType: 'n1-standard-4'},
		replicaCount,
		containerSpec: {
			imageUri: 'us-docker.pkg.dev/p/r/trainer:1',
			command: ['/bin/sh', '-c', command],
			env: [{name: 'SLICE_RUN', value: 'fidelity'}],
		},
	};
}

async function until(name, state) {
	const end = Date.now() + 20000;
	for (;;) {
		const [job] = await client.getCustomJob({name});
		if (job.state === state) {
			return job;
		}
		assert.ok(Date.now() < end, `${name} stayed ${job.state}`);
		await new Promise(r => setTimeout(r, 100));
	}
}

async function main() {
	const [created] = await client.createCustomJob({
		parent: PARENT,
		customJob: {
			displayName: 'fidelity',
			labels: {slicectl: 'yes'},
			jobSpec: {
				workerPoolSpecs: [pool(1, 'sleep 30'),
					pool(2, 'sleep 30')],
				scheduling: {strategy: 'SPOT',
					restartJobOnWorkerRestart: true,
					timeout: {seconds: 3600}},
				baseOutputDirectory: {outputUriPrefix: 'gs://b/out'},
			},
		},
	});
	assert.match(created.name, /^projects\/p\/locations\/us-central1\/customJobs\/\d+$/);
	assert.equal(created.state, 'JOB_STATE_QUEUED');
	assert.equal(created.jobSpec.scheduling.strategy, 'SPOT');
	assert.equal(created.jobSpec.workerPoolSpecs[1].replicaCount, '2');
	assert.equal(Number(created.jobSpec.scheduling.timeout.seconds), 3600);

	// What the fake took is what the client sent, field by field.
	const log = await fake('GET', '/_fake/requests');
	const sent = log.find(e => e.method === 'POST').body;
	// The client sends enums as numbers (SPOT is 4), the fake answers
	// names, which the client reads as well.
	assert.equal(sent.jobSpec.scheduling.strategy, 4);
	assert.equal(sent.jobSpec.scheduling.timeout, '3600s');
	// The client writes the output-only map webAccessUris, empty: the
	// fake drops it as the API does.
	assert.deepEqual(log.map(e => e.ignored).flat(),
		['custom_job.web_access_uris']);

	const running = await until(created.name, 'JOB_STATE_RUNNING');
	assert.ok(running.startTime.seconds > 0);
	const state = await fake('GET', '/_fake/state');
	const replicas = state.jobs.find(j => j.name === created.name).replicas;
	assert.equal(replicas.length, 3);
	assert.ok(replicas.every(r => r.running));

	const [second] = await client.createCustomJob({
		parent: PARENT,
		customJob: {displayName: 'second',
			jobSpec: {workerPoolSpecs: [pool(1, 'exit 0')]}},
	});
	const names = [];
	for await (const job of client.listCustomJobsAsync({parent: PARENT,
		pageSize: 1}, {autoPaginate: false})) {
		names.push(job.name);
	}
	assert.deepEqual(names, [created.name, second.name].sort());
	const [filtered] = await client.listCustomJobs({parent: PARENT,
		filter: 'labels.slicectl="yes"'}, {autoPaginate: true});
	assert.deepEqual(filtered.map(j => j.name), [created.name]);

	await client.cancelCustomJob({name: created.name});
	const cancelled = await until(created.name, 'JOB_STATE_CANCELLED');
	assert.equal(cancelled.error.code, 1);
	await until(second.name, 'JOB_STATE_SUCCEEDED');

	for (const name of [created.name, second.name]) {
		const [op] = await client.deleteCustomJob({name});
		await op.promise();
	}
	// gax's REST transport rejects with the HTTP status or the
	// gRPC code, by version.
	await assert.rejects(client.getCustomJob({name: created.name}),
		err => err.code === 5 || err.code === 404);
	await assert.rejects(client.createCustomJob({parent: PARENT,
		customJob: {jobSpec: {workerPoolSpecs: [pool(1, 'true')]}}}),
	err => [3, 400].includes(err.code) &&
		/display_name; Message: Required/.test(err.message));
	console.log('vertex-fidelity: every check passed');
}

main().catch(err => {
	console.error('vertex-fidelity: FAIL:', err);
	process.exit(1);
});
