// The codeintel tool host (src/tools/hosts/codeintel.ts, compiled to dist/): code_* and codebase_overview.
import '../../../dist/tools/hosts/codeintel.js';
