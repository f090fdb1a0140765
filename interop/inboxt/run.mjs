// Entry point of run.sh: the static checks, then (with SITE and TOKEN) the
// live ones. Exits non-zero on any failure.
import { staticChecks } from './check.mjs';

let failed = staticChecks();
if (process.env.SITE) {
	const { liveChecks, selfTest } = await import('./live.mjs');
	failed += selfTest();
	failed += await liveChecks();
}
process.exitCode = failed ? 1 : 0;
