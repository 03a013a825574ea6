// auth-fidelity.js: checks tests/fakes/sts_fake.py with Google's own
// Node.js client, google-auth-library, and slicectl against it. For each
// kind of keyless credentials file (impersonated_service_account with a
// user as the source; external_account with a file source, with a URL
// source in JSON format for a workforce pool, and with impersonation),
// both clients get a token from the same file through the fake, and the
// requests they sent are compared field by field. If the fake drifted
// from what Google's services take, Google's client (which works against
// them) would fail here; if slicectl asked differently from Google's
// client, the comparison would.
//
// Usage: node auth-fidelity.js http://127.0.0.1:PORT PROBE WORKDIR
// (NODE_PATH naming the node_modules that holds the client; PROBE is
// auth-fidelity.c built, which prints the token slicectl gets).
// Exits 0 when every check passes, 1 on the first mismatch.
'use strict';

const assert = require('node:assert/strict');
const {execFileSync} = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const {GoogleAuth} = require('google-auth-library');

const [base, probe, work] = process.argv.slice(2);
if (!base || !probe || !work) {
	console.error('usage: node auth-fidelity.js BASE PROBE WORKDIR');
	process.exit(2);
}

const CLOUD = 'https://www.googleapis.com/auth/cloud-platform';
const SA = 'target@proj.iam.gserviceaccount.com';
const WORKLOAD = '//iam.googleapis.com/projects/123/locations/global/' +
	'workloadIdentityPools/pool/providers/prov';
const WORKFORCE = '//iam.googleapis.com/locations/global/workforcePools/' +
	'staff/providers/idp';
const JWT = 'urn:ietf:params:oauth:token-type:jwt';
const SUBJECT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ3b3JrZXIifQ.c2ln';

async function fake(method, p, body) {
	const res = await fetch(base + p, {
		method,
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	assert.equal(res.status, 200, `${method} ${p}`);
	return res.json();
}

async function requests() {
	const log = await fake('GET', '/_fake/requests');
	await fake('DELETE', '/_fake/requests');
	return log;
}

function write(name, doc) {
	const file = path.join(work, name + '.json');
	fs.writeFileSync(file, JSON.stringify(doc, null, 2));
	return file;
}

const subjectFile = path.join(work, 'subject.jwt');
fs.writeFileSync(subjectFile, SUBJECT);

const cases = [
	{
		name: 'impersonated_service_account (authorized_user source)',
		// As `gcloud auth application-default login
		// --impersonate-service-account` writes it: Google's hosts.
		doc: {
			type: 'impersonated_service_account',
			service_account_impersonation_url:
				'https://iamcredentials.googleapis.com/v1/' +
				`projects/-/serviceAccounts/${SA}:generateAccessToken`,
			delegates: ['projects/-/serviceAccounts/hop@proj.iam.' +
				    'gserviceaccount.com'],
			source_credentials: {
				type: 'authorized_user', client_id: 'cid',
				client_secret: 'csecret',
				refresh_token: '1//refresh',
			},
		},
		config: {},
		// Neither client goes to Google's hosts in a test: slicectl
		// through its overrides, Google's client through its own
		// endpoint options (it takes the hosts from its defaults,
		// not from the file).
		env: {SLICECTL_TOKEN_URI: base + '/token',
		      SLICECTL_IAM_CREDENTIALS_ENDPOINT: base},
		patch(client) {
			client.endpoint = base;
			client.sourceClient.endpoints.oauth2TokenUrl =
				base + '/token';
		},
		kind: 'impersonated',
	},
	{
		name: 'external_account (file source, workload pool)',
		doc: {
			type: 'external_account', audience: WORKLOAD,
			subject_token_type: JWT,
			token_url: base + '/v1/token',
			credential_source: {file: subjectFile},
		},
		config: {audience: WORKLOAD, subject_token: SUBJECT},
		kind: 'sts',
	},
	{
		name: 'external_account (url source, JSON, workforce pool)',
		doc: {
			type: 'external_account', audience: WORKFORCE,
			subject_token_type:
				'urn:ietf:params:oauth:token-type:id_token',
			token_url: base + '/v1/token',
			workforce_pool_user_project: 'billing-proj',
			credential_source: {
				url: base + '/subject/json',
				headers: {'X-Identity': 'yes'},
				format: {type: 'json',
					 subject_token_field_name: 'id_token'},
			},
		},
		config: {audience: WORKFORCE, subject_token: SUBJECT,
			 subject_headers: {'X-Identity': 'yes'}},
		kind: 'sts',
	},
	{
		name: 'external_account (file source, impersonation)',
		doc: {
			type: 'external_account', audience: WORKLOAD,
			subject_token_type: JWT,
			token_url: base + '/v1/token',
			service_account_impersonation_url: base +
				`/v1/projects/-/serviceAccounts/${SA}:` +
				'generateAccessToken',
			credential_source: {file: subjectFile,
					    format: {type: 'text'}},
		},
		config: {audience: WORKLOAD, subject_token: SUBJECT},
		kind: 'impersonated',
	},
];

async function tokenKind(token) {
	const tokens = await fake('GET', '/_fake/tokens');
	const t = tokens.find(x => x.token === token);
	return t ? t.kind : undefined;
}

async function viaGoogle(c, file) {
	const auth = new GoogleAuth({keyFilename: file, scopes: [CLOUD]});
	const client = await auth.getClient();
	if (c.patch)
		c.patch(client);
	const {token} = await client.getAccessToken();
	return token;
}

function viaSlicectl(c, file) {
	const env = {...process.env, ...(c.env || {}),
		     GOOGLE_APPLICATION_CREDENTIALS: file, HOME: work};
	delete env.SLICECTL_ACCESS_TOKEN;
	return execFileSync(probe, {env, encoding: 'utf8'}).trim();
}

// What must agree between the two clients' requests: the path, the form
// fields of a token request (all of them, values included), and
// generateAccessToken's scope, lifetime and delegates (Google's client
// leaves out an empty list, which the service takes as none).
function essence(r) {
	const out = {method: r.method, path: r.path};
	if (r.form)
		out.form = r.form;
	if (r.json)
		out.json = {scope: r.json.scope, lifetime: r.json.lifetime,
			    delegates: r.json.delegates || []};
	if (r.headers.authorization)
		out.bearer = r.headers.authorization.replace(
			/^(Bearer ya29\.[a-z]+-).*/, '$1');
	out.status = r.status;
	return out;
}

async function main() {
	let failed = 0;
	for (const c of cases) {
		try {
			await fake('POST', '/_fake/reset');
			await fake('POST', '/_fake/config', c.config);
			const file = write(c.name.replace(/\W+/g, '-'), c.doc);
			const gTok = await viaGoogle(c, file);
			assert.equal(await tokenKind(gTok), c.kind,
				     'google-auth-library token');
			const gLog = (await requests()).map(essence);
			const sTok = viaSlicectl(c, file);
			assert.equal(await tokenKind(sTok), c.kind,
				     'slicectl token');
			const sLog = (await requests()).map(essence);
			for (const r of gLog)
				assert.equal(r.status, 200, JSON.stringify(r));
			assert.deepEqual(sLog, gLog,
					 'slicectl asked differently');
			console.log(`ok - ${c.name} (${gLog.length} requests)`);
		} catch (err) {
			failed++;
			console.log(`not ok - ${c.name}: ${err.message}`);
		}
	}
	if (failed)
		process.exit(1);
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
