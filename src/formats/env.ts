/** `KEY=value` lines as a person writes an environment: the value is the rest of the line; # comments and blank lines skipped. */
import { FormatError, type DeclaredFormat } from './format.js';

export class EnvLines implements DeclaredFormat {
  readonly kind = 'env';
  constructor(readonly doc: string) {}
  format(vars: Readonly<Record<string, string>>): string {
    let out = '';
    for (const [k, v] of Object.entries(vars)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k))
        throw new FormatError(`environment: ${JSON.stringify(k)} is not a variable name`);
      if (v.includes('\n')) throw new FormatError(`environment: the value of ${k} holds a newline`);
      out += `${k}=${v}\n`;
    }
    return out;
  }
  parse(text: string): Record<string, string> {
    const out: Record<string, string> = {};
    text.split('\n').forEach((l, i) => {
      if (!l.trim() || l.trimStart().startsWith('#')) return;
      const eq = l.indexOf('=');
      if (eq < 1) throw new FormatError(`environment line ${i + 1}: expected KEY=value, got ${JSON.stringify(l)}`);
      out[l.slice(0, eq).trim()] = l.slice(eq + 1);
    });
    return out;
  }
  describe(): string {
    return `KEY=value lines (the value is the rest of the line; # comments): ${this.doc}`;
  }
}
