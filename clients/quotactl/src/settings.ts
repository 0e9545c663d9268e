import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { usageError } from './exit-codes.js';
import type { CliIo } from './io.js';
import { isLoopbackTarget } from './loopback.js';

/** Where quotactl connects when neither --addr nor QUOTACTL_ADDR says: the service's default port on this machine. */
export const DEFAULT_ADDRESS = '127.0.0.1:50051';
/** How long one call may take before quotactl gives up (exit status 3). */
export const DEFAULT_TIMEOUT_MS = 5_000;

/** The global options as commander parsed them (before the environment fills gaps). */
export interface GlobalOptions {
  addr?: string;
  token?: string;
  tokenFile?: string;
  /** Send the token without TLS to an address that is not loopback. */
  insecure?: boolean;
  tls?: boolean;
  ca?: string;
  cert?: string;
  key?: string;
  timeout?: number;
  json?: boolean;
  color?: boolean;
}

export interface TlsFiles {
  /** PEM of the CA that signed the service's certificate; undefined = the system's roots. */
  ca?: Buffer;
  /** PEM of a client certificate and its key, for a service that asks for one (mTLS). */
  cert?: Buffer;
  key?: Buffer;
}

/** How to reach the service and how to print: the options, then QUOTACTL_* variables, then the defaults. */
export interface Settings {
  readonly address: string;
  /** Sent as `authorization: Bearer <token>`; never printed. */
  readonly token: string | undefined;
  /** undefined = plaintext. */
  readonly tls: TlsFiles | undefined;
  readonly timeoutMs: number;
  readonly json: boolean;
  readonly color: boolean;
}

/** The QUOTACTL_* variables each global option falls back to (README.md of this package). */
export const ENV = {
  addr: 'QUOTACTL_ADDR',
  token: 'QUOTACTL_TOKEN',
  tokenFile: 'QUOTACTL_TOKEN_FILE',
  tls: 'QUOTACTL_TLS',
  ca: 'QUOTACTL_CA',
  cert: 'QUOTACTL_CERT',
  key: 'QUOTACTL_KEY',
  timeout: 'QUOTACTL_TIMEOUT_MS',
} as const;

export function resolveSettings(options: GlobalOptions, io: CliIo): Settings {
  const env = (name: string) => {
    const value = io.env[name];
    return value === undefined || value === '' ? undefined : value;
  };
  const address = options.addr ?? env(ENV.addr) ?? DEFAULT_ADDRESS;
  if (address.trim() === '') throw usageError('--addr: must not be empty (host:port)');
  const timeoutMs = options.timeout ?? parseTimeout(env(ENV.timeout), ENV.timeout) ?? DEFAULT_TIMEOUT_MS;
  const { token, source } = resolveToken(options, io, env);
  const tls = tlsFiles(options, io, env);
  // Anyone on the path could read a bearer token sent in plaintext, and replay it.
  if (token !== undefined && tls === undefined && options.insecure !== true && !isLoopbackTarget(address)) {
    throw usageError(
      `${source}: refusing to send the token in plaintext to ${address}, which is not a loopback address: ` +
        'connect with TLS (--tls or --ca), or give --insecure to send it unencrypted anyway',
    );
  }
  return { address, token, tls, timeoutMs, ...resolveOutput(options, io) };
}

/** The command line wins over the environment; a literal token over a token file. `source` names where it came from. */
function resolveToken(options: GlobalOptions, io: CliIo, env: (name: string) => string | undefined): { token: string | undefined; source: string } {
  if (options.token !== undefined && options.tokenFile !== undefined) throw usageError('--token, --token-file: give one of them, not both');
  const [token, source] =
    options.token !== undefined
      ? [options.token, '--token']
      : options.tokenFile !== undefined
        ? [readToken(io, options.tokenFile, '--token-file'), '--token-file']
        : env(ENV.token) !== undefined
          ? [env(ENV.token), ENV.token]
          : env(ENV.tokenFile) !== undefined
            ? [readToken(io, env(ENV.tokenFile)!, ENV.tokenFile), ENV.tokenFile]
            : [undefined, ''];
  // A token with a space or control character cannot travel in the header: say so without echoing it.
  if (token !== undefined && !/^[\x21-\x7e]+$/.test(token)) throw usageError(`${source}: the token must be printable ASCII without spaces (not shown)`);
  return { token, source };
}

function tlsFiles(options: GlobalOptions, io: CliIo, env: (name: string) => string | undefined): TlsFiles | undefined {
  const ca = options.ca ?? env(ENV.ca);
  const cert = options.cert ?? env(ENV.cert);
  const key = options.key ?? env(ENV.key);
  if ((cert === undefined) !== (key === undefined)) {
    throw usageError(
      cert === undefined
        ? '--key: needs --cert (a client certificate and its key go together)'
        : '--cert: needs --key (a client certificate and its key go together)',
    );
  }
  const wanted = options.tls === true || parseFlag(env(ENV.tls), ENV.tls) || ca !== undefined || cert !== undefined;
  if (!wanted) return undefined;
  return {
    ca: ca === undefined ? undefined : readPem(io, ca, '--ca'),
    cert: cert === undefined ? undefined : readPem(io, cert, '--cert'),
    key: key === undefined ? undefined : readPem(io, key, '--key'),
  };
}

function readPem(io: CliIo, path: string, option: string): Buffer {
  try {
    return readFileSync(resolve(io.cwd, path));
  } catch (error) {
    throw usageError(`${option}: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

function readToken(io: CliIo, path: string, option: string): string {
  let text: string;
  try {
    text = readFileSync(resolve(io.cwd, path), 'utf8');
  } catch (error) {
    throw usageError(`${option}: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const token = text.trim();
  if (token === '') throw usageError(`${option}: ${path} is empty`);
  return token;
}

function parseFlag(value: string | undefined, name: string): boolean {
  if (value === undefined) return false;
  if (/^(1|true|yes)$/i.test(value)) return true;
  if (/^(0|false|no)$/i.test(value)) return false;
  throw usageError(`${name}: expected 1/true or 0/false, got ${JSON.stringify(value)}`);
}

function parseTimeout(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  return positiveInteger(value, name);
}

/** A whole number > 0, or a usage error naming `name`. */
function positiveInteger(value: string, name: string, max = 0xffff_ffff): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1 || n > max) {
    throw usageError(`${name}: expected a whole number from 1 to ${max}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** How to print, which is all an offline command (validate) needs. */
export function resolveOutput(options: GlobalOptions, io: CliIo): Pick<Settings, 'json' | 'color'> {
  return { json: options.json === true, color: useColor(options, io) };
}

/**
 * Colour only for a person at a terminal: never when piped, never with
 * a non-empty NO_COLOR, TERM=dumb or --no-color;
 * FORCE_COLOR turns it on anyway (other than FORCE_COLOR=0).
 */
function useColor(options: GlobalOptions, io: CliIo): boolean {
  if (options.color === false) return false;
  const force = io.env.FORCE_COLOR;
  if (force !== undefined && force !== '') return force !== '0' && force !== 'false';
  if (io.env.NO_COLOR !== undefined && io.env.NO_COLOR !== '') return false;
  if (io.env.TERM === 'dumb') return false;
  return io.stdout.isTTY === true;
}
