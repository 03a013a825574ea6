// fidelity.js: drives tests/fakes/gcs_fake.py with Google's own Node.js
// client, @google-cloud/storage, through every call slicectl makes, and
// asserts that the client accepts each answer and gets back exactly what
// was stored. If the fake drifted from GCS's protocol, the client (which
// works against the real service) would fail here.
//
// Usage: node fidelity.js http://127.0.0.1:PORT
// (with NODE_PATH naming the node_modules that holds the client).
// Exits 0 when every check passes, 1 on the first mismatch.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const {Storage, CRC32C} = require('@google-cloud/storage');

const endpoint = process.argv[2];
if (!endpoint) {
	console.error('usage: node fidelity.js http://127.0.0.1:PORT');
	process.exit(2);
}

const storage = new Storage({
	apiEndpoint: endpoint,
	projectId: 'fidelity',
	// A failure must show at once, not after the client's retries.
	retryOptions: {autoRetry: false},
});
const bucket = storage.bucket('fidelity-bucket');

function crc32cOf(buf) {
	const c = new CRC32C();
	c.update(buf);
	return c.toString();
}

function md5Of(buf) {
	return crypto.createHash('md5').update(buf).digest('base64');
}

async function fake(method, path, body) {
	const res = await fetch(endpoint + path, {
		method,
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	assert.equal(res.status, 200, `${method} ${path}`);
	return res.json();
}

async function requests() {
	const log = await fake('GET', '/_fake/requests');
	await fake('DELETE', '/_fake/requests');
	return log;
}

async function expectCode(promise, code, what) {
	try {
		await promise;
	} catch (err) {
		const got = typeof err.code === 'number' || !err.response ?
			err.code : err.response.status;
		assert.equal(got, code, `${what}: ${err.message}`);
		return err;
	}
	assert.fail(`${what}: succeeded, expected error ${code}`);
}

const checks = [];
function check(name, fn) {
	checks.push({name, fn});
}

function checkObject(meta, name, data) {
	assert.equal(meta.name, name);
	assert.equal(meta.bucket, 'fidelity-bucket');
	assert.equal(Number(meta.size), data.length);
	assert.equal(meta.crc32c, crc32cOf(data));
	assert.match(String(meta.generation), /^[1-9][0-9]*$/);
	assert.equal(String(meta.metageneration), '1');
	assert.match(meta.updated, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
}

const big = crypto.randomBytes(3 * 256 * 1024 + 12345);
const small = Buffer.from('a small object, uploaded in one request\n');

check('resumable upload in 256 KiB chunks', async () => {
	await requests();
	const file = bucket.file('dir/resumable.bin');
	await file.save(big, {
		resumable: true,
		chunkSize: 256 * 1024,
		validation: 'crc32c',
		contentType: 'application/octet-stream',
	});
	const [meta] = await file.getMetadata();
	checkObject(meta, 'dir/resumable.bin', big);
	assert.equal(meta.md5Hash, md5Of(big));
	const log = await requests();
	const init = log.filter(r => r.method === 'POST' &&
		r.query.uploadType === 'resumable');
	assert.equal(init.length, 1, 'one session started');
	const puts = log.filter(r => r.method === 'PUT');
	assert.equal(puts.length, 4, 'four chunks');
	assert.deepEqual(puts.map(r => r.status), [308, 308, 308, 200]);
	puts.slice(0, 3).forEach((r, i) => {
		const first = i * 256 * 1024;
		assert.equal(r.headers['content-range'],
			`bytes ${first}-${first + 256 * 1024 - 1}/*`);
	});
	assert.equal(puts[3].headers['content-range'],
		`bytes ${3 * 256 * 1024}-${big.length - 1}/${big.length}`);
});

check('resumable upload after a broken chunk resumes from Range', async () => {
	await requests();
	// The second chunk's connection dies after 300 KiB of its body; the
	// fake keeps one whole 256 KiB unit of it, as GCS may, and the
	// client must ask where to resume and send the rest.
	await fake('POST', '/_fake/faults', [{method: 'PUT',
		path: 'upload_id=', action: 'cut', after_bytes: 300 * 1024,
		times: 1}]);
	const file = bucket.file('dir/resumed.bin');
	const retrying = new Storage({apiEndpoint: endpoint,
		projectId: 'fidelity',
		retryOptions: {autoRetry: true, maxRetries: 5,
			retryDelayMultiplier: 1.1, maxRetryDelay: 1}});
	await retrying.bucket('fidelity-bucket').file('dir/resumed.bin').save(
		big, {resumable: true, chunkSize: 512 * 1024,
			validation: 'crc32c',
			// The client retries only uploads with a precondition.
			preconditionOpts: {ifGenerationMatch: 0}});
	const [meta] = await file.getMetadata();
	checkObject(meta, 'dir/resumed.bin', big);
	const [got] = await file.download({validation: 'crc32c'});
	assert.ok(got.equals(big), 'resumed object has the same bytes');
	const log = await requests();
	assert.ok(log.some(r => r.fault === 'cut'), 'the cut happened');
	assert.ok(log.some(r => r.method === 'PUT' && r.status === 308 &&
		r.headers['content-range'] === 'bytes */*'),
	'the client queried the session after the cut');
});

check('resumable upload in one streamed request', async () => {
	const file = bucket.file('dir/stream.bin');
	await file.save(big, {resumable: true, validation: 'crc32c'});
	const [meta] = await file.getMetadata();
	checkObject(meta, 'dir/stream.bin', big);
});

check('simple (multipart) upload', async () => {
	await requests();
	const file = bucket.file('dir/small.txt');
	await file.save(small, {
		resumable: false,
		validation: 'crc32c',
		contentType: 'text/plain',
		metadata: {metadata: {step: '7'}},
	});
	const [meta] = await file.getMetadata();
	checkObject(meta, 'dir/small.txt', small);
	assert.equal(meta.contentType, 'text/plain');
	assert.equal(meta.md5Hash, md5Of(small));
	assert.deepEqual(meta.metadata, {step: '7'});
	const log = await requests();
	assert.ok(log.some(r => r.method === 'POST' &&
		r.query.uploadType === 'multipart'), 'a multipart upload');
});

check('full download validated with CRC32C', async () => {
	const [got] = await bucket.file('dir/resumable.bin').download(
		{validation: 'crc32c'});
	assert.ok(got.equals(big));
});

check('download with a corrupted byte fails CRC32C validation', async () => {
	await fake('POST', '/_fake/faults', [{method: 'GET',
		path: 'resumable\\.bin\\?alt=media', action: 'corrupt',
		after_bytes: 1000}]);
	const err = await expectCode(bucket.file('dir/resumable.bin').download(
		{validation: 'crc32c'}), 'CONTENT_DOWNLOAD_MISMATCH',
	'corrupted download');
	assert.ok(err);
	const left = await fake('GET', '/_fake/faults');
	assert.equal(left[0].times, 0, 'the corrupt rule fired');
	await fake('DELETE', '/_fake/faults');
});

check('ranged downloads (start/end, to the end)', async () => {
	const file = bucket.file('dir/resumable.bin');
	let [got] = await file.download({start: 10, end: 99});
	assert.ok(got.equals(big.subarray(10, 100)), 'bytes 10-99');
	[got] = await file.download({start: 256 * 1024 - 3,
		end: 256 * 1024 + 2});
	assert.ok(got.equals(big.subarray(256 * 1024 - 3, 256 * 1024 + 3)));
	[got] = await file.download({start: big.length - 5});
	assert.ok(got.equals(big.subarray(big.length - 5)), 'open end');
	const log = await requests();
	assert.ok(log.some(r => r.headers.range === 'bytes=10-99'));
});

check('generation-pinned reads', async () => {
	const [meta] = await bucket.file('dir/small.txt').getMetadata();
	const gen = Number(meta.generation);
	let [got] = await bucket.file('dir/small.txt', {generation: gen})
		.download();
	assert.ok(got.equals(small));
	await bucket.file('dir/small.txt').save(Buffer.from('v2'),
		{resumable: false});
	await expectCode(bucket.file('dir/small.txt', {generation: gen})
		.download(), 404, 'an overwritten generation');
	[got] = await bucket.file('dir/small.txt').download();
	assert.equal(got.toString(), 'v2');
	await bucket.file('dir/small.txt').save(small, {resumable: false});
});

check('list with prefix, delimiter and pagination', async () => {
	const names = [];
	for (let i = 0; i < 7; i++)
		names.push(`list/a/obj-${i}`);
	names.push('list/b/x', 'list/b/y/z', 'list/top');
	for (const n of names)
		await bucket.file(n).save(Buffer.from(n), {resumable: false});

	const [all] = await bucket.getFiles({prefix: 'list/'});
	assert.deepEqual(all.map(f => f.name), [...names].sort());

	const [files, , resp] = await bucket.getFiles({prefix: 'list/',
		delimiter: '/', autoPaginate: false});
	assert.deepEqual(files.map(f => f.name), ['list/top']);
	assert.deepEqual(resp.prefixes, ['list/a/', 'list/b/']);

	// Pages of 3 walk every name once, in order.
	const seen = [];
	let query = {prefix: 'list/', maxResults: 3, autoPaginate: false};
	let pages = 0;
	for (;;) {
		const [page, next, raw] = await bucket.getFiles(query);
		pages++;
		assert.ok(page.length <= 3);
		seen.push(...page.map(f => f.name));
		if (!next) {
			assert.equal(raw.nextPageToken, undefined);
			break;
		}
		assert.ok(raw.nextPageToken);
		query = next;
	}
	assert.equal(pages, Math.ceil(names.length / 3));
	assert.deepEqual(seen, [...names].sort());

	// maxResults counts prefixes and items together, as GCS does.
	const [p1, next1, raw1] = await bucket.getFiles({prefix: 'list/',
		delimiter: '/', maxResults: 2, autoPaginate: false});
	assert.deepEqual(p1.map(f => f.name), []);
	assert.deepEqual(raw1.prefixes, ['list/a/', 'list/b/']);
	assert.ok(next1);
	const [p2, next2, raw2] = await bucket.getFiles(next1);
	assert.deepEqual(p2.map(f => f.name), ['list/top']);
	assert.equal(raw2.prefixes, undefined);
	assert.equal(next2, null);
});

check('compose', async () => {
	const parts = [];
	for (let i = 0; i < 3; i++) {
		const buf = crypto.randomBytes(1000 + i * 777);
		parts.push(buf);
		await bucket.file(`compose/part-${i}`).save(buf,
			{resumable: false});
	}
	const whole = Buffer.concat(parts);
	const [dest] = await bucket.combine(
		parts.map((_, i) => `compose/part-${i}`), 'compose/whole');
	const [meta] = await dest.getMetadata();
	assert.equal(Number(meta.size), whole.length);
	assert.equal(meta.crc32c, crc32cOf(whole));
	assert.equal(meta.componentCount, 3);
	assert.equal(meta.md5Hash, undefined, 'composites have no MD5');
	const [got] = await dest.download({validation: 'crc32c'});
	assert.ok(got.equals(whole));
	const many = Array.from({length: 33}, () => 'compose/part-0');
	await expectCode(bucket.combine(many, 'compose/too-many'), 400,
		'compose of 33 sources');
});

check('preconditions', async () => {
	const file = bucket.file('pre/obj');
	await file.save(Buffer.from('one'), {resumable: false,
		preconditionOpts: {ifGenerationMatch: 0}});
	const [meta] = await file.getMetadata();
	const gen = Number(meta.generation);

	await expectCode(file.save(Buffer.from('two'), {resumable: false,
		preconditionOpts: {ifGenerationMatch: 0}}), 412,
	'simple create-only on an existing object');
	await expectCode(file.save(big, {resumable: true,
		chunkSize: 256 * 1024,
		preconditionOpts: {ifGenerationMatch: 0}}), 412,
	'resumable create-only on an existing object');
	await expectCode(file.save(Buffer.from('two'), {resumable: false,
		preconditionOpts: {ifGenerationMatch: gen + 1}}), 412,
	'write with a wrong generation');

	await file.save(Buffer.from('two'), {resumable: false,
		preconditionOpts: {ifGenerationMatch: gen}});
	const [meta2] = await file.getMetadata();
	const gen2 = Number(meta2.generation);
	assert.ok(gen2 > gen, 'generations increase');

	await expectCode(file.getMetadata({ifMetagenerationMatch: 2}), 412,
		'metadata read with a wrong metageneration');
	await expectCode(file.delete({ifGenerationMatch: gen}), 412,
		'delete with a stale generation');
	await file.delete({ifGenerationMatch: gen2});
	await expectCode(file.getMetadata(), 404, 'deleted object');
});

check('delete', async () => {
	const file = bucket.file('del/obj');
	await file.save(small, {resumable: false});
	const [exists] = await file.exists();
	assert.equal(exists, true);
	await file.delete();
	const [after] = await file.exists();
	assert.equal(after, false);
	await expectCode(file.delete(), 404, 'deleting a missing object');
});

(async () => {
	let failed = 0;
	const only = process.env.FIDELITY_ONLY;
	let ran = 0;
	for (const c of checks) {
		if (only && !c.name.includes(only))
			continue;
		ran++;
		try {
			await c.fn();
			console.log(`ok - ${c.name}`);
		} catch (err) {
			failed++;
			console.log(`not ok - ${c.name}`);
			console.log(err && err.stack ? err.stack : err);
		}
	}
	console.log(`${ran - failed}/${ran} checks passed`);
	process.exit(failed ? 1 : 0);
})();
