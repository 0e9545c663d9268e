// tsc compiles .ts only; the Lua scripts are read at run time from beside their modules.
import { cpSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

function copyLua(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) copyLua(path);
    else if (entry.name.endsWith('.lua')) cpSync(path, join('dist', path));
  }
}
copyLua('src');
