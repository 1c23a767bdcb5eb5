/**
 * The chat of the selected agent: virtualized from the first block (only the rows in view exist in the DOM),
 * rows measured as they render, and stuck to the bottom while streaming unless the user scrolled up. It opens
 * from the log's tail; scrolling near the top loads the page before it, and the rows on screen stay where they
 * were while that page is put in front of them.
 */
import { useVirtualizer } from '@tanstack/react-virtual';
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { ollie, selectedAgent, useStore } from '../lib/store.js';
import { BlockView } from './BlockView.js';

export function Chat() {
  const chat = useStore((s) => s.chat);
  const version = useStore((s) => s.chatVersion);
  const ended = useStore((s) => s.chatEnded);
  const highlight = useStore((s) => s.highlight);
  const endedHow = useStore((s) => selectedAgent(s)?.ended);
  const scroller = useRef<HTMLDivElement>(null);
  const stuck = useRef(true);
  /** Where the view was put when it last followed the bottom (a scroll above it since is the user's). */
  const followed = useRef<number>(undefined);
  const [showJump, setShowJump] = useState(false);
  const count = chat?.visible.length ?? 0;

  // Screen readers hear each reply as it completes (a polite live region): not the history read at open, nor
  // every streamed chunk. A reply is announced once, when a block that streamed in (live) is final.
  const [announce, setAnnounce] = useState('');
  const announced = useRef(new Set<string>());
  useEffect(() => {
    announced.current.clear();
    setAnnounce('');
  }, [chat]);
  useEffect(() => {
    if (!chat) return;
    for (let i = chat.blocks.length - 1; i >= 0 && i >= chat.blocks.length - 8; i--) {
      const b = chat.blocks[i]!;
      if (b.role !== 'assistant' || !b.live || b.partial || announced.current.has(b.id)) continue;
      announced.current.add(b.id);
      setAnnounce(`Reply: ${b.content.slice(0, 300)}`);
      break;
    }
  }, [chat, version]);

  // Stable callbacks: the virtualizer recomputes every row's position when they change identity, which would
  // make each streamed chunk cost O(blocks) instead of O(rows on screen).
  const getItemKey = useCallback((i: number) => chat?.blocks[chat.visible[i]!]?.id ?? i, [chat]);
  const getScrollElement = useCallback(() => scroller.current, []);
  const estimateSize = useCallback(() => 80, []);
  const virt = useVirtualizer({ count, getScrollElement, estimateSize, overscan: 6, getItemKey });

  // The row at the top of the view and how far the view has scrolled into it: where the view must stay when
  // older rows are put in front.
  const anchor = useRef<{ key: unknown; into: number }>(undefined);
  const seenPrepended = useRef(0);
  const remember = useCallback(() => {
    const el = scroller.current;
    const top = el && virt.getVirtualItems().find((it) => it.end > el.scrollTop);
    anchor.current = el && top ? { key: top.key, into: el.scrollTop - top.start } : undefined;
  }, [virt]);

  // Within two screens of the top, the page before the oldest block is asked for (one at a time; the store
  // ignores repeats). Checked on scroll and whenever the chat changes, so a short page asks for the next.
  const wantOlder = useCallback(() => {
    const el = scroller.current;
    if (el && chat?.hasOlder && count > 0 && el.scrollTop < el.clientHeight * 2) void ollie.loadOlder();
  }, [chat, count]);

  const onScroll = useCallback(() => {
    const el = scroller.current;
    if (!el) return;
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
    stuck.current = atBottom;
    if (atBottom) followed.current = el.scrollTop;
    setShowJump(!atBottom);
    remember();
    wantOlder();
  }, [remember, wantOlder]);

  // A new agent starts at the bottom.
  useEffect(() => {
    stuck.current = true;
    followed.current = undefined;
    setShowJump(false);
    seenPrepended.current = chat?.prepended ?? 0;
    anchor.current = undefined;
  }, [chat]);

  // Stuck to the bottom: follow it whenever the content or its measured height changes (rows measured after
  // a jump change the total). Setting scrollTop directly costs one layout; the virtualizer's scrollToIndex
  // re-reads the scroll extent and retries over several frames, on every streamed chunk.
  // A search hit opened here: once its block has arrived, stop following the bottom and bring it into view.
  const shownHighlight = useRef<string>(undefined);
  useEffect(() => {
    if (!chat || !highlight || shownHighlight.current === highlight) return;
    const at = chat.visible.findIndex((i) => chat.blocks[i]!.id === highlight);
    if (at === -1) return;
    shownHighlight.current = highlight;
    stuck.current = false;
    setShowJump(true);
    virt.scrollToIndex(at, { align: 'center' });
  }, [chat, highlight, version, virt]);
  useEffect(() => {
    if (!highlight) shownHighlight.current = undefined;
  }, [highlight]);

  const total = virt.getTotalSize();
  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el || !chat) return;
    if (chat.prepended !== seenPrepended.current) {
      // Older rows went in front: scroll by their height, so the row that was at the top stays there. Rows
      // measured later (above the view) are kept in place by the virtualizer's own size-change adjustment.
      seenPrepended.current = chat.prepended;
      const a = anchor.current;
      const at = a === undefined ? -1 : virt.measurementsCache.findIndex((m) => m.key === a.key);
      if (a && at !== -1 && !stuck.current) el.scrollTop = virt.measurementsCache[at]!.start + a.into;
    }
    if (stuck.current && count > 0) {
      // Scrolled up since the view last followed the bottom, and the scroll event not handled yet (the
      // virtualizer re-rendered first, on the same event): the user left the bottom, and following it now
      // would undo that.
      const left = followed.current !== undefined && el.scrollTop < followed.current - 1;
      if (left && el.scrollHeight - el.scrollTop - el.clientHeight >= 40) {
        stuck.current = false;
        setShowJump(true);
      } else {
        el.scrollTop = el.scrollHeight;
        followed.current = el.scrollTop;
      }
    }
    remember();
  }, [version, count, total, chat, virt, remember]);

  useEffect(() => wantOlder(), [version, wantOlder]);

  if (!chat) return <div className="chat empty">Select an agent in the tree, or create one (Ctrl+Shift+N).</div>;
  const items = virt.getVirtualItems();
  return (
    <div className="chat-wrap">
      <div className="chat" ref={scroller} onScroll={onScroll} data-testid="chat">
        {count === 0 && <div className="empty">No messages yet. Write a prompt below.</div>}
        <div style={{ height: total, position: 'relative' }}>
          {items.map((it) => {
            const b = chat.blocks[chat.visible[it.index]!]!;
            return (
              <div
                key={it.key}
                data-index={it.index}
                ref={virt.measureElement}
                className={b.id === highlight ? 'row highlight' : 'row'}
                style={{ position: 'absolute', top: 0, left: 0, right: 0, transform: `translateY(${it.start}px)` }}
              >
                <BlockView block={b} />
              </div>
            );
          })}
        </div>
        <div className="sr-only" aria-live="polite" aria-atomic="true" data-testid="announce">
          {announce}
        </div>
        {ended && (
          <div className="ended">
            {endedHow
              ? `This agent ${endedHow === 'interrupted' ? 'was interrupted' : endedHow === 'killed' ? 'was killed' : 'finished'}; its history is read-only.`
              : 'The agent is gone; this is its final log.'}
          </div>
        )}
      </div>
      {showJump && (
        <button
          type="button"
          className="jump"
          onClick={() => {
            stuck.current = true;
            followed.current = undefined;
            virt.scrollToIndex(count - 1, { align: 'end' });
            setShowJump(false);
          }}
        >
          ↓ Latest
        </button>
      )}
    </div>
  );
}
