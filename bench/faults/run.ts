// `make soak-faults`: every network fault scenario against a real service
// process, for each failure mode, and the table of docs/operations.md
// ("Network faults"). Needs root for the network namespaces (partitions).
//
//   node --conditions=@quota-service/source --import tsx bench/faults/run.ts [--fault-seconds 5] [--only NAME]
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import { netnsSupport } from '../../test/support/netns.js';
import { runClientPartition } from './client-scenario.js';
import { runServiceScenario, SERVICE_SCENARIOS, type ScenarioRow, type ScenarioTiming } from './service-scenarios.js';
import { faultNotes, faultTable } from './table.js';

const USAGE = `usage: bench/faults/run.ts [--fault-seconds N] [--only TEXT]
  --fault-seconds N  how long each fault lasts (default 5)
  --only TEXT        run only the scenarios whose name contains TEXT`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { 'fault-seconds': { type: 'string', default: '5' }, only: { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const faultSeconds = Number(values['fault-seconds']);
  if (!(faultSeconds > 0 && faultSeconds <= 120)) throw new Error(`--fault-seconds must be from 1 to 120, got ${values['fault-seconds']}`);
  const support = netnsSupport();
  if (!support.ok) {
    process.stderr.write(`soak-faults: the partition scenarios need network namespaces: ${support.reason}\n`);
    return 1;
  }
  const timing: ScenarioTiming = { healthyMs: 2_000, faultMs: faultSeconds * 1000, settleMs: 3_000, recoveryLimitMs: 30_000, intervalMs: 40, users: 3 };
  // Each user's bucket runs dry about halfway through the settle time, counting only the
  // store's own answers: the store must then deny exactly where the reference model does.
  const capacity = Math.round(((1000 / timing.intervalMs) * (timing.healthyMs + timing.settleMs / 2)) / 1000);
  const only = values.only;
  const wanted = (name: string) => only === undefined || name.includes(only);
  const watchdog = setTimeout(() => {
    process.stderr.write('soak-faults: overran its time budget\n');
    process.exit(1);
  }, 20 * 60_000);
  const rows: ScenarioRow[] = [];
  const started = new Date();
  for (const [name, fault] of Object.entries(SERVICE_SCENARIOS)) {
    if (!wanted(name)) continue;
    process.stdout.write(`${name} ...\n`);
    rows.push(...(await runServiceScenario(name, fault, timing, capacity)));
  }
  if (wanted('client partitioned from the service')) {
    process.stdout.write('client partitioned from the service ...\n');
    rows.push(...(await runClientPartition(timing, capacity)));
  }
  clearTimeout(watchdog);

  const machine = `${cpus().length} cpus (${cpus()[0]?.model.trim() ?? 'unknown'}), ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, load average at the end ${loadavg()[0]!.toFixed(1)}`;
  const report = [
    `Measured ${started.toISOString().slice(0, 10)} on ${machine}; faults of ${faultSeconds} s;`,
    `${timing.users} users per policy, one call every ${timing.intervalMs} ms each, token buckets of ${capacity} (no refill to speak of).`,
    '',
    faultTable(rows),
    '',
    faultNotes(rows),
  ].join('\n');
  mkdirSync('.tmp/faults', { recursive: true });
  writeFileSync('.tmp/faults/results.json', JSON.stringify(rows, null, 2));
  writeFileSync('.tmp/faults/table.md', `${report}\n`);
  process.stdout.write(`\n${report}\n\n(also in .tmp/faults/table.md, raw figures in .tmp/faults/results.json)\n`);
  const bad = rows.filter((row) => row.errors > 0 || !row.streamOk || !row.serviceOk || row.audit.overGranted > 0 || row.recoveryMs === undefined);
  if (bad.length > 0)
    process.stderr.write(`soak-faults: ${bad.length} rows show errors, a stuck stream, service trouble, quota granted twice or no recovery\n`);
  return bad.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`soak-faults: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
