import { useState } from 'react';

/** Copies `text` (or what it returns, at the click) to the clipboard; says so for a moment. */
export function CopyButton({ text, label = 'Copy' }: { text: string | (() => string); label?: string }) {
  const [done, setDone] = useState(false);
  const copy = (): void => {
    void navigator.clipboard?.writeText(typeof text === 'function' ? text() : text).then(
      () => {
        setDone(true);
        setTimeout(() => setDone(false), 1200);
      },
      () => undefined,
    );
  };
  return (
    <button type="button" className="copy" title="Copy to clipboard" onClick={copy}>
      {done ? 'Copied' : label}
    </button>
  );
}
