/**
 * A strict reading of a shell command line as bash (`bash -c`, what the shell tool runs) would split it into
 * words, for remembered bypass approvals. It understands only a simple command: plain words, single quotes,
 * double quotes without expansions, and backslash escapes. Anything else — an operator (`;`, `|`, `&`, `<`,
 * `>`, parentheses, a newline), an expansion (`$`, backticks, globs, braces, `~`), a comment, a variable
 * assignment, a keyword, or a character that displays as something else (controls, invisible formatting) —
 * is refused with what and where, never guessed at: a rule that covers a command must know exactly what it runs.
 */

import { hiddenChar } from '../../formats/escape.js';
import { quoteWords, SHELL_KEYWORDS } from '../../formats/words.js';

// The quoting is the namespace's one mechanism (formats/words.ts): what quoteWords writes, shellWords reads.
export { hiddenChar, quoteWords };

export type Words = { words: string[] } | { refused: string };

/** Characters that end or start something other than a plain word when unquoted. */
const OPERATORS = new Set([';', '&', '|', '<', '>', '(', ')', '\n']);
const EXPANSIONS = new Set(['$', '`', '*', '?', '[', ']', '{', '}', '~', '#', '!', '\r']);
const KEYWORDS = SHELL_KEYWORDS;

function describe(c: string): string {
  const cp = c.codePointAt(0)!;
  if (c === '\n') return 'a newline';
  if (c === '\t') return 'a tab';
  return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

export function shellWords(cmd: string): Words {
  const words: string[] = [];
  const chars = [...cmd];
  let word: string | undefined;
  let firstRaw = '';
  const at = (i: number): string => `at character ${i + 1}`;
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === ' ' || c === '\t') {
      if (word !== undefined) words.push(word);
      word = undefined;
      continue;
    }
    if (words.length === 0) firstRaw += c;
    if (OPERATORS.has(c)) return { refused: `shell operator ${c === '\n' ? 'newline' : JSON.stringify(c)} ${at(i)}` };
    if (EXPANSIONS.has(c)) return { refused: `shell expansion or special character ${JSON.stringify(c)} ${at(i)}` };
    if (hiddenChar(c)) return { refused: `${describe(c)} ${at(i)}` };
    if (c === "'") {
      const end = chars.indexOf("'", i + 1);
      if (end < 0) return { refused: `unterminated single quote ${at(i)}` };
      const inner = chars.slice(i + 1, end);
      const bad = inner.findIndex(hiddenChar);
      if (bad >= 0) return { refused: `${describe(inner[bad]!)} ${at(i + 1 + bad)}` };
      word = (word ?? '') + inner.join('');
      if (words.length === 0) firstRaw += inner.join('') + "'";
      i = end;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      for (; j < chars.length && chars[j] !== '"'; j++) {
        const d = chars[j]!;
        if (d === '$' || d === '`' || d === '\\' || d === '!')
          return { refused: `${JSON.stringify(d)} inside double quotes ${at(j)} (expansion or escape)` };
        if (hiddenChar(d)) return { refused: `${describe(d)} ${at(j)}` };
      }
      if (j >= chars.length) return { refused: `unterminated double quote ${at(i)}` };
      const inner = chars.slice(i + 1, j).join('');
      word = (word ?? '') + inner;
      if (words.length === 0) firstRaw += `${inner}"`;
      i = j;
      continue;
    }
    if (c === '\\') {
      const d = chars[i + 1];
      if (d === undefined) return { refused: `a backslash at the end ${at(i)}` };
      if (d === '\n') return { refused: `a line continuation ${at(i)}` };
      if (hiddenChar(d)) return { refused: `${describe(d)} ${at(i + 1)}` };
      word = (word ?? '') + d;
      if (words.length === 0) firstRaw += d;
      i++;
      continue;
    }
    word = (word ?? '') + c;
  }
  if (word !== undefined) words.push(word);
  if (!words.length) return { refused: 'an empty command' };
  // `NAME=value cmd` (or `NAME+=value cmd`, which appends) sets a variable for the command (LD_PRELOAD=… is enough
  // to change what anything runs).
  if (/^[A-Za-z_][A-Za-z0-9_]*\+?=/.test(firstRaw))
    return { refused: `a variable assignment ${JSON.stringify(words[0])} before the command` };
  if (KEYWORDS.has(words[0]!)) return { refused: `the shell keyword ${JSON.stringify(words[0])}` };
  return { words };
}
