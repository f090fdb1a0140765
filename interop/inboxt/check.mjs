// Static checks: every Inboxt operation document validates against Hearth's
// schema, and Inboxt's schema has no breaking change against Hearth's.
import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSchema, parse, validate, findBreakingChanges } from 'graphql';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = join(here, '..', '..');

export function hearthSchema() {
	const dir = join(repo, 'handlers', 'graphql', 'schema');
	const sdl = readdirSync(dir).filter((f) => f.endsWith('.graphqls')).sort()
		.map((f) => readFileSync(join(dir, f), 'utf8')).join('\n');
	return buildSchema(sdl);
}

export function inboxtSchema() {
	return buildSchema(readFileSync(join(here, 'third_party', 'inboxt-schema.graphql'), 'utf8'));
}

export function operations() {
	const index = JSON.parse(readFileSync(join(here, 'third_party', 'operations', 'index.json'), 'utf8'));
	return index.map((op) => ({ ...op, doc: parse(readFileSync(join(here, 'third_party', 'operations', op.file), 'utf8')) }));
}

export function staticChecks() {
	const hearth = hearthSchema();
	const inboxt = inboxtSchema();
	const ops = operations();
	let failed = 0;
	for (const op of ops) {
		const inInboxt = validate(inboxt, op.doc);
		if (inInboxt.length) {
			console.log(`FIXTURE ${op.source}/${op.file} does not validate against Inboxt's schema: ${inInboxt.map(String).join('; ')}`);
			failed++;
		}
		const errs = validate(hearth, op.doc);
		if (errs.length) {
			console.log(`FAIL validate ${op.source}/${op.file}: ${errs.map((e) => e.message).join('; ')}`);
			failed++;
		}
	}
	console.log(`${ops.length - failed}/${ops.length} operation documents validate against Hearth's schema`);
	const breaking = findBreakingChanges(inboxt, hearth);
	for (const b of breaking) {
		console.log(`FAIL breaking ${b.type}: ${b.description}`);
	}
	console.log(`findBreakingChanges(inboxt, hearth): ${breaking.length} breaking changes`);
	return failed + breaking.length;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	process.exitCode = staticChecks() ? 1 : 0;
}
