import type { Command } from 'commander';
import type { Connection } from './connection.js';
import type { ExitCode } from './exit-codes.js';
import type { CliIo } from './io.js';
import { Printer } from './output.js';
import { type GlobalOptions, resolveSettings, type Settings } from './settings.js';

/** What every command's action gets: the io, and the exit status it reports back. */
export interface CommandContext {
  readonly io: CliIo;
  /** The global options, then QUOTACTL_* variables, then defaults; a bad one is a usage error. */
  settings(command: Command): Settings;
  printer(settings: Settings): Printer;
  /** The exit status of the command's run. */
  exit(code: ExitCode): void;
  /** Runs `body` with a connection that is closed afterwards, however it ends. */
  withConnection<T>(settings: Settings, body: (connection: Connection) => Promise<T>): Promise<T>;
}

export function commandContext(io: CliIo, onExit: (code: ExitCode) => void): CommandContext {
  return {
    io,
    settings: (command) => resolveSettings(command.optsWithGlobals<GlobalOptions>(), io),
    printer: (settings) => new Printer(io, settings),
    exit: onExit,
    async withConnection(settings, body) {
      // Loaded here, not at start: --help, usage errors and an offline validate never need gRPC.
      const { connect } = await import('./connection.js');
      const connection = connect(settings, io.interrupt);
      try {
        return await body(connection);
      } finally {
        connection.close();
      }
    },
  };
}
