import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../logger.js';

/** What every watcher is told: how to log, what to say, what to do with a valid new value. */
interface WatcherCommon<T> {
  /** Quiet time after the last change before the file is read: one swap is several events. */
  debounceMs?: number;
  logger: Logger;
  /** A valid new file: swap it in. */
  onReload(value: T): void;
  /** Told of every attempt that changed the file, for metrics. */
  onResult?(success: boolean): void;
  /** The log messages: what the file is and what stays in force when a new text is refused. */
  messages: { unreadable: string; rejected: string; reloaded: string; watchFailed: string };
  /** Extra fields for the "reloaded" log line (e.g. the policy names). */
  describe?(value: T): Record<string, unknown>;
}

export interface ConfigFileWatcherOptions<T> extends WatcherCommon<T> {
  /** The file, possibly a symlink (a Kubernetes ConfigMap or Secret volume: name -> ..data/name). */
  path: string;
  /** The text already loaded at startup, so an event that changes nothing is not a reload. */
  loadedText: string;
  /** Turns the text into the value, or throws an error whose message is safe to log (never the file's content). */
  parse(text: string, path: string): T;
}

/** Several files that make one value (a certificate, its key and a CA), read and judged together. */
export interface ConfigFilesWatcherOptions<T> extends WatcherCommon<T> {
  paths: readonly string[];
  /** Their texts already loaded at startup, in the order of `paths`. */
  loadedTexts: readonly string[];
  /** Turns the texts (in the order of `paths`) into the value, or throws an error whose message is safe to log. */
  parse(texts: readonly string[]): T;
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
  const { path, loadedText, parse, ...common } = options;
  return watchConfigFiles({ ...common, paths: [path], loadedTexts: [loadedText], parse: ([text]) => parse(text as string, path) });
}

/**
 * watchConfigFile for several files: an event in any of their directories
 * re-reads all of them, and the value is rebuilt when any text changed. Files
 * of one Secret volume change in one swap; files in different volumes may
 * change a sync apart, so a mismatched pair in between is refused (the old
 * value stays) and the next change is read again.
 */
export function watchConfigFiles<T>(options: ConfigFilesWatcherOptions<T>): { close(): void } {
  const { paths, logger, messages } = options;
  const where = paths.length === 1 ? { file: paths[0] } : { files: paths };
  const debounceMs = options.debounceMs ?? 250;
  let loadedTexts = options.loadedTexts;
  let timer: NodeJS.Timeout | undefined;
  let reading = Promise.resolve();

  const reload = async () => {
    let texts: string[];
    try {
      texts = await Promise.all(paths.map((path) => readFile(path, 'utf8')));
    } catch (error) {
      // Mid-swap or deleted: keep what we have; the next event retries.
      logger.warn({ ...where, reason: (error as Error).message }, messages.unreadable);
      return;
    }
    if (texts.every((text, i) => text === loadedTexts[i])) return;
    loadedTexts = texts;
    let value: T;
    try {
      value = options.parse(texts);
    } catch (error) {
      logger.warn({ ...where, reason: (error as Error).message }, messages.rejected);
      options.onResult?.(false);
      return;
    }
    options.onReload(value);
    options.onResult?.(true);
    logger.info({ ...where, ...options.describe?.(value) }, messages.reloaded);
  };

  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      // One read at a time, in order.
      reading = reading.then(reload);
    }, debounceMs);
  };
  const watchers: FSWatcher[] = [...new Set(paths.map((path) => dirname(path)))].map((dir) => {
    const watcher = watch(dir, { persistent: false }, schedule);
    watcher.on('error', (error) => logger.warn({ ...where, reason: error.message }, messages.watchFailed));
    return watcher;
  });
  return {
    close() {
      clearTimeout(timer);
      for (const watcher of watchers) watcher.close();
    },
  };
}
