/**
 * Control commands (`ctl` files, and `/cmd` typed as a prompt): a command table declared once, with each
 * command's arguments, what it answers and who may give it. Arguments are shell words (words.ts), quoted by
 * `format`; the last argument may also be given unquoted, taking the rest of the line as written (`inject fix the
 * tests`, `cwd /a dir with spaces`): it is read as one word only when the rest of the line is exactly one word.
 */
import { FormatError, type DeclaredFormat } from './format.js';
import { nextWord, quoteWord } from './words.js';

export interface Arg {
  readonly name: string;
  readonly optional?: boolean;
}

/** What an agent (as opposed to the owner or a workflow) may do with a command: always, only without arguments (the read-only form), never. */
export type AgentRule = 'always' | 'bare' | 'never';

export interface CommandDecl {
  readonly name: string;
  readonly args: readonly Arg[];
  readonly help: string;
  /** Only on agent commands. */
  readonly agent?: AgentRule;
  /** What the command answers, when it is more than a line of text. */
  readonly reply?: DeclaredFormat;
}

export interface ParsedCommand {
  name: string;
  args: string[];
}

export class Commands implements DeclaredFormat {
  readonly kind = 'ctl';
  constructor(
    readonly name: string,
    readonly commands: CommandDecl[],
  ) {}

  get(name: string): CommandDecl | undefined {
    return this.commands.find((c) => c.name === name);
  }

  names(): string[] {
    return this.commands.map((c) => c.name);
  }

  usage(c: CommandDecl): string {
    return [c.name, ...c.args.map((a) => (a.optional ? `[${a.name}]` : a.name))].join(' ');
  }

  /** The command line for `name` with `args`, quoted; the request written to ctl. */
  format(name: string, args: readonly string[] = []): string {
    const c = this.get(name);
    if (!c) throw new FormatError(`${this.name}: no command ${JSON.stringify(name)}`);
    this.check(c, args);
    return [name, ...args.map(quoteWord)].join(' ');
  }

  /**
   * A command line from a shell's argv (`o ctl inject fix the tests`): words beyond the declared arguments join
   * the last one, as the daemon reads an unquoted last argument.
   */
  fromArgv(words: readonly string[]): string {
    const [name = '', ...rest] = words;
    const c = this.get(name);
    if (!c)
      throw new FormatError(`unknown command ${JSON.stringify(name)}; known commands: ${this.names().join(', ')}`);
    const n = c.args.length;
    const args = n > 0 && rest.length > n ? [...rest.slice(0, n - 1), rest.slice(n - 1).join(' ')] : rest;
    return this.format(name, args);
  }

  private check(c: CommandDecl, args: readonly string[]): void {
    if (args.length > c.args.length)
      throw new FormatError(c.args.length ? `usage: ${this.usage(c)}` : `${c.name} takes no arguments`);
    const need = c.args.filter((a) => !a.optional).length;
    if (args.length < need) throw new FormatError(`usage: ${this.usage(c)}`);
  }

  /** A request as written: the command and its arguments; an unknown command or a wrong count is an error naming it. */
  parse(text: string): ParsedCommand {
    const t = text.trim();
    const head = nextWord(t, 0);
    if (!head) throw new FormatError(`${this.name}: an empty command; known commands: ${this.names().join(', ')}`);
    const c = this.get(head.word);
    if (!c)
      throw new FormatError(`unknown command ${JSON.stringify(head.word)}; known commands: ${this.names().join(', ')}`);
    const args: string[] = [];
    let at = head.end;
    for (let i = 0; i < c.args.length; i++) {
      const rest = t.slice(at).trim();
      if (!rest) break;
      if (i === c.args.length - 1) {
        args.push(lastArg(rest));
        at = t.length;
        break;
      }
      const w = nextWord(t, at)!;
      args.push(w.word);
      at = w.end;
    }
    if (t.slice(at).trim())
      throw new FormatError(c.args.length ? `usage: ${this.usage(c)}` : `${c.name} takes no arguments`);
    this.check(c, args);
    return { name: c.name, args };
  }

  describe(): string {
    return `commands, arguments as shell words: ${this.commands.map((c) => this.usage(c)).join('; ')}.${this.commands
      .filter((c) => c.reply)
      .map((c) => ` ${c.name} answers ${c.reply!.describe()}`)
      .join('')}`;
  }
}

/** The last argument: one word when the rest of the line reads as exactly one, else the rest as written. */
function lastArg(rest: string): string {
  try {
    const w = nextWord(rest, 0);
    if (w && !rest.slice(w.end).trim()) return w.word;
  } catch {
    // An unbalanced quote in free text (`inject don't`): the text as written.
  }
  return rest;
}
