/**
 * Preload (sandboxed, context-isolated): the renderer's only door out of the page. For now it exposes just the
 * app version. The GUI issue adds the one real capability: a MessagePort that carries 9P to olliesrv.
 */
import { contextBridge } from 'electron';

declare const __OLLIE_VERSION__: string;

export interface OllieBridge {
  readonly version: string;
}

const ollie: OllieBridge = { version: __OLLIE_VERSION__ };

contextBridge.exposeInMainWorld('ollie', ollie);
