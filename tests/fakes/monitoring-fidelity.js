// monitoring-fidelity.js: drives tests/fakes/monitoring_fake.py with
// Google's own Node.js client, @google-cloud/monitoring (its REST
// transport), through the calls slicectl's goodput export makes and its
// tests read back with: projects.timeSeries.create (custom metrics on a
// generic_task, a batch of series, one point each) and
// projects.timeSeries.list (a filter on metric.type and a label). Then the
// API's refusals as the client surfaces them: two points of a series
// sooner than the sampling period, a point older than the newest, more
// than 200 series, two points in one series. If the fake drifted from the
// API's protocol (paths, field names, value encodings, errors), the
// client, which works against monitoring.googleapis.com, would fail here.
//
// Usage: node monitoring-fidelity.js http://127.0.0.1:PORT
// (with NODE_PATH naming the node_modules that holds the client).
// Exits 0 when every check passes, 1 on the first mismatch.
'use strict';

const assert = require('node:assert/strict');
const monitoring = require('@google-cloud/monitoring');
const {OAuth2Client} = require('google-auth-library');

const endpoint = process.argv[2];
if (!endpoint) {
	console.error('usage: node monitoring-fidelity.js http://127.0.0.1:PORT');
	process.exit(2);
}
const url = new URL(endpoint);
const PROJECT = 'projects/p';
const PREFIX = 'custom.googleapis.com/slicectl/';

// A fixed token: the fake checks there is one, the client sends it.
const auth = new OAuth2Client();
auth.setCredentials({access_token: 'tok', expiry_date: Date.now() + 3600e3});

const client = new monitoring.MetricServiceClient({
	apiEndpoint: url.hostname,
	port: Number(url.port),
	protocol: 'http',
	fallback: 'rest',
	authClient: auth,
});

function series(name, value, seconds, labels = {}) {
	return {
		metric: {type: PREFIX + name, labels: {run: 'r1', ...labels}},
		resource: {
			type: 'generic_task',
			labels: {project_id: 'p', location: 'us-east5-a',
				namespace: 'slicectl', job: 'r1', task_id: '0'},
		},
		points: [{
			interval: {endTime: {seconds, nanos: 0}},
			value: typeof value === 'number' ?
				{doubleValue: value} : value,
		}],
	};
}

async function refused(request, pattern, what) {
	await assert.rejects(client.createTimeSeries(request), (err) => {
		assert.match(String(err.message), pattern,
			`${what}: ${err.message}`);
		return true;
	}, what);
}

async function main() {
	const t0 = Math.floor(Date.now() / 1000) - 600;
	const cats = ['restore', 'hang_timeout', 'other'];

	await client.createTimeSeries({name: PROJECT, timeSeries: [
		series('goodput', 0.5, t0),
		series('step_time', 0.25, t0),
		...cats.map((c) => series('badput_time', 1.5, t0, {category: c})),
	]});
	await client.createTimeSeries({name: PROJECT, timeSeries: [
		series('goodput', 0.75, t0 + 10),
	]});

	const [list] = await client.listTimeSeries({
		name: PROJECT,
		filter: `metric.type = "${PREFIX}goodput" AND ` +
			'metric.labels.run = "r1"',
		interval: {startTime: {seconds: t0 - 1}, endTime: {seconds: t0 + 60}},
	});
	assert.equal(list.length, 1, 'one goodput series');
	assert.equal(list[0].resource.type, 'generic_task');
	assert.equal(list[0].metric.labels.run, 'r1');
	assert.deepEqual(list[0].points.map((p) => p.value.doubleValue),
		[0.75, 0.5], 'points newest first');
	assert.equal(Number(list[0].points[0].interval.endTime.seconds), t0 + 10);

	const [bad] = await client.listTimeSeries({
		name: PROJECT,
		filter: `metric.type = "${PREFIX}badput_time" AND ` +
			'metric.labels.category = "restore"',
		interval: {startTime: {seconds: t0 - 1}, endTime: {seconds: t0 + 60}},
	});
	assert.equal(bad.length, 1, 'one restore series');

	await refused({name: PROJECT, timeSeries: [
		series('goodput', 0.8, t0 + 15)]},
	/more frequently than the maximum sampling period/, 'too soon');
	await refused({name: PROJECT, timeSeries: [
		series('goodput', 0.8, t0 + 5)]},
	/Points must be written in order/, 'out of order');
	await refused({name: PROJECT, timeSeries: Array.from({length: 201},
		(_, i) => series('many', i, t0, {n: String(i)}))},
	/A maximum of 200 TimeSeries/, '201 series');
	const two = series('step_time', 0.3, t0 + 20);
	two.points.push({interval: {endTime: {seconds: t0 + 30}},
		value: {doubleValue: 0.3}});
	await refused({name: PROJECT, timeSeries: [two]},
		/Only one point can be written per TimeSeries/, 'two points');

	// A batch with one bad series writes the others (the real API's
	// partial success) and still answers an error.
	await refused({name: PROJECT, timeSeries: [
		series('step_time', 0.5, t0 + 30),
		series('goodput', 0.9, t0 + 12)]},
	/sampling period/, 'partial');
	const [steps] = await client.listTimeSeries({
		name: PROJECT,
		filter: `metric.type = "${PREFIX}step_time"`,
		interval: {startTime: {seconds: t0 - 1}, endTime: {seconds: t0 + 60}},
	});
	assert.deepEqual(steps[0].points.map((p) => p.value.doubleValue),
		[0.5, 0.25], 'the good half of a partial write landed');
	console.log('monitoring-fidelity: every check passed');
}

main().catch((err) => {
	console.error('monitoring-fidelity: FAIL:', err && err.stack || err);
	process.exit(1);
});
