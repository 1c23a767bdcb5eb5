/**
 * Light or dark. By default the page follows the system (prefers-color-scheme, in styles.css); Settings can pin
 * one, kept in this browser's localStorage (a choice of this window, not of olliesrv) and applied as
 * data-theme on <html>, which the stylesheet's variables key on.
 */
export type Theme = 'system' | 'light' | 'dark';

const KEY = 'ollie.theme';

export function savedTheme(): Theme {
  try {
    const v = localStorage.getItem(KEY);
    return v === 'light' || v === 'dark' ? v : 'system';
  } catch {
    // Storage refused (a locked-down profile): the system's choice.
    return 'system';
  }
}

export function applyTheme(t: Theme): void {
  if (t === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
}

export function setTheme(t: Theme): void {
  try {
    if (t === 'system') localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, t);
  } catch {
    // Not kept across reloads then; applied all the same.
  }
  applyTheme(t);
}
