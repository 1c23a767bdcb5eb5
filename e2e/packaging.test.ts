/**
 * Packaging config: electron-builder.yml passes electron-builder's own schema validation, targets AppImage
 * and deb, and ships what the app loads at run time. (Building the packages needs Electron's download.)
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { root } from './helpers.js';

const require = createRequire(import.meta.url);

describe('electron-builder config', () => {
  it('is valid and packages the app, the daemons and the shipped data for Linux', async () => {
    const config = require('app-builder-lib/out/util/config/config.js') as {
      getConfig(dir: string, path: string, o: null): Promise<Record<string, unknown>>;
      validateConfiguration(c: Record<string, unknown>, log: unknown): Promise<void>;
    };
    const { DebugLogger } = require('builder-util') as { DebugLogger: new (enabled: boolean) => unknown };
    const c = await config.getConfig(root, join(root, 'electron-builder.yml'), null);
    await config.validateConfiguration(c, new DebugLogger(false));
    const linux = c.linux as { target: string[] };
    expect(linux.target).toEqual(['AppImage', 'deb']);
    expect(c.npmRebuild).toBe(true);
    // getConfig normalizes `files` into [{ filter: [...] }].
    const files = (c.files as { filter: string[] }[]).flatMap((f) => f.filter);
    for (const f of ['out/**', 'dist/**', 'data/**', 'native/build/**']) expect(files).toContain(f);
    // What the main process loads from dist/ at run time exists in the source tree it is built from.
    for (const src of ['src/olliesrv/daemon.ts', 'src/platform/paths.ts', 'src/toolsrv/main.ts'])
      expect(existsSync(join(root, src))).toBe(true);
    expect((c.extraMetadata as { main: string }).main).toBe('out/main/index.js');
  });

  it('packages a 512×512 PNG icon rendered from icon.svg', async () => {
    const config = require('app-builder-lib/out/util/config/config.js') as {
      getConfig(dir: string, path: string, o: null): Promise<Record<string, unknown>>;
    };
    const c = await config.getConfig(root, join(root, 'electron-builder.yml'), null);
    const icon = (c.linux as { icon: string }).icon;
    expect(icon).toBe('resources/icon.png');
    const png = readFileSync(join(root, icon));
    // The PNG signature, then the IHDR chunk: width and height (big-endian), bit depth 8, colour type 6 (RGBA).
    expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    expect([png.readUInt32BE(16), png.readUInt32BE(20), png[24], png[25]]).toEqual([512, 512, 8, 6]);
  });
});
