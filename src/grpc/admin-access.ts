import { type CallContext, ServerError, type ServerMiddlewareCall, Status } from 'nice-grpc';
import type { AuditLog } from '../admin/audit.js';
import type { AdminContext } from './admin-service.js';
import type { CallerContext } from './auth-middleware.js';

/** The admin service's methods. */
const ADMIN_PREFIX = '/quota.v1.QuotaAdminService/';

/**
 * Who may call the admin API: with caller authentication (QUOTA_AUTH_TOKENS),
 * a caller whose entry in the callers file has the `admin` role; without it
 * (development), a client on a loopback address only. Anyone else gets
 * PERMISSION_DENIED before anything is read or written, and the refusal is
 * an audit line. Runs after the auth middleware, which names the caller.
 */
export function adminAccessMiddleware(options: { authenticated: boolean; audit: AuditLog }) {
  return async function* adminAccess<Request, Response>(call: ServerMiddlewareCall<Request, Response>, context: CallContext) {
    if (!call.method.path.startsWith(ADMIN_PREFIX)) return yield* call.next(call.request, context);
    const method = call.method.path.slice(ADMIN_PREFIX.length);
    const peer = context.peer;
    let name: string;
    if (options.authenticated) {
      const caller = (context as CallContext & CallerContext).caller;
      if (caller === undefined || !caller.roles.has('admin')) {
        const who = caller?.name ?? 'unknown';
        options.audit.refused(who, peer, method, 'no admin role');
        throw new ServerError(Status.PERMISSION_DENIED, `caller "${who}" may not use the admin API: give it roles: [admin] in the callers file`);
      }
      name = caller.name;
    } else {
      if (!isLoopback(peer)) {
        options.audit.refused('unauthenticated', peer, method, 'not from loopback');
        throw new ServerError(
          Status.PERMISSION_DENIED,
          'the admin API needs caller authentication (QUOTA_AUTH_TOKENS, a caller with roles: [admin]); without it only loopback clients may use it',
        );
      }
      name = 'loopback';
    }
    const admin: AdminContext['admin'] = { name, peer };
    return yield* call.next(call.request, { ...context, admin } as CallContext);
  };
}

/**
 * Whether a gRPC peer (`ipv4:127.0.0.1:5000`, `127.0.0.1:5000`,
 * `ipv6:[::1]:5000`, `[::ffff:127.0.0.1]:5000`, `unix:...`) is this machine.
 */
export function isLoopback(peer: string): boolean {
  if (peer.startsWith('unix:')) return true;
  let address = peer.replace(/^ipv[46]:/, '');
  const bracket = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (bracket !== null) address = bracket[1]!;
  else if (/^[\d.]+:\d+$/.test(address)) address = address.slice(0, address.lastIndexOf(':'));
  address = address.replace(/^::ffff:/i, '');
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(address) || address === '::1' || address === '0:0:0:0:0:0:0:1';
}
