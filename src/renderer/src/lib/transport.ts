/**
 * The renderer's one way out: a 9P byte channel. In Electron the preload hands over a MessagePort (the main
 * process serves olliesrv on its other end); in a browser (headless web mode) it is a WebSocket to the page's
 * own origin, carrying the token the page was opened with. Either way the owner's side may instead bridge it to
 * another machine's daemon over ssh ("Connect to…"): the page only names it.
 */
import {
  messagePortChannel,
  webSocketChannel,
  type ByteChannel,
  type MessagePortLike,
  type WebSocketLike,
} from '../../../ninep/index.js';

/** The port message the preload posts to the page (a MessagePort cannot cross contextBridge). */
export const PORT_MESSAGE = 'ollie:9p-port';

/**
 * Ends `channel` with `why` (the daemon chosen in "Connect to…" could not be reached, or dropped) when the owner's
 * side says so: a DOM MessagePort has no close event, and a WebSocket's close reason reaches no channel.
 */
function withReason(channel: ByteChannel, watch: (end: (why: string) => void) => () => void): ByteChannel {
  // Watched from the start: the reason may come before the client starts the channel.
  let early: string | undefined;
  let onEnd = (why: string): void => void (early ??= why);
  const unwatch = watch((why) => onEnd(why));
  return {
    ...channel,
    start(onData, onClose, onDrain) {
      let done = false;
      const close = (e?: Error): void => {
        if (done) return;
        done = true;
        unwatch();
        onClose(e);
      };
      onEnd = (why) => {
        close(new Error(why));
        channel.close();
      };
      channel.start(onData, close, onDrain);
      if (early !== undefined) onEnd(early);
    },
    close() {
      unwatch();
      channel.close();
    },
  };
}

function viaPreload(bridge: OllieBridge, to: string): Promise<ByteChannel> {
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
      resolve(
        withReason(messagePortChannel(port), (end) => {
          const onError = (m: MessageEvent): void => {
            const why = m.source === window && (m.data as { ollie9pError?: unknown } | null)?.ollie9pError;
            if (typeof why === 'string') end(why);
          };
          window.addEventListener('message', onError);
          return () => window.removeEventListener('message', onError);
        }),
      );
    };
    window.addEventListener('message', onMessage);
    bridge.connect(to);
  });
}

function viaWebSocket(to: string): Promise<ByteChannel> {
  const token = new URLSearchParams(location.search).get('token') ?? '';
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/9p?token=${encodeURIComponent(token)}${to ? `&to=${encodeURIComponent(to)}` : ''}`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => {
      ws.onerror = null;
      ws.onclose = null;
      resolve(
        withReason(webSocketChannel(ws as unknown as WebSocketLike), (end) => {
          // The server's close codes 4400 (a bad daemon address) and 4502 (that daemon unreachable) carry why.
          const onClose = (ev: CloseEvent): void => {
            if (ev.code >= 4000 && ev.reason) end(ev.reason);
          };
          ws.addEventListener('close', onClose);
          return () => ws.removeEventListener('close', onClose);
        }),
      );
    };
    ws.onerror = () => reject(new Error(`cannot reach olliesrv at ${location.host}`));
    ws.onclose = () => reject(new Error(`cannot reach olliesrv at ${location.host}`));
  });
}

/** A channel to this machine's daemon (`to` empty), or to the one at `ssh!HOST[!SOCK]`, bridged by the owner's side. */
export function openChannel(to = ''): Promise<ByteChannel> {
  return window.ollie ? viaPreload(window.ollie, to) : viaWebSocket(to);
}
