import type { Logger } from '../../logger.js';

/** How the service connects to Redis, for the hints. */
export interface ConnectionSettings {
  /** rediss:// */
  readonly tls: boolean;
  /** QUOTA_REDIS_TLS_CERT/KEY set */
  readonly clientCertificate: boolean;
}

/**
 * Why a connection to Redis failed, in words an operator can act on, for the errors
 * that mean a setting is wrong rather than Redis being away (Node's TLS error codes).
 */
export function connectionErrorHint(error: Error, settings: ConnectionSettings): string | undefined {
  const code = (error as NodeJS.ErrnoException).code ?? '';
  if (
    /^(SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_SIGNATURE_FAILURE|CERT_UNTRUSTED)$/.test(
      code,
    )
  ) {
    return "Redis's certificate is not signed by a CA this service trusts: set QUOTA_REDIS_TLS_CA to the PEM bundle of the CA that signed it";
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return "Redis's certificate is not issued for the host or IP this service connects to: its subjectAltName must list that name (DNS:) or address (IP:)";
  }
  if (/^CERT_(HAS_EXPIRED|NOT_YET_VALID)$/.test(code)) return "Redis's certificate is outside its validity period";
  if (
    /^ERR_SSL_(TLSV13_ALERT_CERTIFICATE_REQUIRED|SSLV3_ALERT_BAD_CERTIFICATE|TLSV1_ALERT_UNKNOWN_CA|SSLV3_ALERT_CERTIFICATE_UNKNOWN|SSLV3_ALERT_CERTIFICATE_EXPIRED|SSLV3_ALERT_HANDSHAKE_FAILURE)$/.test(
      code,
    )
  ) {
    return "Redis refused this service's TLS handshake, likely its client certificate (tls-auth-clients): set QUOTA_REDIS_TLS_CERT and QUOTA_REDIS_TLS_KEY to a pair signed by a CA in Redis's tls-ca-cert-file";
  }
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER') return 'the port does not speak TLS: is it the plain port (redis:// rather than rediss://)?';
  // A plain Redis port takes the TLS hello for the start of a command and waits for its end.
  if (settings.tls && code === 'ETIMEDOUT') return "no answer to the TLS handshake: is the port Redis's tls-port, not its plain port?";
  // Under TLS 1.3 Redis judges the client certificate after the handshake and just
  // closes the connection, so a refusal often arrives as a reset, not as an alert.
  if (settings.tls && code === 'ECONNRESET') {
    return settings.clientCertificate
      ? "Redis closed the TLS connection: if it checks client certificates (tls-auth-clients), the one in QUOTA_REDIS_TLS_CERT must be signed by a CA in Redis's tls-ca-cert-file and be valid now"
      : "Redis closed the TLS connection: if it requires client certificates (tls-auth-clients yes, Redis's default), set QUOTA_REDIS_TLS_CERT and QUOTA_REDIS_TLS_KEY";
  }
  return undefined;
}

/**
 * How long after start a connection error is kept rather than logged. A Redis that is
 * up can still fail the first attempts: the event loop is busy loading the service
 * (a connect timeout fires late), or Redis starts a moment after the service (one
 * Deployment rolled out beside another). ioredis retries within this budget; only what
 * persists past it is an error worth a line.
 */
export const STARTUP_BUDGET_MS = 5_000;

/** The timer the start-up budget runs on: the process's (never keeping it alive), or a test's virtual one. */
export interface BudgetTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const processTimers: BudgetTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * A listener for the store's connection errors, for the log. ioredis reconnects by
 * itself every few milliseconds, so each distinct error of a node is logged once.
 * During the start-up budget (`budgetMs` from creation) errors are kept, not logged:
 * when the store answers within it (`connected()`), they go to debug only. Past the
 * budget with no answer, each distinct error kept is logged as an error (the service
 * stays NOT_SERVING because of it), and later ones as they come. Once the store has
 * answered, a failing connection is an outage, and the failure policy's circuit
 * breaker gives the one warning per outage (docs/operations.md); the cause goes to
 * debug. Only host:port, the error code and Node's message are logged: no URL (it may
 * carry a password), no file contents.
 */
export function connectionErrorLog(
  logger: Logger,
  settings: ConnectionSettings,
  options: { budgetMs?: number; timers?: BudgetTimers } = {},
): { onConnectionError(error: Error, node: string): void; connected(): void; close(): void } {
  // Per node, the errors already logged: a refused handshake alternates between two of them.
  const seen = new Map<string, Set<string>>();
  let started = false;
  let pastBudget = false;
  // Kept during the budget: each distinct error's fields, in the order they came.
  const kept: Record<string, unknown>[] = [];
  const timers = options.timers ?? processTimers;
  const budget = timers.setTimeout(() => {
    pastBudget = true;
    for (const fields of kept.splice(0)) logger.error(fields, 'cannot connect to Redis: health stays NOT_SERVING');
  }, options.budgetMs ?? STARTUP_BUDGET_MS);
  return {
    onConnectionError(error, node) {
      const code = (error as NodeJS.ErrnoException).code;
      const key = `${code ?? ''} ${error.message}`;
      const logged = seen.get(node) ?? new Set<string>();
      if (logged.has(key)) return;
      // Bounded: a node cycling through ever new messages cannot grow it without end.
      if (logged.size >= 20) logged.clear();
      logged.add(key);
      seen.set(node, logged);
      const hint = connectionErrorHint(error, settings);
      const fields = { node, ...(code === undefined ? {} : { code }), error: error.message, ...(hint === undefined ? {} : { hint }) };
      if (started) logger.debug(fields, 'Redis connection failed');
      else if (pastBudget) logger.error(fields, 'cannot connect to Redis: health stays NOT_SERVING');
      else if (kept.length < 20) kept.push(fields);
    },
    connected() {
      started = true;
      timers.clearTimeout(budget);
      for (const fields of kept.splice(0)) logger.debug(fields, 'Redis connection failed at start, then connected');
      seen.clear();
    },
    close() {
      timers.clearTimeout(budget);
    },
  };
}
