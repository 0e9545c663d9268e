import type { Socket } from 'node:net';
import { Server as GrpcServer, type ServerCredentials } from '@grpc/grpc-js';

/** Serves one connection accepted elsewhere (its bytes unread) as if this server had accepted it. */
export type InjectConnection = (connection: Socket) => void;

type BindAsync = (port: string, credentials: ServerCredentials, callback: (error: Error | null, port: number) => void) => void;

/** What a server made with given options does instead of binding: hand its injector to the owner of those options. */
const injecting = new WeakMap<object, (inject: InjectConnection) => void>();
let hooked = false;

/**
 * Makes the grpc-js server made with `serverOptions` bind no port when it
 * listens: it serves, with the credentials it listens with (TLS included),
 * only the connections given to the function `ready` receives, which is
 * called as it listens (grpc-js's connection injector). For a process that
 * gets its connections from another (the primary of QUOTA_WORKERS, which
 * accepts them on the one port). nice-grpc makes the grpc-js server when it
 * listens and keeps it to itself, so its bindAsync is wrapped, once per
 * process, and only for servers that registered here; the lean path's
 * stream hook (raw-streams.ts) sees these connections' streams as any other.
 */
export function serveInjected(serverOptions: object, ready: (inject: InjectConnection) => void): void {
  if (!hooked) {
    hooked = true;
    const prototype = GrpcServer.prototype as unknown as { bindAsync: BindAsync };
    const bindAsync = prototype.bindAsync;
    prototype.bindAsync = function (this: GrpcServer, port, credentials, callback) {
      const take = injecting.get((this as unknown as { options: object }).options);
      if (take === undefined) return bindAsync.call(this, port, credentials, callback);
      const injector = this.createConnectionInjector(credentials);
      take((connection) => injector.injectConnection(connection));
      process.nextTick(callback, null, 0);
    } satisfies BindAsync;
  }
  injecting.set(serverOptions, ready);
}
