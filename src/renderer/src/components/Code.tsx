/** A code or output block: plain text at once, highlighted when shiki gets to it (idle time, lazily). */
import { memo, useEffect, useState } from 'react';
import type { ThemedToken } from 'shiki/core';
import { highlight, languageOf } from '../lib/highlight.js';
import { CopyButton } from './CopyButton.js';

export const Code = memo(function Code({
  code,
  format,
  streaming,
}: {
  code: string;
  format?: string;
  streaming?: boolean;
}) {
  const [tokens, setTokens] = useState<ThemedToken[][] | undefined>();
  const lang = languageOf(format);
  useEffect(() => {
    // While a block streams its text changes every frame: highlight only once it is final.
    if (!lang || streaming) return;
    let live = true;
    void highlight(code, lang).then((t) => live && setTokens(t));
    return () => {
      live = false;
    };
  }, [code, lang, streaming]);
  return (
    <div className="code">
      <CopyButton text={code} />
      <pre data-lang={lang ?? 'text'}>
        {tokens
          ? tokens.map((line, i) => (
              <span key={i} className="line">
                {line.map((t, j) => (
                  <span key={j} style={{ color: t.color }}>
                    {t.content}
                  </span>
                ))}
                {'\n'}
              </span>
            ))
          : code}
      </pre>
    </div>
  );
});
