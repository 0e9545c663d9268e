import { type CallContext, ServerError, type ServerMiddlewareCall, Status } from 'nice-grpc';
import type { AdminCaller } from './audit.js';
import type { AdminAuditContext } from './admin-audit.js';
import type { CallerContext } from '../../grpc/auth-middleware.js';

/** What the access middleware hands the admin handlers: the admitted caller. */
export interface AdminContext {
  admin?: AdminCaller;
}

/**
 * Who may call the admin API: with caller authentication (QUOTA_AUTH_TOKENS),
 * a caller whose entry in the callers file has the `admin` role; without it
 * (development), a client on a loopback address only. Anyone else gets
 * PERMISSION_DENIED before anything is read or written. Attached to the
 * admin service alone (server.with), so it runs after the auth middleware,
 * which names the caller, and costs the quota API nothing. The admitted
 * caller goes on the call's audit line (src/api/admin/admin-audit.ts).
 */
export function adminAccessMiddleware(options: { authenticated: boolean }) {
  return async function* adminAccess<Request, Response>(call: ServerMiddlewareCall<Request, Response>, context: CallContext) {
    const admin = admitAdmin(context as CallContext & CallerContext, options.authenticated);
    const audit = (context as CallContext & AdminAuditContext).adminAudit;
    if (audit !== undefined) audit.caller = admin.name;
    return yield* call.next(call.request, { ...context, admin } as CallContext);
  };
}

function admitAdmin(context: CallContext & CallerContext, authenticated: boolean): AdminCaller {
  const peer = context.peer;
  if (authenticated) {
    const caller = context.caller;
    if (caller === undefined || !caller.roles.has('admin')) {
      throw new ServerError(
        Status.PERMISSION_DENIED,
        `caller "${caller?.name ?? 'unknown'}" may not use the admin API: give it roles: [admin] in the callers file`,
      );
    }
    // Its policies bound what it may touch (src/api/admin/admin-scope.ts); none listed means none.
    return caller.policies === undefined ? { name: caller.name, peer } : { name: caller.name, peer, policies: caller.policies };
  }
  if (!isLoopback(peer)) {
    throw new ServerError(
      Status.PERMISSION_DENIED,
      'the admin API needs caller authentication (QUOTA_AUTH_TOKENS, a caller with roles: [admin]); without it only loopback clients may use it',
    );
  }
  return { name: 'loopback', peer };
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
