/**
 * What the preload script exposes on `window` (see src/preload/index.ts). Absent in headless web mode, where
 * the renderer talks 9P over a WebSocket instead.
 */
interface OllieBridge {
  readonly version: string;
  /**
   * Asks the main process for a fresh 9P MessagePort (to this machine's daemon, or to `ssh!HOST[!SOCK]`'s); it
   * arrives as a window "message" event, and so does `{ ollie9pError }` if that daemon could not be reached.
   */
  connect(to?: string): void;
  /** Menu and notification actions from the main process ("new-session", "open-agent sid aid", …). */
  onCommand(listener: (command: string) => void): void;
}

interface Window {
  readonly ollie?: OllieBridge;
}
