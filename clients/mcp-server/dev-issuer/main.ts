// The development authorization server's entry point (`make run-mcp` starts it beside
// the reference MCP server). DEVELOPMENT ONLY: see dev-issuer.ts.
import { pino } from 'pino';
import { loadDevIssuerConfig } from './config.js';
import { loadDevClients } from './dev-clients.js';
import { startDevIssuer } from './dev-issuer.js';

async function main(): Promise<void> {
  const config = loadDevIssuerConfig(process.env);
  const logger = pino({ name: 'mcp-dev-issuer', level: config.MCP_LOG_LEVEL }, pino.destination(2));
  const issuer = await startDevIssuer({
    host: config.MCP_DEV_ISSUER_HOST,
    port: config.MCP_DEV_ISSUER_PORT,
    ...(config.MCP_DEV_ISSUER_URL === undefined ? {} : { issuer: config.MCP_DEV_ISSUER_URL }),
    clients: await loadDevClients(config.MCP_DEV_ISSUER_CLIENTS),
    tokenTtlSeconds: config.MCP_DEV_ISSUER_TOKEN_TTL_S,
    logger,
  });
  // Machine-readable for whoever started us with port 0 (tests, scripts).
  logger.info({ port: issuer.port, issuer: issuer.issuer }, 'ready');
  const shutdown = async () => {
    await issuer.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
}

main().catch((error: unknown) => {
  process.stderr.write(`mcp-dev-issuer: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
