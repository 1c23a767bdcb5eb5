/** Terminal output as styled spans: React sets each span's text, so nothing a process printed is parsed as HTML. */
import { memo } from 'react';
import { AnsiText, segmentCss, type Segment } from '../lib/ansi.js';

/** `version` tells memo that segments (a mutable list, appended to in place) changed. */
export const AnsiSpans = memo(function AnsiSpans({ segments }: { segments: Segment[]; version?: number }) {
  return (
    <>
      {segments.map((s, i) => {
        const css = segmentCss(s.style);
        return Object.keys(css).length ? (
          <span key={i} style={css}>
            {s.text}
          </span>
        ) : (
          <span key={i}>{s.text}</span>
        );
      })}
    </>
  );
});

/** A finished piece of output (not streaming). */
export function Ansi({ text }: { text: string }) {
  const t = new AnsiText();
  t.push(text);
  return <AnsiSpans segments={t.segments} />;
}
