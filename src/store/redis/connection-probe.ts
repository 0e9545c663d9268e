import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

/**
 * Why a Redis node cannot be reached, found by opening one connection of our own
 * and sending a PING: the error (a refused port, a certificate that does not verify,
 * a client certificate Redis refuses), or undefined when the node answered anything.
 *
 * Needed for Redis Cluster only: ioredis asks the seeds for CLUSTER SLOTS over
 * throwaway connections whose errors it drops, so a failing start says only
 * "Connection is closed." Never sends credentials: an answer like NOAUTH still
 * proves the connection itself works.
 */
export function probeConnection(host: string, port: number, tls: ConnectionOptions | undefined, timeoutMs: number): Promise<Error | undefined> {
  return new Promise((resolve) => {
    let socket: Socket;
    const done = (error: Error | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(error);
    };
    const timer = setTimeout(() => done(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })), timeoutMs);
    // With TLS 1.3 Redis judges a client certificate only after the handshake, so
    // a refusal shows up on the first read: hence the PING, in both cases.
    const ping = () => socket.write('PING\r\n');
    socket = tls === undefined ? tcpConnect({ host, port }, ping) : tlsConnect({ host, port, ...tls }, ping);
    socket.once('data', () => done(undefined));
    socket.once('error', (error) => done(error));
    socket.once('close', () => done(Object.assign(new Error('Redis closed the connection without an answer'), { code: 'ECONNRESET' })));
  });
}
