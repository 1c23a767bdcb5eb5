/** The window's size, position and maximized state, remembered across starts (a small JSON file). */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { app, screen, type BrowserWindow, type Rectangle } from 'electron';

interface Saved {
  bounds: Rectangle;
  maximized: boolean;
}

const file = (): string => join(app.getPath('userData'), 'window-state.json');
const DEFAULT: Saved = { bounds: { x: 0, y: 0, width: 1200, height: 800 }, maximized: false };

/** The saved state, if it still fits on a connected display (monitors come and go). */
export function loadWindowState(): Saved & { placed: boolean } {
  try {
    const s = JSON.parse(readFileSync(file(), 'utf8')) as Saved;
    const b = s.bounds;
    if (![b.x, b.y, b.width, b.height].every(Number.isFinite) || b.width < 400 || b.height < 300)
      throw new Error('bad bounds');
    const area = screen.getDisplayMatching(b).workArea;
    const visible =
      b.x < area.x + area.width - 50 &&
      b.x + b.width > area.x + 50 &&
      b.y >= area.y - 10 &&
      b.y < area.y + area.height - 50;
    return { ...s, placed: visible };
  } catch {
    return { ...DEFAULT, placed: false };
  }
}

/** Saves the state whenever the window moves or resizes (debounced) and when it closes. */
export function trackWindowState(win: BrowserWindow): void {
  let timer: NodeJS.Timeout | undefined;
  const save = (): void => {
    if (win.isDestroyed()) return;
    const s: Saved = {
      bounds: win.isMaximized() || win.isMinimized() ? win.getNormalBounds() : win.getBounds(),
      maximized: win.isMaximized(),
    };
    try {
      writeFileSync(file(), JSON.stringify(s));
    } catch {
      // Not worth an error dialog: the next start uses the default size.
    }
  };
  const later = (): void => {
    clearTimeout(timer);
    timer = setTimeout(save, 400);
  };
  for (const e of ['resize', 'move', 'maximize', 'unmaximize'] as const) win.on(e as 'resize', later);
  win.on('close', () => {
    clearTimeout(timer);
    save();
  });
}
