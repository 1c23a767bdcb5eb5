/**
 * The lsp host: the lsp_* tools with their language servers kept warm per language and workspace root
 * (src/tools/lsp). Servers stop after the host's idle time without a request, and all of them when the host
 * stops. Started by toolsrv as `node data/tools/hosts/lsp.mjs` (see src/toolsrv/exec/hosts.ts).
 */
import { Servers } from '../lsp/client.js';
import { lspTools } from '../lsp/tools.js';
import { idleMsArg, serveHost } from './runtime.js';

const servers = new Servers(idleMsArg());

await serveHost({
  name: 'lsp',
  tools: lspTools(servers),
  stats: () => ({
    servers: servers.list(),
    started: { ...servers.started },
    stopped: { ...servers.stopped },
    failed: { ...servers.failed },
  }),
  onExit: () => servers.stopAll(),
});
