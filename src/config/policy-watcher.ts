import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../logger.js';
import { parsePolicies, type PolicySet } from './policies.js';

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

/**
 * Hot reload of the policy file. It watches the file's directory, not the
 * file: Kubernetes updates a ConfigMap volume by writing a new timestamped
 * directory and renaming the `..data` symlink over the old one, which a watch
 * on the file (an inode) never sees. Any event in the directory schedules one
 * re-read after a quiet period; an unchanged text is ignored, a valid new one
 * is handed over whole, an invalid one is logged with its reason and the old
 * policies stay in force.
 */
export function watchPolicyFile(options: PolicyWatcherOptions): { close(): void } {
  const { path, logger } = options;
  const debounceMs = options.debounceMs ?? 250;
  let loadedText = options.loadedText;
  let timer: NodeJS.Timeout | undefined;
  let reading = Promise.resolve();

  const reload = async () => {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      // Mid-swap or deleted: keep what we have; the next event retries.
      logger.warn({ file: path, reason: (error as Error).message }, 'policy file unreadable: keeping the loaded policies');
      return;
    }
    if (text === loadedText) return;
    loadedText = text;
    let policies: PolicySet;
    try {
      policies = parsePolicies(text, path);
    } catch (error) {
      logger.warn({ file: path, reason: (error as Error).message }, 'policy reload rejected: keeping the loaded policies');
      options.onResult?.(false);
      return;
    }
    options.onReload(policies);
    options.onResult?.(true);
    logger.info({ file: path, policies: [...policies.keys()] }, 'policies reloaded');
  };

  const watcher: FSWatcher = watch(dirname(path), { persistent: false }, () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      // One read at a time, in order.
      reading = reading.then(reload);
    }, debounceMs);
  });
  watcher.on('error', (error) => logger.warn({ file: path, reason: error.message }, 'policy file watch failed: hot reload stopped'));
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
