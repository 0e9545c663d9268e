/**
 * A listen address the service could not bind, named by the setting that gave it:
 * "QUOTA_GRPC_ADDR: cannot listen on 127.0.0.1:50051: address in use (another
 * process listens there)". One line for the operator; the low-level error stays
 * on `cause` for whoever debugs the library.
 */
export class ListenError extends Error {
  override name = 'ListenError';

  constructor(
    readonly variable: string,
    readonly address: string,
    cause: unknown,
  ) {
    super(`${variable}: cannot listen on ${address}: ${listenReason(cause)}`, { cause });
  }
}

/** What an operator does about each errno a bind can fail with. */
const REASONS: Record<string, string> = {
  EADDRINUSE: 'address in use (another process listens there; choose another port or stop that process)',
  EACCES: 'permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)',
  EPERM: 'permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)',
  EADDRNOTAVAIL: 'no network interface of this machine has that address (use 0.0.0.0, 127.0.0.1 or an address of a local interface)',
  ENOTFOUND: 'cannot resolve the host name',
  EAI_AGAIN: 'cannot resolve the host name (DNS not answering)',
};

/**
 * The reason in words. Node's net errors carry `code`; grpc-js folds its bind
 * errors into one message ("No address added out of total 1 resolved errors:
 * [listen EADDRINUSE: ...]", "Name resolution failed for target dns:..."), so
 * the code is read from the message when there is none.
 */
export function listenReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const own = (error as { code?: unknown } | undefined)?.code;
  const code = typeof own === 'string' ? own : /\b(E[A-Z_]{2,})\b/.exec(message)?.[1];
  if (code !== undefined && REASONS[code] !== undefined) return REASONS[code];
  if (/Name resolution failed/i.test(message)) return REASONS['ENOTFOUND']!;
  return `cannot bind (${code ?? message})`;
}

/** Runs `listen`; a failure becomes a ListenError naming `variable` and `address`. */
export async function listenNamed<T>(variable: string, address: string, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (error) {
    throw error instanceof ListenError ? error : new ListenError(variable, address, error);
  }
}
