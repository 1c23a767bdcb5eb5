/**
 * The GUI tests' common setup: the mock LLM, a real daemon on a fresh temp dir (config/backends.conf pointing at
 * the mock, an `e2e` agent profile, a `work` directory), the web UI serving the built renderer, and a Chromium
 * page; optionally a 9P client of the owner's ("outside") to set things up or check them through the namespace.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import type { Client } from '../src/ninep/index.js';
import { dial } from '../src/ninep/node.js';
import { startDaemon, type Daemon, type DaemonOptions } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { buildRenderer, launch, mockBackends, rmrf, socketPath, tempDir } from './helpers.js';

export interface GuiOptions {
  /** The temp dir's name prefix. */
  prefix: string;
  viewport: { width: number; height: number };
  /** The tools the `e2e` profile loads (default: shell); null: no profile at all. */
  autoLoad?: string[] | null;
  /** Writes what the test needs into the temp dir (work files, tools, more config) before the daemon starts. */
  prepare?: (dir: string) => void;
  /** Daemon options beyond the socket, data and config dirs and a silent log (a function: of the temp dir). */
  daemon?: Partial<DaemonOptions> | ((dir: string) => Partial<DaemonOptions>);
  /** The web UI's port (default: the front door's). */
  port?: number;
  /** Dial the daemon as the owner (`outside`). */
  outside?: boolean;
}

export interface Gui {
  dir: string;
  /** dir/work. */
  work: string;
  sock: string;
  mock: MockLlm;
  daemon: Daemon;
  ui: WebUi;
  page: Page;
  /** The owner's client, with `outside: true`. */
  outside: Client;
  close(): Promise<void>;
}

export async function startGui(o: GuiOptions): Promise<Gui> {
  let rendererDir: string | undefined;
  let browser: Browser | undefined;
  let mock: MockLlm | undefined;
  let daemon: Daemon | undefined;
  let ui: WebUi | undefined;
  let outside: Client | undefined;
  let page: Page | undefined;
  let dir: string | undefined;
  const close = async (): Promise<void> => {
    await page?.close();
    await browser?.close();
    outside?.close();
    await ui?.close();
    await daemon?.close();
    await mock?.close();
    rmrf(rendererDir, dir);
  };
  try {
    [rendererDir, browser, mock] = await Promise.all([buildRenderer(), launch(), startMockLlm()]);
    dir = tempDir(o.prefix);
    const config = join(dir, 'config');
    const autoLoad = o.autoLoad === undefined ? ['shell'] : o.autoLoad;
    mkdirSync(autoLoad ? join(config, 'agents') : config, { recursive: true });
    mkdirSync(join(dir, 'work'));
    writeFileSync(join(config, 'backends.conf'), mockBackends(mock.url));
    if (autoLoad)
      writeFileSync(
        join(config, 'agents', 'e2e.json'),
        JSON.stringify({ description: 'e2e agent', prompt: 'You are a test agent.', autoLoad, maxSteps: 20 }),
      );
    o.prepare?.(dir);
    const sock = socketPath(dir);
    daemon = await startDaemon({
      socket: sock,
      dataDir: join(dir, 'data'),
      configDir: config,
      log: () => undefined,
      ...(typeof o.daemon === 'function' ? o.daemon(dir) : o.daemon),
    });
    ui = await startWebUi({ server: daemon.server, rendererDir, ...(o.port !== undefined && { port: o.port }) });
    if (o.outside) outside = await dial(`unix!${sock}`, { uname: userInfo().username });
    page = await browser.newPage({ viewport: o.viewport });
    return { dir, work: join(dir, 'work'), sock, mock, daemon, ui, page, outside: outside!, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * The harness for a describe block: started in its beforeAll, closed in its afterAll (the fields are there from
 * then). Options as a function are read in that beforeAll, after the ones registered before it.
 */
export function useGui(o: GuiOptions | (() => GuiOptions)): Gui {
  const g = {} as Gui;
  beforeAll(async () => void Object.assign(g, await startGui(typeof o === 'function' ? o() : o)), 60_000);
  afterAll(async () => {
    await g.close?.();
  });
  return g;
}

/** Through the GUI's dialogs: a session on dir/work and an agent of the `e2e` profile in it; resolves with its prompt box. */
export async function createInGui(g: Gui, session: string, agent: string) {
  await g.page.goto(g.ui.url);
  await g.page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
  await g.page.getByRole('button', { name: 'New session' }).click();
  await g.page.getByRole('dialog').getByLabel('Name').fill(session);
  await g.page.getByRole('dialog').getByLabel('Working directory').fill(g.work);
  await g.page.getByRole('dialog').getByRole('button', { name: 'Create' }).click();
  await g.page.getByRole('button', { name: `New agent in ${session}` }).click();
  const d = g.page.getByRole('dialog', { name: `New agent in ${session}` });
  await d.getByLabel('Name').fill(agent);
  await d.getByLabel('Profile').selectOption('e2e');
  await d.getByRole('button', { name: 'Create' }).click();
  const box = g.page.getByRole('textbox', { name: 'Prompt', exact: true });
  await box.waitFor();
  return box;
}

/** Through the namespace: session `proj` on dir/work with agent `coder` (profile e2e); then the page, showing its chat. */
export async function openCoder(g: Gui): Promise<void> {
  await g.outside.rdwrText('session/new', `name=proj cwd=${g.work}\n`);
  await g.outside.rdwrText('session/proj/agent/new', 'name=coder agent=e2e\n');
  await g.page.goto(g.ui.url);
  await g.page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
  await g.page.locator('[data-agent="coder"] .node').click();
  await g.page.getByTestId('chat').waitFor();
}

export interface BrowserEnv {
  rendererDir: string;
  browser: Browser;
}

/** The built renderer and a Chromium for a describe block: made in its beforeAll, gone after its afterAll. */
export function useBrowser(): BrowserEnv {
  const b = {} as BrowserEnv;
  beforeAll(async () => {
    b.rendererDir = await buildRenderer();
    b.browser = await launch();
  }, 60_000);
  afterAll(async () => {
    await b.browser?.close();
    rmrf(b.rendererDir);
  });
  return b;
}
