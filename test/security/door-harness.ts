/**
 * The front door tests' setup: a real daemon (no tools) holding a session `secret-project`, behind a front door
 * (src/platform/front-door.ts) that mounts the web UI (serving the given renderer files) and the HTTP gateway.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { mountHttpGateway } from '../../src/gateway/http.js';
import { startFrontDoor, type FrontDoor } from '../../src/platform/front-door.js';
import { mountWebUi } from '../../src/webui/server.js';
import { harness, type Harness } from '../olliesrv/agent-harness.js';

export interface DoorEnv {
  h: Harness;
  door: FrontDoor;
  close(): Promise<void>;
}

export async function startDoor(token: string, prefix: string, files: Record<string, string>): Promise<DoorEnv> {
  const h = await harness({ tools: false });
  const rendererDir = mkdtempSync(join(tmpdir(), prefix));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(rendererDir, name)), { recursive: true });
    writeFileSync(join(rendererDir, name), text);
  }
  const door = await startFrontDoor({ token });
  mountWebUi(door, { server: h.daemon.server, rendererDir });
  await mountHttpGateway(door, { server: h.daemon.server });
  await h.c.rdwrText('session/new', 'name=secret-project\n');
  return {
    h,
    door,
    async close() {
      await door.close();
      await h.close();
      rmSync(rendererDir, { recursive: true, force: true });
    },
  };
}
