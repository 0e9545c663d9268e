import { callDeadline } from './call-deadline.js';

/**
 * One unary RPC within `deadlineMs`: rejects with DeadlineExceeded once it has
 * passed (nice-grpc cancels the call through the signal), else as the call does.
 */
export async function callWithin<T>(deadlineMs: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const deadline = callDeadline(deadlineMs, undefined);
  try {
    return await call(deadline.signal);
  } catch (error) {
    // nice-grpc rejects an aborted call with its own AbortError; say which signal it was.
    if (deadline.signal.aborted) throw deadline.signal.reason;
    throw error;
  } finally {
    deadline.release();
  }
}
