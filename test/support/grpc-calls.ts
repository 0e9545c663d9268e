import { ClientError, Metadata, Status } from 'nice-grpc';

/** Call options carrying `token` as the caller's bearer token. */
export const bearer = (token: string) => ({ metadata: Metadata({ authorization: `Bearer ${token}` }) });

/** The status a call ends with, by name: 'OK' when it succeeds. */
export const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'OK',
    (error: unknown) => (error instanceof ClientError ? Status[error.code] : `not a gRPC error: ${String(error)}`),
  );
