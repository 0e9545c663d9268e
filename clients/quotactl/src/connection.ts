import { type CallOptions, ChannelCredentials, type Client, type CompatServiceDefinition, createChannel, createClient, Metadata } from 'nice-grpc';
import { QuotaServiceDefinition, type QuotaServiceClient } from '@quota-service/contract';
import { callFailure } from './call-failure.js';
import { CliError, EXIT } from './exit-codes.js';
import type { Settings } from './settings.js';

/** One channel to the service for the life of a command, and the options every call carries. */
export interface Connection {
  readonly client: QuotaServiceClient;
  /** A client of another service of the contract on the same channel (and so the same TLS and address). */
  service<Definition extends CompatServiceDefinition>(definition: Definition): Client<Definition>;
  /**
   * Runs one call with the token and the --timeout deadline, cancelled by
   * Ctrl-C; a failure becomes a CliError with its exit status (EXIT.interrupted
   * after Ctrl-C).
   */
  call<T>(run: (options: CallOptions) => Promise<T>): Promise<T>;
  /** The token's metadata (empty without one), for calls that keep their own signal (bench, watch). */
  readonly metadata: Metadata;
  close(): void;
}

export function connect(settings: Settings, interrupt: AbortSignal): Connection {
  const credentials =
    settings.tls === undefined ? ChannelCredentials.createInsecure() : ChannelCredentials.createSsl(settings.tls.ca, settings.tls.key, settings.tls.cert);
  const channel = createChannel(settings.address, credentials);
  const metadata = Metadata();
  if (settings.token !== undefined) metadata.set('authorization', `Bearer ${settings.token}`);
  const client = createClient(QuotaServiceDefinition, channel);
  // grpc-js's connectivity state READY (2): a call that timed out had a connection, or never got one.
  const connected = () => channel.getConnectivityState(false) === 2;
  return {
    client,
    service: (definition) => createClient(definition, channel),
    metadata,
    async call(run) {
      // One controller per call, its listener removed after: AbortSignal.any would leave one on `interrupt` per call of a long watch.
      const controller = new AbortController();
      const cancel = () => controller.abort();
      const timer = setTimeout(cancel, settings.timeoutMs);
      interrupt.addEventListener('abort', cancel, { once: true });
      if (interrupt.aborted) cancel();
      try {
        return await run({ metadata, signal: controller.signal });
      } catch (error) {
        if (interrupt.aborted) throw new CliError('interrupted', EXIT.interrupted);
        throw callFailure(error, settings.address, settings.timeoutMs, connected);
      } finally {
        clearTimeout(timer);
        interrupt.removeEventListener('abort', cancel);
      }
    },
    close: () => channel.close(),
  };
}
