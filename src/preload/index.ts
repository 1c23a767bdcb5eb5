/**
 * Preload (sandboxed, context-isolated): the renderer's only door out of the page, and a narrow one. It asks
 * the main process for a 9P MessagePort and passes it to the page (a port cannot cross contextBridge, so it
 * goes by window.postMessage, as Electron's docs do it), and relays menu/notification commands. Nothing else:
 * everything the GUI does is 9P.
 */
import { contextBridge, ipcRenderer } from 'electron';

declare const __OLLIE_VERSION__: string;
/** The page's window, as the preload sees it (this tsconfig has no DOM library). */
declare const window: { postMessage(message: unknown, targetOrigin: string, transfer?: unknown[]): void };

export interface OllieBridge {
  readonly version: string;
  /** A 9P port to this machine's daemon, or to `ssh!HOST[!SOCK]`'s ("Connect to…"). */
  connect(to?: string): void;
  onCommand(listener: (command: string) => void): void;
}

ipcRenderer.on('ollie:9p-port', (e) => {
  // To this window only: the page checks that the message comes from itself.
  window.postMessage('ollie:9p-port', '*', e.ports);
});

// Why the main process closed the last port (the daemon chosen in "Connect to…" could not be reached).
ipcRenderer.on('ollie:9p-error', (_e, why: unknown) => {
  window.postMessage({ ollie9pError: String(why) }, '*');
});

const ollie: OllieBridge = {
  version: __OLLIE_VERSION__,
  connect: (to?: string) => ipcRenderer.send('ollie:9p-connect', to ?? ''),
  onCommand: (listener) => {
    ipcRenderer.on('ollie:command', (_e, command: unknown) => listener(String(command)));
  },
};

contextBridge.exposeInMainWorld('ollie', ollie);
