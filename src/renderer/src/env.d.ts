/** What the preload script exposes on `window` (see src/preload/index.ts). */
interface Window {
  readonly ollie?: { readonly version: string };
}
