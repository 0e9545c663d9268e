import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { z } from 'zod';

const name = z.string().min(1).max(256);

const fileSchema = z.object({
  clients: z
    .array(
      z.object({
        client_id: name,
        client_secret: z.string().min(8, 'must be at least 8 characters'),
        subject: name,
        tenant: name.optional(),
        scopes: z.array(name).default([]),
        roles: z.array(name).default([]),
      }),
    )
    .min(1),
});

/** One OAuth client of the development issuer and the principal its tokens stand for. */
export type DevClient = z.infer<typeof fileSchema>['clients'][number];

/** Loads config/mcp-dev-clients.yaml; a bad file fails with the field named. */
export async function loadDevClients(path: string): Promise<DevClient[]> {
  const parsed = fileSchema.safeParse(parse(await readFile(path, 'utf8')));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`invalid dev client file ${path}:\n${lines.join('\n')}`);
  }
  const ids = parsed.data.clients.map((client) => client.client_id);
  const twice = ids.find((id, index) => ids.indexOf(id) !== index);
  if (twice !== undefined) throw new Error(`invalid dev client file ${path}:\n  clients: client_id ${twice} is listed twice`);
  return parsed.data.clients;
}
