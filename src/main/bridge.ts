/**
 * 9P over Electron's MessagePortMain. The renderer's end is a DOM MessagePort used through the ninep
 * library's messagePortChannel; this end is an EventEmitter, so it gets its own small adapter with the same
 * conventions: binary messages carry the byte stream, a zero-length message closes.
 */
import type { MessagePortMain } from 'electron';
import type { ByteChannel } from '../ninep/index.js';

export function portMainChannel(port: MessagePortMain): ByteChannel {
  let closed = false;
  let onClosed: ((err?: Error) => void) | undefined;
  const finish = (): void => {
    if (closed) return;
    closed = true;
    port.removeAllListeners('message');
    port.close();
    onClosed?.();
  };
  return {
    send(data) {
      // Structured clone copies the bytes; MessagePortMain transfers only ports, not buffers.
      if (!closed && data.length > 0) port.postMessage(data);
    },
    start(onData, onClose) {
      onClosed = onClose;
      port.on('message', (ev) => {
        const d: unknown = ev.data;
        const bytes = d instanceof Uint8Array ? d : d instanceof ArrayBuffer ? new Uint8Array(d) : undefined;
        if (!bytes) return;
        if (bytes.length === 0) finish();
        else onData(bytes);
      });
      port.on('close', finish);
      port.start();
    },
    close() {
      if (closed) return;
      try {
        port.postMessage(new Uint8Array(0));
      } catch {
        // The renderer is already gone.
      }
      finish();
    },
  };
}
