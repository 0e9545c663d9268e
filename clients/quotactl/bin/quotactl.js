#!/usr/bin/env node
// quotactl: this file exists before the package is built, so npm links the
// command at install time in a workspace too; the program is in dist.
try {
  await import('../dist/quotactl.js');
} catch (error) {
  // In a checkout of the repository before the first build; an installed package always has dist.
  if (error?.code !== 'ERR_MODULE_NOT_FOUND' || !String(error.url).endsWith('/dist/quotactl.js')) throw error;
  process.stderr.write('quotactl: not built yet: run `make build` (or `npm run build`) first\n');
  process.exit(6);
}
