/** Settings → Appearance: the theme, the system's by default. */
import { useState } from 'react';
import { savedTheme, setTheme, type Theme } from '../lib/theme.js';

export function Appearance() {
  const [theme, set] = useState<Theme>(savedTheme);
  return (
    <section className="cfg-file" aria-labelledby="appearance-h">
      <h3 id="appearance-h">Appearance</h3>
      <label className="inline">
        Theme
        <select
          value={theme}
          onChange={(e) => {
            const t = e.target.value as Theme;
            set(t);
            setTheme(t);
          }}
        >
          <option value="system">System (follows the light/dark setting)</option>
          <option value="light">Light</option>
          <option value="dark">Dark</option>
        </select>
      </label>
    </section>
  );
}
