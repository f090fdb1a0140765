// Live checks: every operation Inboxt lets API tokens run goes to a Hearth
// (Caddy built from the tree, started by run.sh) as Inboxt's clients send
// it (Apollo Client adds __typename to every selection set), and each
// answer is checked against Inboxt's schema with graphql-js: the operation
// is executed on Inboxt's schema with resolvers that return Hearth's
// answer, so graphql-js's own completion checks non-null fields, enum
// values, list shapes and abstract types; the resolvers also check each
// leaf's JSON type strictly (graphql-js coerces "1" to a Float) and that
// DateTime is ISO-8601 with milliseconds and Z; the result must equal
// Hearth's answer (no field more or less). The session-only operations
// must answer FORBIDDEN to the API token.
import {
	execute, visit, Kind, getNamedType, isScalarType, isEnumType, print,
} from 'graphql';
import { isDeepStrictEqual } from 'node:util';
import { inboxtSchema, operations } from './check.mjs';

const SITE = process.env.SITE;
const TOKEN = process.env.TOKEN;
if (!SITE || !TOKEN) {
	console.error('live.mjs: set SITE and TOKEN (run.sh does)');
	process.exit(2);
}

// Operations whose Inboxt resolver has @ApiTokenAllowed() @ 45f4314
// (entry-manager.resolver.ts, saved-item-manager.resolver.ts,
// active-user.resolver.ts, api-token.resolver.ts apiTokens,
// highlight.resolver.ts createHighlight, inbound-email-address.resolver.ts
// inboundEmailAddresses, label.resolver.ts createLabel/updateLabel/labels,
// saved-item.resolver.ts savedItem/updateSavedItemStatus/setSavedItemLabels,
// saved-query.resolver.ts createSavedQuery/updateSavedQuery/savedQueries).
const apiTokenFields = new Set([
	'entries', 'addArticleFromUrl', 'addArticleFromHtmlSnapshot', 'me', 'apiTokens', 'createHighlight',
	'inboundEmailAddresses', 'createLabel', 'updateLabel', 'labels', 'savedItem', 'updateSavedItemStatus',
	'setSavedItemLabels', 'createSavedQuery', 'updateSavedQuery', 'savedQueries',
]);

// As Apollo Client's addTypenameToDocument: __typename in every selection
// set but the operation's own.
function addTypename(doc) {
	return visit(doc, {
		SelectionSet(node, _key, parent) {
			if (parent && parent.kind === Kind.OPERATION_DEFINITION) return undefined;
			if (node.selections.some((s) => s.kind === Kind.FIELD && s.name.value === '__typename')) return undefined;
			return { ...node, selections: [...node.selections, { kind: Kind.FIELD, name: { kind: Kind.NAME, value: '__typename' } }] };
		},
	});
}

async function send(doc, variables) {
	const res = await fetch(`${SITE}/api/graphql`, {
		method: 'POST',
		headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` },
		body: JSON.stringify({ operationName: doc.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION).name.value, query: print(doc), variables }),
	});
	return { status: res.status, body: await res.json() };
}

const dateTime = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function leafProblem(type, v) {
	if (v === null || v === undefined) return null; // non-null is graphql-js's check
	const named = getNamedType(type);
	if (isEnumType(named)) return null; // graphql-js serializes (refuses unknown values)
	if (!isScalarType(named)) return null;
	switch (named.name) {
	case 'String': case 'ID': return typeof v === 'string' ? null : `${JSON.stringify(v)} is not a string`;
	case 'Float': return typeof v === 'number' ? null : `${JSON.stringify(v)} is not a number`;
	case 'Int': return Number.isInteger(v) ? null : `${JSON.stringify(v)} is not an integer`;
	case 'Boolean': return typeof v === 'boolean' ? null : `${JSON.stringify(v)} is not a boolean`;
	case 'DateTime': return typeof v === 'string' && dateTime.test(v) && !Number.isNaN(Date.parse(v)) ? null : `${JSON.stringify(v)} is not ISO-8601 with milliseconds and Z`;
	default: return `unknown scalar ${named.name}`;
	}
}

// checkAnswer executes doc on Inboxt's schema over Hearth's data.
function checkAnswer(schema, doc, variables, data) {
	const problems = [];
	const result = execute({
		schema, document: doc, variableValues: variables, rootValue: data,
		fieldResolver(source, _args, _ctx, info) {
			const v = source[info.path.key];
			if (v === undefined) problems.push(`${pathOf(info.path)}: missing from Hearth's answer`);
			let leaves = [v];
			while (leaves.some(Array.isArray)) leaves = leaves.flat();
			for (const leaf of leaves) {
				const p = leafProblem(info.returnType, leaf);
				if (p) problems.push(`${pathOf(info.path)}: ${p}`);
			}
			return v;
		},
		typeResolver(value) {
			return value.__typename;
		},
	});
	for (const e of result.errors ?? []) problems.push(`Inboxt's schema cannot carry it: ${e.message} at ${(e.path ?? []).join('.')}`);
	if (!result.errors && !isDeepStrictEqual(JSON.parse(JSON.stringify(result.data)), data)) {
		problems.push(`the answer has fields the operation did not select:\n  hearth: ${JSON.stringify(data)}\n  inboxt: ${JSON.stringify(result.data)}`);
	}
	return problems;
}

function pathOf(p) {
	const parts = [];
	for (; p; p = p.prev) parts.unshift(p.key);
	return parts.join('.');
}

// selfTest feeds checkAnswer answers Inboxt's schema cannot carry: each
// must be caught, or the live checks prove nothing.
export function selfTest() {
	const schema = inboxtSchema();
	const ops = Object.fromEntries(operations().map((op) => [op.file, op]));
	const me = addTypename(ops['web/me.graphql'].doc);
	const entries = addTypename(ops['web/entries.graphql'].doc);
	const user = { __typename: 'User', id: '1', createdAt: '2026-01-02T03:04:05.000Z', username: 'a', emailAddress: 'a@x', isEmailVerified: false, pendingEmailAddress: null, labelsCount: 0, inboundEmailAddressesCount: 0 };
	const item = { __typename: 'SavedItem', id: '1', createdAt: '2026-01-02T03:04:05.000Z', title: 't', originalUrl: null, sourceDomain: null, description: null, leadImage: null, wordCount: 1, author: null, type: 'ARTICLE', status: 'ACTIVE', labels: [] };
	const page = (node) => ({ entries: { __typename: 'EntryConnection', edges: [{ __typename: 'EntryEdge', node, cursor: 'c' }], pageInfo: { __typename: 'PageInfo', hasNextPage: false, endCursor: 'c' } } });
	const vars = { query: { first: 1 } };
	const bad = [
		[me, {}, { me: user }, true],
		[me, {}, { me: { ...user, createdAt: '2026-01-02T03:04:05Z' } }, false],
		[me, {}, { me: { ...user, labelsCount: '0' } }, false],
		[me, {}, { me: { ...user, username: null } }, false],
		[me, {}, { me: { ...user, extra: 1 } }, false],
		[entries, vars, page(item), true],
		[entries, vars, page({ ...item, status: 'archived' }), false],
		[entries, vars, page({ ...item, __typename: 'Article' }), false],
		[entries, vars, page({ ...item, wordCount: undefined }), false],
	];
	let failed = 0;
	for (const [doc, v, data, ok] of bad) {
		const problems = checkAnswer(schema, doc, v, data);
		if ((problems.length === 0) !== ok) {
			failed++;
			console.log(`FAIL self-test: ${JSON.stringify(data).slice(0, 120)}: ${ok ? 'refused' : 'accepted'} (${problems.join('; ')})`);
		}
	}
	console.log(`self-test of the answer check: ${bad.length - failed}/${bad.length}`);
	return failed;
}

export async function liveChecks() {
	const schema = inboxtSchema();
	const ops = Object.fromEntries(operations().map((op) => [op.file, op]));
	const ids = {};
	const html = '<html><head><title>Hearth interop bread</title></head><body><article><h1>Bread</h1>'
		+ '<p>Flour, water, salt and time make bread. '.repeat(20) + '</p></article></body></html>';
	// Each step: file, variables (a function of ids made before), what to keep.
	const steps = [
		['extension/AddArticleFromHtmlSnapshot.graphql', () => ({ data: { url: `${SITE}/ext-article`, html } }), (d) => { ids.a = d.addArticleFromHtmlSnapshot; }],
		['web/addArticleFromHtmlSnapshot.graphql', () => ({ data: { url: `${SITE}/web-article`, html: html.replace('Bread', 'Rolls') } }), (d) => { ids.b = d.addArticleFromHtmlSnapshot; }],
		['web/addArticleFromUrl.graphql', () => ({ data: { url: `${SITE}/article.html` } })],
		['web/createLabel.graphql', () => ({ data: { name: 'Kitchen', color: '#ff0000' } }), (d) => { ids.label = d.createLabel.id; }],
		['web/updateLabel.graphql', () => ({ data: { id: ids.label, name: 'Baking', color: '#00ff00' } })],
		['web/setSavedItemLabels.graphql', () => ({ data: { id: ids.a, labelIds: [ids.label] } })],
		['extension/SetSavedItemLabels.graphql', () => ({ data: { id: ids.b, labelIds: [ids.label] } })],
		['web/createHighlight.graphql', () => ({ data: { savedItemId: ids.a, segments: [{ xpath: '/html/body/article/p[1]', beforeText: '', afterText: ' water', startOffset: 0, endOffset: 5, text: 'Flour' }] } })],
		['web/createSavedQuery.graphql', () => ({ data: { name: 'Baking', query: 'label:Baking' } }), (d) => { ids.query = d.createSavedQuery.id; }],
		['web/updateSavedQuery.graphql', () => ({ data: { id: ids.query, name: 'Bread', query: 'label:Baking sort:date_desc' } })],
		['web/updateSavedItemStatus.graphql', () => ({ data: { ids: [ids.b], status: 'ARCHIVED' } })],
		['web/me.graphql', () => ({})],
		['extension/Me.graphql', () => ({})],
		['web/labels.graphql', () => ({})],
		['extension/Labels.graphql', () => ({})],
		['docs/GetLabels.graphql', () => ({})],
		['web/savedItem.graphql', () => ({ query: { id: ids.a } })],
		['web/inboundEmailAddresses.graphql', () => ({})],
		['web/entries.graphql', () => ({ query: { first: 20 } })],
		['web/entries.graphql', () => ({ query: { first: 20, q: 'type:highlight' } })],
		['web/entries.graphql', () => ({ query: { first: 1, q: 'in:archive' } })],
		['docs/GetEntries.graphql', () => ({ query: { first: 20 } })],
		['web/savedQueries.graphql', () => ({})],
		['web/apiTokens.graphql', () => ({})],
	];
	let failed = 0;
	const ran = new Set();
	for (const [file, vars, keep] of steps) {
		const op = ops[file];
		const doc = addTypename(op.doc);
		const variables = vars();
		const { status, body } = await send(doc, variables);
		ran.add(file);
		const label = `${file} ${JSON.stringify(variables).slice(0, 80)}`;
		const problems = [];
		if (status !== 200) problems.push(`HTTP ${status}`);
		if (body.errors) problems.push(`errors: ${JSON.stringify(body.errors)}`);
		if (!body.data) problems.push('no data');
		else problems.push(...checkAnswer(schema, doc, variables, body.data));
		if (problems.length) {
			failed++;
			console.log(`FAIL ${label}\n  ${problems.join('\n  ')}`);
			continue;
		}
		console.log(`ok   ${label}`);
		if (keep) keep(body.data);
	}
	// Inboxt's error shapes, as its web app reads them (Inboxt/inboxt @
	// 45f4314): a rename onto another label's name is an AppException
	// (label.service.ts update: BAD_REQUEST "Label already exists"); a Zod
	// validation error names the field within data in
	// extensions.response.message[].path (global-exception.filter.ts); free
	// text over 200 characters is an AppException with its sentence as the
	// message (entry-manager.service.ts getMany).
	const created = await send(addTypename(ops['web/createLabel.graphql'].doc), { data: { name: 'Pantry', color: '#0000ff' } });
	const shapes = [
		['rename onto an existing label', ops['web/updateLabel.graphql'], { data: { id: ids.label, name: 'Pantry', color: '#00ff00' } },
			(e) => e?.extensions?.code === 'BAD_REQUEST' && e?.extensions?.status === 400 && e?.message === 'Label already exists'],
		['a colour that is not one', ops['web/createLabel.graphql'], { data: { name: 'Cellar', color: 'blue' } },
			(e) => e?.extensions?.code === 'BAD_USER_INPUT' && e?.message === 'Invalid input provided' &&
				e?.extensions?.response?.message?.[0]?.path === 'color'],
		['free text over 200 characters', ops['web/entries.graphql'], { query: { first: 20, q: 'x'.repeat(201) } },
			(e) => e?.extensions?.code === 'BAD_REQUEST' && e?.extensions?.status === 400 &&
				e?.message?.startsWith('Free text search is limited to 200 characters.') && e?.extensions?.response === undefined],
	];
	if (created.body.errors) {
		failed++;
		console.log(`FAIL error shapes: a second label: ${JSON.stringify(created.body.errors)}`);
	}
	for (const [what, op, variables, ok] of shapes) {
		const { status, body } = await send(addTypename(op.doc), variables);
		if (status !== 200 || !ok(body.errors?.[0])) {
			failed++;
			console.log(`FAIL error shape, ${what}: HTTP ${status} ${JSON.stringify(body.errors)}`);
		} else {
			console.log(`ok   error shape, ${what}`);
		}
	}
	// Every API-token operation ran; every other one is refused.
	for (const op of Object.values(ops)) {
		const def = op.doc.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION);
		const fields = def.selectionSet.selections.map((s) => s.name.value);
		if (fields.every((f) => apiTokenFields.has(f))) {
			if (!ran.has(op.file)) {
				failed++;
				console.log(`FAIL ${op.file}: an API-token operation the runner does not run`);
			}
			continue;
		}
		const variables = Object.fromEntries((def.variableDefinitions ?? []).map((v) => [v.variable.name.value, sample(schema, v.type)]));
		const { status, body } = await send(addTypename(op.doc), variables);
		const e = body.errors?.[0];
		if (status !== 200 || e?.extensions?.code !== 'FORBIDDEN' || e?.extensions?.status !== 403 || e?.message !== 'API tokens are not allowed for this operation') {
			failed++;
			console.log(`FAIL ${op.file}: session-only, want FORBIDDEN for the API token; HTTP ${status} ${JSON.stringify(body)}`);
		} else {
			console.log(`ok   ${op.file}: FORBIDDEN for the API token`);
		}
	}
	console.log(`${failed ? 'FAILED' : 'passed'}: live checks, ${failed} failures`);
	return failed;
}

// sample builds a value of an input type (the refused operations need
// valid variables to get past validation to the guard).
function sample(schema, typeNode) {
	if (typeNode.kind === Kind.NON_NULL_TYPE) return sample(schema, typeNode.type);
	if (typeNode.kind === Kind.LIST_TYPE) return [sample(schema, typeNode.type)];
	const t = schema.getType(typeNode.name.value);
	if (isEnumType(t)) return t.getValues()[0].value;
	if (isScalarType(t)) return { String: 'x', Float: 1, Int: 1, Boolean: true }[t.name] ?? 'x';
	const out = {};
	for (const f of Object.values(t.getFields())) {
		if (f.type.toString().endsWith('!')) out[f.name] = sample(schema, toNode(f.type));
	}
	return out;
}

function toNode(type) {
	if (type.ofType === undefined) return { kind: Kind.NAMED_TYPE, name: { value: type.name } };
	if (type.constructor.name === 'GraphQLNonNull') return { kind: Kind.NON_NULL_TYPE, type: toNode(type.ofType) };
	return { kind: Kind.LIST_TYPE, type: toNode(type.ofType) };
}
