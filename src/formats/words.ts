/**
 * The one quoting mechanism of the namespace's requests (ctl commands, key=value requests and files): shell words.
 * A word is written bare when it is plain, else in single quotes (a quote inside as '\''); read back, single
 * quotes keep everything literally (newlines and tabs included), double quotes honour \" \\ \$ \` escapes, and a
 * backslash outside quotes takes the next character as it is. store/shellwords.ts reads the same quoting strictly,
 * as bash would, for the commands a bypass rule covers.
 */
export class WordsError extends Error {
  override name = 'WordsError';
}

const PLAIN = /^[A-Za-z0-9_\-./,:=+@%^]+$/;
/** Words that bash reads as keywords when they come first. */
export const SHELL_KEYWORDS: ReadonlySet<string> = new Set([
  'if',
  'then',
  'else',
  'elif',
  'fi',
  'case',
  'esac',
  'for',
  'select',
  'while',
  'until',
  'do',
  'done',
  'function',
  'time',
  'coproc',
  'in',
  '[[',
  ']]',
]);

/** One word, quoted so that splitWords (and a shell) reads it back as it is. */
export function quoteWord(w: string): string {
  return PLAIN.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`;
}

/** Words back to a command line that a shell reads as the same words (single quotes where needed). */
export function quoteWords(words: readonly string[]): string {
  // A quoted first word is a command name even when it looks like an assignment or a keyword.
  const plain = (w: string, i: number): boolean =>
    PLAIN.test(w) && !(i === 0 && (w.includes('=') || SHELL_KEYWORDS.has(w)));
  return words.map((w, i) => (plain(w, i) ? w : `'${w.replace(/'/g, "'\\''")}'`)).join(' ');
}

const SPACE = /\s/;

/** The word starting at or after `from` (leading whitespace skipped): its text, where it ends, whether it was quoted. */
export function nextWord(text: string, from: number): { word: string; end: number; quoted: boolean } | undefined {
  let i = from;
  while (i < text.length && SPACE.test(text[i]!)) i++;
  if (i >= text.length) return undefined;
  let word = '';
  let quoted = false;
  while (i < text.length && !SPACE.test(text[i]!)) {
    const c = text[i]!;
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new WordsError(`unterminated single quote at character ${i + 1}`);
      word += text.slice(i + 1, end);
      quoted = true;
      i = end + 1;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text[j] === '\\' && j + 1 < text.length && '"\\$`'.includes(text[j + 1]!)) j++;
        word += text[j];
      }
      if (j >= text.length) throw new WordsError(`unterminated double quote at character ${i + 1}`);
      quoted = true;
      i = j + 1;
    } else if (c === '\\') {
      if (i + 1 >= text.length) throw new WordsError(`a backslash at the end (character ${i + 1})`);
      word += text[i + 1];
      quoted = true;
      i += 2;
    } else {
      word += c;
      i++;
    }
  }
  return { word, end: i, quoted };
}

/** The words of `text`, read as quoteWord writes them. */
export function splitWords(text: string): string[] {
  const out: string[] = [];
  for (let w = nextWord(text, 0); w; w = nextWord(text, w.end)) out.push(w.word);
  return out;
}
