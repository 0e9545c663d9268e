import type { Logger } from '../logger.js';
import { parseCallers, type Caller, type CallerRegistry } from './callers.js';
import { watchConfigFile } from './file-watcher.js';

/**
 * The callers the auth middleware asks: one reference, swapped whole on a
 * reload, so a call sees either the old callers or the new ones, never a mix.
 */
export class ReloadableCallerRegistry implements CallerRegistry {
  constructor(private current: CallerRegistry) {}

  byToken(token: string): Caller | undefined {
    return this.current.byToken(token);
  }

  get size(): number {
    return this.current.size;
  }

  get list(): readonly Caller[] {
    return this.current.list;
  }

  replace(next: CallerRegistry): void {
    this.current = next;
  }
}

/**
 * Hot reload of the callers file (QUOTA_AUTH_TOKENS), the way the policy file
 * reloads (src/config/file-watcher.ts): a rotated token or a new caller in a
 * Kubernetes Secret applies without a restart; an invalid file keeps the loaded
 * callers. Log lines name the file and the reason, never its content (tokens).
 */
export function watchCallersFile(options: {
  path: string;
  loadedText: string;
  registry: ReloadableCallerRegistry;
  logger: Logger;
  debounceMs?: number;
  /** Told of each valid new file, once it is in force. */
  onReload?(callers: CallerRegistry): void;
}): {
  close(): void;
} {
  return watchConfigFile({
    path: options.path,
    loadedText: options.loadedText,
    logger: options.logger,
    ...(options.debounceMs === undefined ? {} : { debounceMs: options.debounceMs }),
    parse: parseCallers,
    onReload: (next) => {
      options.registry.replace(next);
      options.onReload?.(next);
    },
    describe: (callers) => ({ callers: callers.size }),
    messages: {
      unreadable: 'callers file unreadable: keeping the loaded callers',
      rejected: 'callers reload rejected: keeping the loaded callers',
      reloaded: 'callers reloaded',
      watchFailed: 'callers file watch failed: hot reload stopped',
    },
  });
}
