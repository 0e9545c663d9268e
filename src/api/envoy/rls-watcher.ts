import { type FSWatcher, statSync, watch } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '../../logger.js';
import { parseRlsConfig, readRlsTexts, RlsConfigError, type RlsTexts } from './rls-config.js';
import type { RlsConfig } from './rls-rules.js';

export interface RlsWatcherOptions {
  /** QUOTA_RLS_CONFIG: a file, or a directory of YAML files (a Kubernetes ConfigMap volume, say). */
  path: string;
  /** The texts loaded at start, so an event that changes nothing is not a reload. */
  loadedTexts: RlsTexts;
  debounceMs?: number;
  logger: Logger;
  onReload(config: RlsConfig): void;
  /** Told of every attempt that changed a file, for metrics. */
  onResult?(success: boolean): void;
}

/**
 * Hot reload of the rate limit configuration, as for the policy file
 * (src/config/file-watcher.ts): a directory is watched (the file's, or the
 * configured one, where files may come and go), any event schedules one
 * re-read of every file after a quiet period, an unchanged set of texts is
 * ignored, a valid new one is swapped in whole, and an invalid one is logged
 * with its reason (file, domain, descriptor) while the loaded configuration
 * stays in force.
 */
export function watchRlsConfig(options: RlsWatcherOptions): { close(): void } {
  const { path, logger } = options;
  const debounceMs = options.debounceMs ?? 250;
  let loaded = options.loadedTexts;
  let timer: NodeJS.Timeout | undefined;
  let reading = Promise.resolve();

  const reload = async () => {
    let texts: RlsTexts;
    try {
      texts = await readRlsTexts(path);
    } catch (error) {
      logger.warn({ path, reason: (error as Error).message }, 'rate limit config unreadable: keeping the loaded config');
      return;
    }
    if (sameTexts(texts, loaded)) return;
    loaded = texts;
    let config: RlsConfig;
    try {
      config = parseRlsConfig(texts);
    } catch (error) {
      if (!(error instanceof RlsConfigError)) throw error;
      // One line per problem: each names its file, domain and descriptor path.
      logger.warn({ path, reason: error.message, problems: error.message.split('\n') }, 'rate limit config reload rejected: keeping the loaded config');
      options.onResult?.(false);
      return;
    }
    options.onReload(config);
    options.onResult?.(true);
    logger.info({ path, domains: [...config.domains.keys()] }, 'rate limit config reloaded');
  };

  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      reading = reading.then(reload).catch((error: unknown) => logger.error({ err: error }, 'rate limit config reload failed'));
    }, debounceMs);
  };
  let isDirectory = false;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch {
    // Gone since the start: watch where it was.
  }
  const watcher: FSWatcher = watch(isDirectory ? path : dirname(path), { persistent: false }, schedule);
  watcher.on('error', (error) => logger.warn({ path, reason: error.message }, 'rate limit config watch failed: hot reload stopped'));
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}

function sameTexts(a: RlsTexts, b: RlsTexts): boolean {
  if (a.size !== b.size) return false;
  for (const [file, text] of a) if (b.get(file) !== text) return false;
  return true;
}
