/**
 * The renderer's one way out: a 9P byte channel. In Electron the preload hands over a MessagePort (the main
 * process serves olliesrv on its other end); in a browser (headless web mode) it is a WebSocket to the page's
 * own origin, carrying the token the page was opened with.
 */
import { messagePortChannel, webSocketChannel, type ByteChannel, type MessagePortLike, type WebSocketLike } from '../../../ninep/index.js';

/** The port message the preload posts to the page (a MessagePort cannot cross contextBridge). */
export const PORT_MESSAGE = 'ollie:9p-port';

function viaPreload(bridge: OllieBridge): Promise<ByteChannel> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      window.removeEventListener('message', onMessage);
      reject(new Error('the main process did not hand over a 9P port'));
    }, 5000);
    const onMessage = (ev: MessageEvent): void => {
      if (ev.source !== window || ev.data !== PORT_MESSAGE || !ev.ports[0]) return;
      clearTimeout(timer);
      window.removeEventListener('message', onMessage);
      const raw = ev.ports[0];
      // Posted without a transfer list: the main process's end (MessagePortMain) takes only ports in one, so
      // the bytes are copied, which costs little next to the IPC hop.
      const port: MessagePortLike = {
        postMessage: (m) => raw.postMessage(m),
        get onmessage() {
          return raw.onmessage as MessagePortLike['onmessage'];
        },
        set onmessage(h) {
          raw.onmessage = h as typeof raw.onmessage;
        },
        close: () => raw.close(),
        start: () => raw.start(),
      };
      resolve(messagePortChannel(port));
    };
    window.addEventListener('message', onMessage);
    bridge.connect();
  });
}

function viaWebSocket(): Promise<ByteChannel> {
  const token = new URLSearchParams(location.search).get('token') ?? '';
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/9p?token=${encodeURIComponent(token)}`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => {
      ws.onerror = null;
      ws.onclose = null;
      resolve(webSocketChannel(ws as unknown as WebSocketLike));
    };
    ws.onerror = () => reject(new Error(`cannot reach olliesrv at ${location.host}`));
    ws.onclose = () => reject(new Error(`cannot reach olliesrv at ${location.host}`));
  });
}

export function openChannel(): Promise<ByteChannel> {
  return window.ollie ? viaPreload(window.ollie) : viaWebSocket();
}
