import type { ScenarioRow } from './service-scenarios.js';

const ms = (value: number | undefined) => (value === undefined || Number.isNaN(value) ? 'n/a' : `${Math.round(value)}`);

/** Answers by source, in a fixed order, as shares of all the window's calls. */
function sources(row: ScenarioRow): string {
  const total = row.during.calls;
  if (total === 0) return 'no calls';
  return ['store', 'fail_open', 'fail_closed', 'local', 'error']
    .filter((source) => (row.during.sources[source] ?? 0) > 0)
    .map((source) => `${source} ${Math.round((100 * row.during.sources[source]!) / total)}%`)
    .join(', ');
}

/** The markdown table of docs/operations.md, "Network faults". */
export function faultTable(rows: readonly ScenarioRow[]): string {
  const header = [
    '| scenario | mode | p50 / p99 during (ms) | sources during | allowed/s healthy → during | store back after heal (ms) | wrong after heal (over / under) | ghost charges | errors | AllowStream | service |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  const lines = rows.map((row) =>
    [
      row.scenario,
      `\`${row.mode}\``,
      `${ms(row.during.p50Ms)} / ${ms(row.during.p99Ms)}`,
      sources(row),
      `${row.healthy.allowedPerSecond.toFixed(0)} → ${row.during.allowedPerSecond.toFixed(0)}`,
      row.recoveryMs === undefined ? 'never' : ms(row.recoveryMs),
      `${row.audit.overGranted} / ${row.audit.underGranted} of ${row.audit.checked}`,
      String(row.audit.ghostCharges),
      String(row.errors),
      row.streamOk ? 'ok' : 'STUCK',
      row.serviceOk ? 'ok' : 'TROUBLE',
    ].join(' | '),
  );
  return [...header, ...lines.map((line) => `| ${line} |`)].join('\n');
}

/** Footnotes: whatever a row noted (the proxy's own lateness, trouble in the service's log). */
export function faultNotes(rows: readonly ScenarioRow[]): string {
  const seen = new Set<string>();
  const notes: string[] = [];
  for (const row of rows) {
    if (row.notes === '' || seen.has(`${row.scenario}: ${row.notes}`)) continue;
    seen.add(`${row.scenario}: ${row.notes}`);
    notes.push(`- ${row.scenario}: ${row.notes}`);
  }
  return notes.join('\n');
}
