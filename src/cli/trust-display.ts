/**
 * A project file as `ollie trust` shows it to the owner before asking. The file, and the directories it lies in,
 * are the agent's to write and to name, and the owner trusts what they see: a carriage return (JSON and YAML
 * whitespace) lets a later part of a line be drawn over an earlier one, an escape sequence (a C1 CSI is valid
 * inside a JSON string; ESC anywhere in a directory's name) can erase, recolour or conceal lines, a bidi override
 * reverses text. Every control or invisible character but newline and tab (in the file) is therefore shown as \r
 * or \u{HEX}, long blank runs are counted rather than printed, and the size is said before the question, so a
 * long file's start, scrolled away, is not taken for all there is.
 */
import { hiddenChar } from '../formats/escape.js';

/** `text` with every control or invisible character but those in `keep` shown as \r or \u{HEX}. */
function visible(text: string, keep: string): string {
  let out = '';
  for (const c of text)
    out += keep.includes(c) ? c : c === '\r' ? '\\r' : hiddenChar(c) ? `\\u{${c.codePointAt(0)!.toString(16)}}` : c;
  return out;
}

export function trustDisplay(file: string, sha: string, bytes: Buffer): { text: string; question: string } {
  const body = bytes.toString('utf8');
  // Blank runs are said, not printed: a screen of empty lines (or a line of spaces that wraps into one) between
  // the agent's server and a harmless end would scroll the former out of sight above the question.
  const shown = visible(body, '\n\t')
    .replace(/[ \t]{64,}/g, (run) => `[${run.length} blanks]`)
    .replace(/\n(?:[ \t]*\n){3,}/g, (run) => `\n[${run.split('\n').length - 2} blank lines]\n`);
  const lines = body.split('\n').length - (body.endsWith('\n') ? 1 : 0);
  const size = `${lines} line${lines === 1 ? '' : 's'}, ${bytes.length} bytes`;
  const marked = shown === body ? '' : '; control characters shown as \\r, \\u{HEX}, blank runs counted';
  return {
    text: `${visible(file, '')} (SHA-256 ${sha}; ${size}${marked}):\n\n${shown}\n`,
    question: `Trust this file as shown (${size})? [y/N] `,
  };
}
