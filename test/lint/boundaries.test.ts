/**
 * The project's import layers (eslint.config.js), checked on code as a contributor would write it: each case is
 * linted as if it were the named file, and must raise (or not) the boundary rules, for static imports and
 * import() alike.
 */
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint({ cwd: new URL('../..', import.meta.url).pathname });
const BOUNDARY = new Set(['no-restricted-imports', 'no-restricted-syntax']);

async function boundaryErrors(filePath: string, code: string): Promise<string[]> {
  const [r] = await eslint.lintText(code, { filePath });
  return r!.messages.filter((m) => m.ruleId && BOUNDARY.has(m.ruleId)).map((m) => m.message);
}

const refused: Array<[string, string, RegExp]> = [
  ['src/renderer/src/lib/x.ts', `import { readFileSync } from 'node:fs';`, /Node builtins/],
  ['src/renderer/src/lib/x.ts', `export const m = () => import('node:fs');`, /Node builtins.*import\(\)/],
  [
    'src/renderer/src/lib/x.ts',
    `export const m = () => import('../../../olliesrv/daemon.js');`,
    /renderer talks 9P only/,
  ],
  ['src/renderer/src/lib/x.ts', `import '../../../gateway/http.js';`, /renderer talks 9P only/],
  ['src/renderer/src/lib/x.ts', `import '../../../toolsrv/protocol.js';`, /renderer talks 9P only/],
  ['src/olliesrv/agent/x.ts', `import { SPAWNER } from '../../toolsrv/exec/spawner.js';`, /toolsrv\/public\.js/],
  [
    'src/olliesrv/agent/x.ts',
    `export const m = () => import('../../toolsrv/sandbox/trust.js');`,
    /toolsrv\/public\.js.*import\(\)/,
  ],
  ['src/olliesrv/agent/x.ts', `export const m = () => import('electron');`, /Only src\/main and src\/preload/],
  ['src/olliesrv/agent/x.ts', `import React from 'react';`, /Only src\/renderer may import React/],
  [
    'src/olliesrv/agent/x.ts',
    `export const m = (p: string) => import(p);`,
    /import\(\) is for the packages in LAZY_PACKAGES/,
  ],
  [
    'src/olliesrv/agent/x.ts',
    `export const m = () => import('./agent.js');`,
    /import\(\) is for the packages in LAZY_PACKAGES/,
  ],
  ['src/cli/x.ts', `export const m = () => import('../toolsrv/exec/spawner.js');`, /toolsrv\/public\.js/],
  ['src/toolsrv/exec/x.ts', `import '../../main/index.js';`, /may not import the app/],
  ['src/gateway/x.ts', `import '../olliesrv/daemon.js';`, /reach the daemon over 9P/],
  ['src/webui/x.ts', `export const m = () => import('../toolsrv/public.js');`, /reach the daemon over 9P/],
  ['src/ninep/common/x.ts', `import '../../olliesrv/daemon.js';`, /standalone library/],
  [
    'src/ninep/common/x.ts',
    `export const m = () => import('../../platform/paths.js');`,
    /standalone library.*import\(\)/,
  ],
  ['src/preload/x.ts', `import { join } from 'node:path';`, /Node builtins/],
];

const allowed: Array<[string, string]> = [
  ['src/olliesrv/agent/x.ts', `import type { ToolInfo } from '../../toolsrv/protocol.js';\nexport type T = ToolInfo;`],
  ['src/olliesrv/agent/x.ts', `export { loadPolicy } from '../../toolsrv/public.js';`],
  ['src/olliesrv/backend/x.ts', `export const m = () => import('@ai-sdk/anthropic');`],
  ['src/olliesrv/backend/x.ts', `export const m = () => import('gpt-tokenizer/encoding/o200k_base');`],
  ['src/cli/x.ts', `export const m = () => import('../olliesrv/daemon.js');`],
  ['src/renderer/src/lib/x.ts', `export const m = () => import('shiki/langs/go.mjs');`],
  ['src/olliesrv/skills/x.ts', `export const m = () => import('onnxruntime-node');`],
  ['src/main/index.ts', `export const m = (p: string) => import(p);`],
];

describe('import layers', () => {
  it.each(refused)('%s: %s is refused', async (file, code, why) => {
    const errs = await boundaryErrors(file, code);
    expect(
      errs.some((m) => why.test(m)),
      errs.join('\n') || 'no boundary error',
    ).toBe(true);
  });

  it.each(allowed)('%s: %s is allowed', async (file, code) => {
    expect(await boundaryErrors(file, code)).toEqual([]);
  });
});
