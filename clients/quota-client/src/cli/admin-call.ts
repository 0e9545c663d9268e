import { type CallOptions, ClientError, Status } from 'nice-grpc';
import { type QuotaAdminServiceClient, QuotaAdminServiceDefinition } from '@quota-service/contract';
import type { Connection } from './connection.js';
import { CliError, EXIT, type ExitCode } from './exit-codes.js';

/** The service's words when the caller has no admin role at all (rather than a policy outside its list). */
const ADMIN_API_REFUSED = /may not use the admin API/;

/**
 * One call of the admin service (reset, overrides, validate --remote) on the
 * command's connection. The refusals an admin command meets say what to do:
 * a token without the admin role, an admin whose policies do not cover what
 * it named, or a service that has no admin API.
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
        const hint = !withToken
          ? 'admin commands need the token of a caller with the admin role (--token, --token-file or QUOTACTL_TOKEN)'
          : ADMIN_API_REFUSED.test(error.details)
            ? "the token lacks the admin role (roles: [admin] in the service's callers file)"
            : "the token's caller may not act on that policy or limit (its policies in the service's callers file)";
        throw new CliError(`PERMISSION_DENIED: ${hint}; the service said: ${error.details}`, EXIT.refused);
      }
      if (error.code === Status.NOT_FOUND) throw new CliError(`NOT_FOUND: ${error.details}`, notFound);
      if (error.code === Status.UNIMPLEMENTED) {
        throw new CliError(`UNIMPLEMENTED: this service does not serve the admin API (quota.v1.QuotaAdminService): ${error.details}`, EXIT.rejected);
      }
      throw error;
    }
  });
}
