/**
 * Electron main process. Thin: it runs olliesrv in-process (the very code `ollie serve` runs, loaded from
 * dist/ so that its paths to toolsrv and data/ are the same), keeps the Unix socket open for other clients,
 * hands the renderer a 9P MessagePort, and shows pending approvals in the tray and as notifications. The
 * tray and notifications learn what they show as a 9P client too (watcher.ts).
 */
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel } from 'node:worker_threads';
import {
  app,
  BrowserWindow,
  clipboard,
  dialog,
  ipcMain,
  Menu,
  MessageChannelMain,
  nativeImage,
  Notification,
  session,
  shell,
  Tray,
} from 'electron';
import { Client, formatAddress, messagePortChannel, type MessagePortLike } from '../ninep/index.js';
import type { Daemon, startDaemon as StartDaemon } from '../olliesrv/daemon.js';
import type * as DaemonChoice from '../platform/daemon-choice.js';
import type { SshAddress } from '../platform/dial.js';
import type {
  configDir as ConfigDir,
  dataDir as DataDir,
  defaultSocketPath as DefaultSocketPath,
} from '../platform/paths.js';
import { portMainChannel } from './bridge.js';
import { iconPng } from './icon.js';
import { buildMenu } from './menu.js';
import { middleEllipsis, visible, Watcher, wrapLines, type PendingRequest } from './watcher.js';
import { loadWindowState, trackWindowState } from './window-state.js';

/** The checkout or the packaged app: out/main/index.js is two levels below it. */
const root = join(import.meta.dirname, '..', '..');
const rendererFile = join(root, 'out', 'renderer', 'index.html');
const devUrl = !app.isPackaged ? process.env.ELECTRON_RENDERER_URL : undefined;

let daemon: Daemon | undefined;
let win: BrowserWindow | undefined;
let tray: Tray | undefined;
let watcher: Watcher | undefined;
let socketAddr = '';

/** olliesrv from dist/ (built by `npm run build:node`), typed by its sources. */
async function loadDaemon(): Promise<{
  startDaemon: typeof StartDaemon;
  configDir: typeof ConfigDir;
  dataDir: typeof DataDir;
  defaultSocketPath: typeof DefaultSocketPath;
}> {
  const d = (await import(pathToFileURL(join(root, 'dist', 'olliesrv', 'daemon.js')).href)) as {
    startDaemon: typeof StartDaemon;
  };
  const p = (await import(pathToFileURL(join(root, 'dist', 'platform', 'paths.js')).href)) as {
    configDir: typeof ConfigDir;
    dataDir: typeof DataDir;
    defaultSocketPath: typeof DefaultSocketPath;
  };
  return {
    startDaemon: d.startDaemon,
    configDir: p.configDir,
    dataDir: p.dataDir,
    defaultSocketPath: p.defaultSocketPath,
  };
}

/** Whether a URL may be given to the system browser: http, https and mailto only. */
export function externalUrl(url: string): boolean {
  try {
    return ['http:', 'https:', 'mailto:'].includes(new URL(url).protocol);
  } catch {
    return false;
  }
}

function isOurPage(url: string): boolean {
  if (devUrl) return url.startsWith(devUrl);
  return url.startsWith(pathToFileURL(rendererFile).href);
}

/** No remote content: the renderer may load its own files (and the dev server in development), nothing else. */
function lockDown(): void {
  const ses = session.defaultSession;
  ses.setPermissionRequestHandler((_wc, permission, cb) => cb(permission === 'clipboard-sanitized-write'));
  ses.setPermissionCheckHandler((_wc, permission) => permission === 'clipboard-sanitized-write');
  ses.webRequest.onBeforeRequest({ urls: ['http://*/*', 'https://*/*', 'ws://*/*', 'wss://*/*'] }, (d, cb) => {
    cb({ cancel: !(devUrl && (d.url.startsWith(devUrl) || d.url.startsWith(devUrl.replace(/^http/, 'ws')))) });
  });
  app.on('web-contents-created', (_e, contents) => {
    // A link in the chat (target=_blank) is handed to the system browser, never opened in the app; only http(s)
    // and mailto, whatever the renderer let through (a model wrote it).
    contents.setWindowOpenHandler(({ url }) => {
      if (externalUrl(url)) void shell.openExternal(url);
      return { action: 'deny' };
    });
    contents.on('will-navigate', (e, url) => {
      if (!isOurPage(url)) e.preventDefault();
    });
    contents.on('will-attach-webview', (e) => e.preventDefault());
  });
}

function createWindow(): BrowserWindow {
  const state = loadWindowState();
  const w = new BrowserWindow({
    ...(state.placed ? state.bounds : { width: state.bounds.width, height: state.bounds.height }),
    minWidth: 640,
    minHeight: 420,
    title: 'Ollie',
    icon: nativeImage.createFromBuffer(iconPng(256, false)),
    show: false,
    backgroundColor: '#16181d',
    webPreferences: {
      preload: join(import.meta.dirname, '../preload/index.cjs'),
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      webSecurity: true,
      spellcheck: false,
    },
  });
  if (state.maximized) w.maximize();
  trackWindowState(w);
  w.once('ready-to-show', () => w.show());
  w.on('focus', () => w.flashFrame(false));
  w.on('closed', () => {
    if (win === w) win = undefined;
  });
  if (devUrl) void w.loadURL(devUrl);
  else void w.loadFile(rendererFile);
  return w;
}

function showWindow(): BrowserWindow {
  win ??= createWindow();
  if (win.isMinimized()) win.restore();
  win.show();
  win.focus();
  return win;
}

function openAgent(sessionId: string, agentId: string): void {
  const w = showWindow();
  const send = (): void => w.webContents.send('ollie:command', `open-agent ${sessionId} ${agentId}`);
  if (w.webContents.isLoading()) w.webContents.once('did-finish-load', send);
  else send();
}

/**
 * 9P for the renderer: each request gets a fresh MessageChannel whose other end olliesrv serves, or, when the
 * page asks for `ssh!HOST[!SOCK]` ("Connect to…"), the daemon there (src/platform/daemon-choice.ts).
 */
function bridgeRenderer(d: Daemon): void {
  const choice = import(pathToFileURL(join(root, 'dist', 'platform', 'daemon-choice.js')).href) as Promise<
    typeof DaemonChoice
  >;
  ipcMain.on('ollie:9p-connect', (e, to: unknown) => {
    if (!e.senderFrame || !isOurPage(e.senderFrame.url)) return;
    const { port1, port2 } = new MessageChannelMain();
    const fail = (why: string): void => {
      // The window may be gone by the time a remote daemon drops.
      if (!e.sender.isDestroyed()) e.sender.send('ollie:9p-error', why);
      port1.close();
    };
    e.sender.postMessage('ollie:9p-port', null, [port2]);
    if (typeof to !== 'string' || to === '') return void d.server.serve(portMainChannel(port1), { kind: 'local' });
    void choice.then(
      (c) => {
        let addr: SshAddress | undefined;
        try {
          addr = c.parseDaemonChoice(to);
        } catch (err) {
          return fail((err as Error).message);
        }
        if (addr) c.bridgeToDaemon(portMainChannel(port1), addr, fail);
      },
      (err: Error) => fail(err.message),
    );
  });
}

function updateTray(pending: PendingRequest[]): void {
  // What the tray shows, readable from the main process's global scope (diagnostics, and the Electron spec:
  // a tray's tooltip and menu have no getters, and badge counts exist only on some Linux desktops).
  (globalThis as { ollieTray?: { pending: string[] } }).ollieTray = { pending: pending.map((p) => p.id) };
  if (!tray) return;
  const n = pending.length;
  tray.setImage(nativeImage.createFromBuffer(iconPng(32, n > 0)));
  tray.setToolTip(n ? `Ollie — ${n} pending approval${n > 1 ? 's' : ''}` : 'Ollie');
  if (process.platform === 'darwin') tray.setTitle(n ? String(n) : '');
  app.setBadgeCount(n);
  const decide = (p: PendingRequest, d: 'approve' | 'deny') => () => {
    watcher
      ?.resolve(p.id, d)
      .catch((e: unknown) => dialog.showErrorBox('Ollie', `${d} ${p.id}: ${(e as Error).message}`));
  };
  // The label may be cut in the middle (its tail stays); the submenu holds the whole command, line by line.
  const items = pending.map((p) => ({
    label: `⚠ ${p.agent}: ${middleEllipsis(visible(p.cmd), 70)}`,
    submenu: [
      ...wrapLines(visible(p.cmd), 80).map((l) => ({ label: l, enabled: false })),
      { type: 'separator' as const },
      { label: `${p.tool || 'tool'} in ${p.cwd}`, enabled: false },
      { label: `session ${p.session}`, enabled: false },
      { type: 'separator' as const },
      { label: 'Approve', click: decide(p, 'approve') },
      { label: 'Deny', click: decide(p, 'deny') },
      { label: 'Show…', click: () => openAgent(p.sessionId, p.agentId) },
    ],
  }));
  tray.setContextMenu(
    Menu.buildFromTemplate([
      { label: n ? `${n} pending approval${n > 1 ? 's' : ''}` : 'No pending approvals', enabled: false },
      ...items,
      { type: 'separator' },
      { label: 'Show Ollie', click: () => showWindow() },
      { label: 'Quit', click: () => app.quit() },
    ]),
  );
}

function notify(title: string, body: string, onClick: () => void): void {
  if (!Notification.isSupported()) return;
  const n = new Notification({ title, body, icon: nativeImage.createFromBuffer(iconPng(64, false)) });
  n.on('click', onClick);
  n.show();
}

/** The tray's and notifications' own 9P client, over an in-process channel to the daemon. */
async function startWatcher(d: Daemon): Promise<void> {
  const { port1, port2 } = new MessageChannel();
  d.server.serve(messagePortChannel(port1 as unknown as MessagePortLike), { kind: 'local' });
  const client = await Client.connect(messagePortChannel(port2 as unknown as MessagePortLike), {
    uname: userInfo().username,
  });
  watcher = new Watcher(client, {
    pending: updateTray,
    request: (p) => {
      win?.flashFrame(!win.isFocused());
      // A desktop may clip a long body: the end of the command (where something rides along) comes first.
      const cmd = visible(p.cmd);
      notify(
        `Approval needed — ${p.agent}`,
        `${cmd.length > 200 ? `…${[...cmd].slice(-120).join('')}\n\n` : ''}${cmd}\nin ${p.cwd} (session ${p.session})`,
        () => openAgent(p.sessionId, p.agentId),
      );
    },
    turnEnded: (e) => {
      if (win?.isFocused()) return;
      if (e.error)
        notify(`${e.agent} failed`, `The turn in session ${e.session} ended in an error: ${e.error}`, () =>
          openAgent(e.sessionId, e.agentId),
        );
      else
        notify(`${e.agent} finished`, `The turn in session ${e.session} ended.`, () =>
          openAgent(e.sessionId, e.agentId),
        );
    },
  });
  await watcher.start();
}

async function main(): Promise<void> {
  await app.whenReady();
  lockDown();
  try {
    const { startDaemon, configDir, dataDir, defaultSocketPath } = await loadDaemon();
    daemon = await startDaemon({ socket: defaultSocketPath(), dataDir: dataDir(), configDir: configDir() });
  } catch (e) {
    dialog.showErrorBox('Ollie', `olliesrv could not start: ${(e as Error).message}`);
    app.exit(1);
    return;
  }
  socketAddr = daemon.addresses.map((a) => formatAddress(a)).join(' ');
  process.stdout.write(`ollie: serving 9P on ${socketAddr}\n`);
  bridgeRenderer(daemon);
  Menu.setApplicationMenu(
    buildMenu(() => win, {
      showSocket: () => {
        clipboard.writeText(socketAddr);
        notify('Ollie', `Copied ${socketAddr}`, () => undefined);
      },
    }),
  );
  tray = new Tray(nativeImage.createFromBuffer(iconPng(32, false)));
  tray.on('click', () => showWindow());
  updateTray([]);
  win = createWindow();
  await startWatcher(daemon).catch((e: unknown) =>
    process.stderr.write(`ollie: tray watcher: ${(e as Error).message}\n`),
  );
  app.on('activate', () => showWindow());
}

// One app per user: a second instance would fight over the socket; focus the first one's window instead.
if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  app.on('second-instance', () => showWindow());
  // The tray keeps the app (and its agents) running with the window closed; Quit is in the tray and the menu.
  app.on('window-all-closed', () => {
    if (!tray) app.quit();
  });
  // Close the daemon (connections, socket, database, toolsrv) before the process exits.
  app.on('will-quit', (event) => {
    const d = daemon;
    if (!d) return;
    daemon = undefined;
    watcher?.close();
    event.preventDefault();
    d.close().then(
      () => app.quit(),
      (e: unknown) => {
        process.stderr.write(`ollie: shutdown failed: ${(e as Error).message}\n`);
        app.exit(1);
      },
    );
  });
  main().catch((e: unknown) => {
    process.stderr.write(`ollie: ${(e as Error).stack ?? String(e)}\n`);
    app.exit(1);
  });
}
