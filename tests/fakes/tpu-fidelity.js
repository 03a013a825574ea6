// tpu-fidelity.js: drives tests/fakes/tpu_fake.py with Google's own Node.js
// client, @google-cloud/tpu (v2alpha1, its REST transport), through the
// queued-resource calls slicectl makes: create (on demand, spot and
// flex-start), get, list, reset, performMaintenanceQueuedResource and
// delete, each create, reset, maintenance and delete followed through its
// long-running operation as the client does it. If the fake drifted from
// the API's protocol (paths, bodies, operations, errors), the client, which
// works against tpu.googleapis.com, would fail here.
//
// The client's protos predate flex-start: its QueuedResource has neither
// provisioningModel nor runDuration. The flex-start check adds those two
// fields to the client's own message type as the newer API defines them
// (api/tpu.v2alpha1.gcloud-528.json: runDuration a Duration and a
// Timestamp; provisioningModel sent by name, which Google's JSON parser
// takes whatever enum encoding was asked for), so the client encodes and
// decodes them like any other field.
//
// Usage: node tpu-fidelity.js http://127.0.0.1:PORT
// (with NODE_PATH naming the node_modules that holds the client).
// Exits 0 when every check passes, 1 on the first mismatch.
'use strict';

const assert = require('node:assert/strict');
const {v2alpha1} = require('@google-cloud/tpu');
const {OAuth2Client} = require('google-auth-library');
const protobuf = require('protobufjs');

const endpoint = process.argv[2];
if (!endpoint) {
	console.error('usage: node tpu-fidelity.js http://127.0.0.1:PORT');
	process.exit(2);
}
const url = new URL(endpoint);
const PARENT = 'projects/p/locations/us-east5-a';

// A fixed token: the fake checks there is one, the client sends it.
const auth = new OAuth2Client();
auth.setCredentials({access_token: 'tok', expiry_date: Date.now() + 3600e3});

const client = new v2alpha1.TpuClient({
	apiEndpoint: url.hostname,
	port: Number(url.port),
	protocol: 'http',
	fallback: 'rest',
	authClient: auth,
});

async function fake(method, path, body) {
	const res = await fetch(endpoint + path, {
		method,
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	const doc = await res.json();
	assert.equal(res.status, 200, `${method} ${path}: ${JSON.stringify(doc)}`);
	return doc;
}

function addFlexStartFields() {
	const root = client._protos;
	const qr = root.lookupType('google.cloud.tpu.v2alpha1.QueuedResource');
	if (!qr.fields.runDuration) {
		const run = new protobuf.Type('RunDuration')
			.add(new protobuf.Field('maxRunDuration', 1,
				'google.protobuf.Duration'))
			.add(new protobuf.Field('terminationTime', 2,
				'google.protobuf.Timestamp'));
		qr.parent.add(run);
		// Numbers past the client's own fields; JSON carries names.
		qr.add(new protobuf.Field('provisioningModel', 1000, 'string'));
		qr.add(new protobuf.Field('runDuration', 1001, 'RunDuration'));
		root.resolveAll();
	}
}

function node(acceleratorType) {
	return {
		acceleratorType,
		runtimeVersion: 'v2-alpha-tpuv6e',
		networkConfig: {network: 'default', enableExternalIps: true},
	};
}

async function create(id, extra, spec) {
	const [op] = await client.createQueuedResource({
		parent: PARENT,
		queuedResourceId: id,
		queuedResource: Object.assign({
			tpu: {nodeSpec: [Object.assign({parent: PARENT}, spec)]},
		}, extra),
	});
	const [qr] = await op.promise();
	assert.equal(qr.name, `${PARENT}/queuedResources/${id}`);
	return qr;
}

async function waitActive(name) {
	for (let i = 0; i < 200; i++) {
		const [qr] = await client.getQueuedResource({name});
		if (qr.state.state === 'ACTIVE')
			return qr;
		assert.notEqual(qr.state.state, 'FAILED', JSON.stringify(qr));
		await new Promise((r) => setTimeout(r, 50));
	}
	assert.fail(`${name} never ACTIVE`);
}

async function requests() {
	const log = await fake('GET', '/_fake/requests');
	await fake('DELETE', '/_fake/requests');
	return log;
}

async function main() {
	await fake('POST', '/_fake/config', {delay: 0.05});
	// Before the first call: protobufjs builds a type's converters once.
	addFlexStartFields();

	// On demand, two slices.
	await create('qr-std', {}, {
		multiNodeParams: {nodeCount: 2, nodeIdPrefix: 'std'},
		node: node('v6e-16'),
	});
	let qr = await waitActive(`${PARENT}/queuedResources/qr-std`);
	assert.deepEqual(qr.tpu.nodeSpec[0].multiNodeParams.nodeCount, 2);
	assert.equal(qr.state.stateInitiator, 'USER');
	const [n] = await client.getNode({name: `${PARENT}/nodes/std-1`});
	assert.equal(n.state, 'READY');
	assert.equal(n.networkEndpoints.length, 4);

	// Spot, as the client writes it: an empty Spot message.
	await create('qr-spot', {spot: {}}, {nodeId: 'spot',
		node: node('v6e-8')});
	qr = await waitActive(`${PARENT}/queuedResources/qr-spot`);
	assert.ok(qr.spot, 'spot tier lost');

	// Flex-start, gcloud 528's body.
	await requests();
	await create('qr-flex', {
		provisioningModel: 'FLEX_START',
		runDuration: {maxRunDuration: {seconds: 259200}},
		queueingPolicy: {validUntilDuration: {seconds: 21600}},
	}, {
		multiNodeParams: {nodeCount: 2, nodeIdPrefix: 'ms'},
		node: node('v6e-16'),
	});
	let log = await requests();
	const post = log.find((r) => r.method === 'POST' &&
		r.path.endsWith('/queuedResources'));
	assert.equal(post.status, 200);
	assert.equal(post.body.provisioningModel, 'FLEX_START');
	assert.deepEqual(post.body.runDuration, {maxRunDuration: '259200s'});
	assert.deepEqual(post.ignored, []);
	qr = await waitActive(`${PARENT}/queuedResources/qr-flex`);
	assert.equal(qr.provisioningModel, 'FLEX_START');
	assert.equal(Number(qr.runDuration.maxRunDuration.seconds), 259200);
	const end = Number(qr.runDuration.terminationTime.seconds);
	assert.ok(Math.abs(end - (Date.now() / 1000 + 259200)) < 60,
		`terminationTime ${end}`);

	// List, every page.
	const names = [];
	for await (const q of client.listQueuedResourcesAsync({parent: PARENT,
		pageSize: 2}))
		names.push(q.name.split('/').pop());
	assert.deepEqual(names.sort(), ['qr-flex', 'qr-spot', 'qr-std']);

	// Reset, followed to its end.
	{
		const [op] = await client.resetQueuedResource({
			name: `${PARENT}/queuedResources/qr-std`});
		const [done] = await op.promise();
		assert.equal(done.name, `${PARENT}/queuedResources/qr-std`);
	}

	// Announced maintenance, then performed on one node.
	await fake('POST', '/_fake/node', {name: 'ms-1', zone: 'us-east5-a',
		upcomingMaintenance: {type: 'SCHEDULED', canReschedule: true,
			maintenanceStatus: 'PENDING',
			windowStartTime: '2030-01-01T00:00:00Z'}});
	const [m] = await client.getNode({name: `${PARENT}/nodes/ms-1`});
	assert.equal(m.upcomingMaintenance.type, 'SCHEDULED');
	assert.equal(m.upcomingMaintenance.maintenanceStatus, 'PENDING');
	assert.equal(m.upcomingMaintenance.canReschedule, true);
	{
		const [op] = await client.performMaintenanceQueuedResource({
			name: `${PARENT}/queuedResources/qr-flex`,
			nodeNames: ['ms-1']});
		await op.promise();
		const [after] = await client.getNode({name: `${PARENT}/nodes/ms-1`});
		assert.equal(after.upcomingMaintenance, null);
	}

	// The end of the flex-start run: nodes gone, SUSPENDED.
	await fake('POST', '/_fake/end_run', {name: 'qr-flex'});
	for (let i = 0; ; i++) {
		const [q] = await client.getQueuedResource({
			name: `${PARENT}/queuedResources/qr-flex`});
		if (q.state.state === 'SUSPENDED') {
			assert.equal(q.state.stateInitiator, 'SERVICE');
			break;
		}
		assert.ok(i < 200, `still ${q.state.state}`);
		await new Promise((r) => setTimeout(r, 50));
	}
	await assert.rejects(client.getNode({name: `${PARENT}/nodes/ms-0`}),
		(err) => err.code === 5 || err.code === 404);

	// A refused delete is an error the client understands; force works.
	await assert.rejects(client.deleteQueuedResource({
		name: `${PARENT}/queuedResources/qr-std`}),
		(err) => /nodes exist/.test(err.message));
	for (const id of ['qr-std', 'qr-spot', 'qr-flex']) {
		const [op] = await client.deleteQueuedResource({
			name: `${PARENT}/queuedResources/${id}`, force: true});
		await op.promise();
	}
	const [left] = await client.listQueuedResources({parent: PARENT});
	assert.deepEqual(left, []);

	// Every request the client made was routed and accepted as sent.
	log = await requests();
	for (const r of log) {
		assert.ok(r.status < 500, JSON.stringify(r));
		assert.deepEqual(r.ignored, [], JSON.stringify(r));
	}
	await client.close();
	console.log('tpu-fidelity: every check passed');
}

main().catch((err) => {
	console.error('tpu-fidelity: FAIL:', err);
	process.exit(1);
});
