import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../logger.js';

export interface ConfigFileWatcherOptions<T> {
  /** The file, possibly a symlink (a Kubernetes ConfigMap or Secret volume: name -> ..data/name). */
  path: string;
  /** The text already loaded at startup, so an event that changes nothing is not a reload. */
  loadedText: string;
  /** Quiet time after the last change before the file is read: one swap is several events. */
  debounceMs?: number;
  logger: Logger;
  /** Turns the text into the value, or throws an error whose message is safe to log (never the file's content). */
  parse(text: string, path: string): T;
  /** A valid new file: swap it in. */
  onReload(value: T): void;
  /** Told of every attempt that changed the file, for metrics. */
  onResult?(success: boolean): void;
  /** The log messages: what the file is and what stays in force when a new text is refused. */
  messages: { unreadable: string; rejected: string; reloaded: string; watchFailed: string };
  /** Extra fields for the "reloaded" log line (e.g. the policy names). */
  describe?(value: T): Record<string, unknown>;
}

/**
 * Hot reload of a configuration file. It watches the file's directory, not the
 * file: Kubernetes updates a ConfigMap or Secret volume by writing a new
 * timestamped directory and renaming the `..data` symlink over the old one,
 * which a watch on the file (an inode) never sees. Any event in the directory
 * schedules one re-read after a quiet period; an unchanged text is ignored, a
 * valid new one is handed over whole, an invalid one is logged with its reason
 * and the old value stays in force.
 */
export function watchConfigFile<T>(options: ConfigFileWatcherOptions<T>): { close(): void } {
  const { path, logger, messages } = options;
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
      logger.warn({ file: path, reason: (error as Error).message }, messages.unreadable);
      return;
    }
    if (text === loadedText) return;
    loadedText = text;
    let value: T;
    try {
      value = options.parse(text, path);
    } catch (error) {
      logger.warn({ file: path, reason: (error as Error).message }, messages.rejected);
      options.onResult?.(false);
      return;
    }
    options.onReload(value);
    options.onResult?.(true);
    logger.info({ file: path, ...options.describe?.(value) }, messages.reloaded);
  };

  const watcher: FSWatcher = watch(dirname(path), { persistent: false }, () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      // One read at a time, in order.
      reading = reading.then(reload);
    }, debounceMs);
  });
  watcher.on('error', (error) => logger.warn({ file: path, reason: error.message }, messages.watchFailed));
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
