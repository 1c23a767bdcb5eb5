/**
 * Two ByteChannels joined back to back in one process: what one end sends, the other receives. The HTTP gateway
 * serves 9P to itself through one, so it is a client of the daemon's Server like any other and shares no objects.
 */
import type { ByteChannel } from '../ninep/index.js';

export function channelPair(): [ByteChannel, ByteChannel] {
  type End = {
    onData?: (d: Uint8Array) => void;
    onClose?: (e?: Error) => void;
    backlog: Uint8Array[];
    closed: boolean;
  };
  const ends: [End, End] = [
    { backlog: [], closed: false },
    { backlog: [], closed: false },
  ];
  const closeBoth = (): void => {
    for (const e of ends) {
      if (e.closed) continue;
      e.closed = true;
      e.onClose?.();
    }
  };
  const make = (me: End, peer: End): ByteChannel => ({
    send(data) {
      if (me.closed || peer.closed) return;
      // A copy: the sender may reuse its buffer, and delivery is deferred so neither side re-enters the other.
      const copy = data.slice();
      queueMicrotask(() => {
        if (peer.closed) return;
        if (peer.onData) peer.onData(copy);
        else peer.backlog.push(copy);
      });
    },
    start(onData, onClose) {
      me.onData = onData;
      me.onClose = onClose;
      for (const d of me.backlog.splice(0)) onData(d);
    },
    close: closeBoth,
  });
  return [make(ends[0], ends[1]), make(ends[1], ends[0])];
}
