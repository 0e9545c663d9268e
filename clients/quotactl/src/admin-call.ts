import { type CallOptions, ClientError, Status } from 'nice-grpc';
import { type QuotaAdminServiceClient, QuotaAdminServiceDefinition } from '@quota-service/contract';
import type { Connection } from './connection.js';
import { CliError, EXIT, type ExitCode } from './exit-codes.js';

/**
 * One call of the admin service (reset, overrides, validate --remote) on the
 * command's connection. The refusals an admin command meets say what to do:
 * a token without the admin role, or a service that has no admin API.
 */
export function adminCall<T>(
  connection: Connection,
  run: (admin: QuotaAdminServiceClient, options: CallOptions) => Promise<T>,
  /** The exit status of NOT_FOUND when it means "there is none" (overrides get and delete: 1), rather than a bad request (5). */
  notFound: ExitCode = EXIT.rejected,
): Promise<T> {
  const admin = connection.service(QuotaAdminServiceDefinition);
  const withToken = connection.metadata.has('authorization');
  return connection.call(async (options) => {
    try {
      return await run(admin, options);
    } catch (error) {
      if (!(error instanceof ClientError)) throw error;
      if (error.code === Status.PERMISSION_DENIED) {
        const hint = refusalHint(error.details, withToken);
        throw new CliError(`PERMISSION_DENIED: ${hint === undefined ? '' : `${hint}; the service said: `}${error.details}`, EXIT.refused);
      }
      if (error.code === Status.NOT_FOUND) throw new CliError(`NOT_FOUND: ${error.details}`, notFound);
      if (error.code === Status.UNIMPLEMENTED) {
        throw new CliError(`UNIMPLEMENTED: this service does not serve the admin API (quota.v1.QuotaAdminService): ${error.details}`, EXIT.rejected);
      }
      throw error;
    }
  });
}

/**
 * What to do about the service's PERMISSION_DENIED, by the reason its message
 * gives (the service's admin access check and caller authentication word
 * them); undefined when the message says none of these, so no reason is guessed.
 */
function refusalHint(details: string, withToken: boolean): string | undefined {
  if (/only loopback clients/.test(details)) {
    // The service checks no token at all: another token cannot help, only another machine.
    return `the service has no caller authentication, so it takes admin calls from loopback clients only${withToken ? ', whatever the token' : ''}: run quotactl on the service's machine`;
  }
  if (/may not use the admin API/.test(details)) return "the token lacks the admin role (roles: [admin] in the service's callers file)";
  if (/may not use policy/.test(details)) return "the token's caller may not use this policy (its policies in the service's callers file)";
  if (/may not (use|override) limit/.test(details))
    return "the token's caller may not act on that policy or limit (its policies in the service's callers file)";
  return undefined;
}
