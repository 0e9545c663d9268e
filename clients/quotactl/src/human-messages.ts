import { formatMs } from './output.js';

/**
 * Why a channel could not reach the service, in words, from grpc-js's
 * UNAVAILABLE details ("No connection established. Last error: Error:
 * connect ECONNREFUSED …"); undefined when the details are the service's own
 * (a server shutting down says so itself).
 */
export function unreachableReason(details: string): string | undefined {
  if (/Name resolution failed|ENOTFOUND|EAI_AGAIN/.test(details)) return 'its host name could not be resolved';
  if (!/No connection established|Failed to connect|Connection dropped|connection reset|Last error/i.test(details)) return undefined;
  if (/ECONNREFUSED/.test(details)) return 'connection refused (is the service running and listening on that address?)';
  if (/ETIMEDOUT/.test(details)) return 'the connection timed out';
  if (/EHOSTUNREACH|ENETUNREACH/.test(details)) return 'no route to that host';
  if (/ECONNRESET|Connection dropped/i.test(details)) return 'the connection was reset (a TLS service reached without --tls, or a plaintext one with it?)';
  if (/certificate|SSL|TLS|handshake/i.test(details)) {
    const last = /Last error: (?:Error: )?(.*?)(?:\.? Resolution note:.*)?$/s.exec(details)?.[1]?.trim();
    return `the TLS handshake failed${last === undefined || last === '' ? '' : `: ${last}`}`;
  }
  const last = /Last error: (?:Error: )?(.*?)(?:\.? Resolution note:.*)?$/s.exec(details)?.[1]?.trim();
  return last === undefined || last === '' ? 'no connection' : last;
}

/** The quotactl option a field of the service's INVALID_ARGUMENT stands for (overrides set and allow send them). */
const OPTION_OF_FIELD: Record<string, string> = {
  ttl_ms: '--ttl',
  reason: '--reason',
  cost: '--cost',
  capacity: '--capacity',
  refill_per_second: '--refill-per-second',
  leak_per_second: '--leak-per-second',
  mode: '--mode',
  limit: '--limit',
  lease_ttl_ms: '--lease-ttl-ms',
};

/**
 * The service's "field: message" for a person: the field with the quotactl
 * option that sets it (`--capacity (parameters.token_bucket.capacity): …`),
 * and a duration field's milliseconds (`ttl_ms`) as durations ("366d", "2h").
 */
export function humanFieldError(details: string): string {
  const match = /^([A-Za-z_][\w.[\]]*): /.exec(details);
  if (match === null) return details;
  const field = match[1]!;
  let rest = details.slice(match[0].length);
  const leaf = field.startsWith('parameters.') ? field.split('.').pop()! : field;
  const option = OPTION_OF_FIELD[leaf];
  // --ttl takes units; --lease-ttl-ms takes ms as the option says.
  if (leaf === 'ttl_ms')
    rest = rest.replace('a whole number of milliseconds ', 'a duration ').replace(/\b(\d{4,})(?: ms\b)?/g, (_, n: string) => compactDuration(Number(n)));
  return `${option === undefined ? field : `${option} (${field})`}: ${rest}`;
}

const UNITS: readonly [string, number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
  ['ms', 1],
];

/** A duration as --ttl takes it: "366d", "2h", "1h 30m", "30s", "250ms". */
export function compactDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return '0';
  const parts: string[] = [];
  let rest = Math.round(ms);
  for (const [unit, size] of UNITS) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  return parts.join(' ');
}

/** How long quotactl waited, for a timeout message: "5 s (--timeout 5000)". */
export const waited = (timeoutMs: number): string => `${formatMs(timeoutMs)} (--timeout ${timeoutMs})`;
