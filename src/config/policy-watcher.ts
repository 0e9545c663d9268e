import type { Logger } from '../logger.js';
import { watchConfigFile } from './file-watcher.js';
import { parsePolicies, type PolicySet } from '@quota-service/core';

export interface PolicyWatcherOptions {
  /** The policy file, possibly a symlink (a Kubernetes ConfigMap volume: policies.yaml -> ..data/policies.yaml). */
  path: string;
  /** The text already loaded at startup, so an event that changes nothing is not a reload. */
  loadedText: string;
  /** Quiet time after the last change before the file is read: one swap is several events. */
  debounceMs?: number;
  logger: Logger;
  /** A valid new file: swap it in. */
  onReload(policies: PolicySet): void;
  /** Told of every attempt that changed the file, for metrics. */
  onResult?(success: boolean): void;
}

/** Hot reload of the policy file (src/config/file-watcher.ts): an invalid file keeps the loaded policies. */
export function watchPolicyFile(options: PolicyWatcherOptions): { close(): void } {
  return watchConfigFile({
    ...options,
    parse: parsePolicies,
    describe: (policies) => ({ policies: [...policies.keys()] }),
    messages: {
      unreadable: 'policy file unreadable: keeping the loaded policies',
      rejected: 'policy reload rejected: keeping the loaded policies',
      reloaded: 'policies reloaded',
      watchFailed: 'policy file watch failed: hot reload stopped',
    },
  });
}
