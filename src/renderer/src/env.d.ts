/**
 * What the preload script exposes on `window` (see src/preload/index.ts). Absent in headless web mode, where
 * the renderer talks 9P over a WebSocket instead.
 */
interface OllieBridge {
  readonly version: string;
  /** Asks the main process for a fresh 9P MessagePort; it arrives as a window "message" event. */
  connect(): void;
  /** Menu and notification actions from the main process ("new-session", "open-agent sid aid", …). */
  onCommand(listener: (command: string) => void): void;
}

interface Window {
  readonly ollie?: OllieBridge;
}
