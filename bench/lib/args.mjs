// The command line of a bench script.
import { parseArgs } from 'node:util';

/**
 * Reads `--name value` options whose defaults are given: a number makes an option read as a number, a boolean a
 * flag, a string or `undefined` (no default) a text option. An unknown option, or a number option given what is not
 * a number, throws naming it.
 */
export function benchArgs(defaults) {
  const options = Object.fromEntries(
    Object.entries(defaults).map(([name, d]) => [
      name,
      typeof d === 'boolean'
        ? { type: 'boolean', default: d }
        : { type: 'string', ...(d !== undefined && { default: String(d) }) },
    ]),
  );
  const { values } = parseArgs({ options });
  for (const [name, d] of Object.entries(defaults)) {
    if (typeof d !== 'number') continue;
    const n = Number(values[name]);
    if (!Number.isFinite(n)) throw new Error(`--${name} takes a number, not ${JSON.stringify(values[name])}`);
    values[name] = n;
  }
  return values;
}
