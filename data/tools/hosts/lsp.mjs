// The lsp tool host (src/tools/hosts/lsp.ts, compiled to dist/): lsp_* with warm language servers.
import '../../../dist/tools/hosts/lsp.js';
