/**
 * Electron main process. Thin: it runs olliesrv in-process (the same daemon `ollie serve` runs), opens one
 * window on the renderer, and closes the daemon on quit. Tray, notifications and the renderer's 9P
 * MessagePort come with the GUI.
 */
import { join } from 'node:path';
import { app, BrowserWindow, dialog } from 'electron';
import { formatAddress } from '../ninep/index.js';
import { startDaemon, type Daemon } from '../olliesrv/daemon.js';
import { configDir, dataDir, defaultSocketPath } from '../platform/paths.js';

let daemon: Daemon | undefined;

function createWindow(): void {
  const win = new BrowserWindow({
    width: 1100,
    height: 760,
    title: 'Ollie',
    show: false,
    webPreferences: {
      preload: join(import.meta.dirname, '../preload/index.cjs'),
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
    },
  });
  win.once('ready-to-show', () => win.show());
  // `electron-vite dev` serves the renderer with HMR and says where; otherwise load the built files.
  const devUrl = process.env.ELECTRON_RENDERER_URL;
  if (!app.isPackaged && devUrl) void win.loadURL(devUrl);
  else void win.loadFile(join(import.meta.dirname, '../renderer/index.html'));
}

async function main(): Promise<void> {
  await app.whenReady();
  try {
    daemon = await startDaemon({ socket: defaultSocketPath(), dataDir: dataDir(), configDir: configDir() });
  } catch (e) {
    dialog.showErrorBox('Ollie', `olliesrv could not start: ${(e as Error).message}`);
    app.exit(1);
    return;
  }
  for (const a of daemon.addresses) process.stdout.write(`ollie: serving 9P on ${formatAddress(a)}\n`);
  createWindow();
  app.on('activate', () => {
    if (BrowserWindow.getAllWindows().length === 0) createWindow();
  });
}

// One app per user: a second instance would fight over the socket; focus the first one's window instead.
if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  app.on('second-instance', () => {
    const win = BrowserWindow.getAllWindows()[0];
    if (win) {
      if (win.isMinimized()) win.restore();
      win.focus();
    }
  });
  app.on('window-all-closed', () => {
    if (process.platform !== 'darwin') app.quit();
  });
  // Close the daemon (connections, socket, database) before the process exits.
  app.on('will-quit', (event) => {
    const d = daemon;
    if (!d) return;
    daemon = undefined;
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
