import { ClientError, Status, type CallOptions } from 'nice-grpc';
import { MessageQueue } from '../../clients/quota-client/src/message-queue.js';
import type { AllowRequest, AllowStreamRequest, AllowStreamResponse, QuotaServiceClient } from '@quota-service/contract';

/** A raw AllowStream call for tests: send batches, wait for answers by id, see how the stream ended. */
export interface AllowStreamProbe {
  send(id: number, requests: AllowRequest[]): void;
  /** Ends the client's side. */
  end(): void;
  /** The answer to batch `id`; rejects if the stream ends without one. */
  answer(id: number): Promise<AllowStreamResponse>;
  /** Every answer so far, in arrival order. */
  readonly answers: readonly AllowStreamResponse[];
  /** 'OK', or '<STATUS>: <details>' of the status the stream ended with. */
  readonly ended: Promise<string>;
}

export function openAllowStream(client: QuotaServiceClient, options: CallOptions = {}): AllowStreamProbe {
  const outgoing = new MessageQueue<AllowStreamRequest>();
  const answers: AllowStreamResponse[] = [];
  const waiters = new Map<number, (answer: AllowStreamResponse) => void>();
  let over = false;
  const ended = (async () => {
    try {
      for await (const answer of client.allowStream(outgoing, options)) {
        answers.push(answer);
        waiters.get(answer.id)?.(answer);
      }
      return 'OK';
    } catch (error) {
      return error instanceof ClientError ? `${Status[error.code]}: ${error.details}` : `not a gRPC error: ${String(error)}`;
    } finally {
      over = true;
    }
  })();
  return {
    send: (id, requests) => outgoing.push({ id, requests }),
    end: () => outgoing.end(),
    answers,
    ended,
    answer(id) {
      const known = answers.find((a) => a.id === id);
      if (known !== undefined) return Promise.resolve(known);
      return new Promise((resolve, reject) => {
        waiters.set(id, resolve);
        void ended.then((how) => {
          if (over && !answers.some((a) => a.id === id)) reject(new Error(`stream ended (${how}) without answering batch ${id}`));
        });
      });
    },
  };
}
