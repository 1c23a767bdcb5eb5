/**
 * The codeintel host: the code intelligence tools (src/tools/codeintel) in one resident process, so that the
 * tree-sitter runtime and each grammar load once, queries compile once, and outlines stay cached by mtime.
 * Started by toolsrv as `node data/tools/hosts/codeintel.mjs` (see src/toolsrv/exec/hosts.ts).
 */
import { loads } from '../codeintel/languages.js';
import { cacheSize, outlineStats } from '../codeintel/outline.js';
import { CODEINTEL_TOOLS } from '../codeintel/tools.js';
import { serveHost } from './runtime.js';

await serveHost({
  name: 'codeintel',
  tools: CODEINTEL_TOOLS,
  stats: () => ({ loads: { ...loads }, outlines: { ...outlineStats, cached_files: cacheSize() } }),
});
