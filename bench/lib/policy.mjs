import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * In a checkout whose node_modules lies elsewhere (a git worktree linking another's), sandboxed Node programs (MCP
 * servers) could not read their packages: writes the shipped policy into `configDir` with that directory readable.
 * Does nothing where node_modules is the checkout's own.
 */
export function letSandboxReadModules(root, configDir) {
  const modules = realpathSync(join(root, 'node_modules'));
  if (modules.startsWith(`${root}/`)) return;
  writeFileSync(
    join(configDir, 'sandbox.yaml'),
    readFileSync(join(root, 'data', 'sandbox.yaml'), 'utf8').replace(/^ {2}ro:\n/m, `  ro:\n    - ${modules}\n`),
  );
}
