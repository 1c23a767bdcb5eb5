/**
 * Content formats, declared once: pure code with no Node or browser imports, so the daemon, the renderer, the
 * gateway and the CLIs share it. See olliesrv.ts for olliesrv's files.
 */
export * from './format.js';
export * from './escape.js';
export * from './words.js';
export * from './records.js';
export * from './keyvalues.js';
export * from './simple.js';
export * from './env.js';
export * from './events.js';
export * from './commands.js';
export type AnyFormat =
  | import('./records.js').Records
  | import('./keyvalues.js').KeyValues
  | import('./simple.js').Json
  | import('./simple.js').JsonLines
  | import('./simple.js').Lines
  | import('./simple.js').Status
  | import('./simple.js').Text
  | import('./simple.js').OneLine
  | import('./env.js').EnvLines
  | import('./events.js').Events
  | import('./commands.js').Commands;
