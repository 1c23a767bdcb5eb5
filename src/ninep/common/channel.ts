/**
 * A byte channel: the one thing the 9P server and client need from a transport. Sockets, MessagePorts and
 * WebSockets are all adapted to it; message boundaries of the underlying transport do not matter, because
 * the Framer re-cuts the stream into 9P frames.
 */
export interface ByteChannel {
  send(data: Uint8Array): void;
  /** Registers the receivers. Called once, before any data flows. */
  start(onData: (data: Uint8Array) => void, onClose: (err?: Error) => void, onDrain?: () => void): void;
  close(): void;
  /**
   * Optional flow control, for transports that have it (sockets): bytes sent but not yet written out, and a way
   * to stop and restart onData. A channel with backlog() calls start's onDrain once its backlog has been written.
   */
  backlog?(): number;
  pause?(): void;
  resume?(): void;
}

/** The subset of MessagePort (browser or worker_threads) that a channel needs. */
export interface MessagePortLike {
  postMessage(message: unknown, transfer?: ArrayBuffer[]): void;
  onmessage: ((ev: { data: unknown }) => void) | null;
  close(): void;
  start?(): void;
}

/**
 * A channel over a MessagePort. Each send transfers its own ArrayBuffer, so no bytes are copied between
 * processes' heaps more than once. A zero-length message is the close signal, since ports have no close event.
 */
export function messagePortChannel(port: MessagePortLike): ByteChannel {
  let closed = false;
  let onClosed: ((err?: Error) => void) | undefined;
  const finish = (): void => {
    if (closed) return;
    closed = true;
    port.onmessage = null;
    port.close();
    onClosed?.();
  };
  return {
    send(data) {
      if (closed || data.length === 0) return;
      const copy =
        data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer
          ? data
          : data.slice();
      port.postMessage(copy, [copy.buffer as ArrayBuffer]);
    },
    start(onData, onClose) {
      onClosed = onClose;
      port.onmessage = (ev) => {
        const d = ev.data;
        const bytes = d instanceof Uint8Array ? d : d instanceof ArrayBuffer ? new Uint8Array(d) : undefined;
        if (!bytes) return;
        if (bytes.length === 0) finish();
        else onData(bytes);
      };
      port.start?.();
    },
    close() {
      if (closed) return;
      try {
        port.postMessage(new Uint8Array(0));
      } catch {
        // The other side is already gone.
      }
      finish();
    },
  };
}

/** The subset of the WHATWG WebSocket (browsers, `ws`) that a channel needs. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: unknown) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}

/** A channel over an open WebSocket; binary messages carry the byte stream. */
export function webSocketChannel(ws: WebSocketLike): ByteChannel {
  ws.binaryType = 'arraybuffer';
  return {
    send(data) {
      if (ws.readyState === 1) ws.send(data);
    },
    start(onData, onClose) {
      let closed = false;
      const end = (err?: Error): void => {
        if (closed) return;
        closed = true;
        onClose(err);
      };
      ws.onmessage = (ev) => {
        const d = ev.data;
        if (d instanceof ArrayBuffer) onData(new Uint8Array(d));
        else if (d instanceof Uint8Array) onData(d);
        else end(new Error('WebSocket carried a text message; 9P needs binary'));
      };
      ws.onclose = () => end();
      ws.onerror = () => end(new Error('WebSocket error'));
    },
    close() {
      ws.close();
    },
  };
}
