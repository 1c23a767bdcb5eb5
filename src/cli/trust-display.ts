/**
 * A project file as `ollie trust` shows it to the owner before asking. The file is the agent's to write, and the
 * owner trusts what they see: a carriage return (JSON and YAML whitespace) lets a later part of a line be drawn
 * over an earlier one, an escape sequence (a C1 CSI is valid inside a JSON string) can erase or recolour lines,
 * a bidi override reverses text. Every control or invisible character but newline and tab is therefore shown as
 * \r or \u{HEX}, and the size is said before the question, so a long file's hidden start is not taken for all.
 */
import { hiddenChar } from '../formats/escape.js';

export function trustDisplay(file: string, sha: string, bytes: Buffer): { text: string; question: string } {
  const body = bytes.toString('utf8');
  let shown = '';
  for (const c of body)
    shown +=
      c === '\n' || c === '\t' ? c : c === '\r' ? '\\r' : hiddenChar(c) ? `\\u{${c.codePointAt(0)!.toString(16)}}` : c;
  const lines = body.split('\n').length - (body.endsWith('\n') ? 1 : 0);
  const size = `${lines} line${lines === 1 ? '' : 's'}, ${bytes.length} bytes`;
  const marked = shown === body ? '' : '; control characters shown as \\r, \\u{HEX}';
  return {
    text: `${file} (SHA-256 ${sha}; ${size}${marked}):\n\n${shown}\n`,
    question: `Trust this file as shown (${size})? [y/N] `,
  };
}
