/**
 * 9P over Electron's MessagePortMain. The renderer's end is a DOM MessagePort used through the ninep
 * library's messagePortChannel; this end is an EventEmitter, so it is adapted to the MessagePort shape that
 * messagePortChannel takes, and the conventions (binary messages carry the byte stream, a zero-length message
 * closes) stay in one place.
 */
import type { MessagePortMain } from 'electron';
import { messagePortChannel, type ByteChannel, type MessagePortLike } from '../ninep/index.js';

export function portMainChannel(port: MessagePortMain): ByteChannel {
  let receive: MessagePortLike['onmessage'] = null;
  const like: MessagePortLike = {
    // MessagePortMain transfers only ports: the bytes go by structured clone, so the transfer list is dropped.
    postMessage: (message) => port.postMessage(message),
    get onmessage() {
      return receive;
    },
    set onmessage(fn) {
      port.removeAllListeners('message');
      receive = fn;
      if (fn) port.on('message', (ev) => fn({ data: ev.data }));
    },
    close: () => port.close(),
    start: () => port.start(),
  };
  // A DOM port has no close event, so the channel knows only the zero-length message; this one has: it reads as one.
  port.on('close', () => receive?.({ data: new Uint8Array(0) }));
  return messagePortChannel(like);
}
