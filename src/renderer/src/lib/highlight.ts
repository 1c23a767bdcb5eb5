/**
 * Syntax highlighting with shiki, loaded lazily (the core, the JS regex engine — no WebAssembly, so the CSP
 * needs no 'wasm-unsafe-eval' — and each grammar on first use) and run in idle time, one block at a time, so
 * streaming never waits for it. Output is tokens, rendered as React spans: no HTML strings are injected.
 */
import type { HighlighterCore, ThemedToken } from 'shiki/core';

type Loader = () => Promise<{ default: unknown }>;

/** The languages we highlight, by the names (and aliases) a `format` or a code fence uses. */
const LANGS: Record<string, Loader> = {
  typescript: () => import('shiki/langs/typescript.mjs'),
  javascript: () => import('shiki/langs/javascript.mjs'),
  tsx: () => import('shiki/langs/tsx.mjs'),
  json: () => import('shiki/langs/json.mjs'),
  shellscript: () => import('shiki/langs/shellscript.mjs'),
  python: () => import('shiki/langs/python.mjs'),
  go: () => import('shiki/langs/go.mjs'),
  rust: () => import('shiki/langs/rust.mjs'),
  c: () => import('shiki/langs/c.mjs'),
  cpp: () => import('shiki/langs/cpp.mjs'),
  markdown: () => import('shiki/langs/markdown.mjs'),
  yaml: () => import('shiki/langs/yaml.mjs'),
  html: () => import('shiki/langs/html.mjs'),
  css: () => import('shiki/langs/css.mjs'),
  diff: () => import('shiki/langs/diff.mjs'),
  sql: () => import('shiki/langs/sql.mjs'),
};
const ALIASES: Record<string, string> = {
  ts: 'typescript',
  js: 'javascript',
  mjs: 'javascript',
  jsx: 'tsx',
  sh: 'shellscript',
  bash: 'shellscript',
  shell: 'shellscript',
  zsh: 'shellscript',
  py: 'python',
  rs: 'rust',
  h: 'c',
  hpp: 'cpp',
  'c++': 'cpp',
  md: 'markdown',
  yml: 'yaml',
  patch: 'diff',
};

export function languageOf(format: string | undefined): string | undefined {
  if (!format) return undefined;
  const f = format.toLowerCase().trim();
  const lang = ALIASES[f] ?? f;
  return LANGS[lang] ? lang : undefined;
}

let highlighter: Promise<HighlighterCore> | undefined;
const loaded = new Map<string, Promise<void>>();
const THEME = 'github-dark';

function core(): Promise<HighlighterCore> {
  highlighter ??= (async () => {
    const [{ createHighlighterCore }, { createJavaScriptRegexEngine }, theme] = await Promise.all([
      import('shiki/core'),
      import('shiki/engine/javascript'),
      import('shiki/themes/github-dark.mjs'),
    ]);
    return createHighlighterCore({ themes: [theme.default], langs: [], engine: createJavaScriptRegexEngine() });
  })();
  return highlighter;
}

/** Highlighting more than this is not worth the time: the plain text stays. */
const MAX_CHARS = 200_000;

const idle = (): Promise<void> =>
  new Promise((r) =>
    typeof requestIdleCallback === 'function' ? requestIdleCallback(() => r(), { timeout: 500 }) : setTimeout(r, 0),
  );

/** One highlight at a time, each after the browser is idle. */
let chain: Promise<unknown> = Promise.resolve();
const cache = new Map<string, ThemedToken[][]>();

export function highlight(code: string, format: string | undefined): Promise<ThemedToken[][] | undefined> {
  const lang = languageOf(format);
  if (!lang || code.length > MAX_CHARS) return Promise.resolve(undefined);
  const key = `${lang}\0${code}`;
  const hit = cache.get(key);
  if (hit) return Promise.resolve(hit);
  const job = chain.then(async () => {
    await idle();
    const h = await core();
    let l = loaded.get(lang);
    if (!l) {
      l = LANGS[lang]!().then((m) => h.loadLanguage(m.default as Parameters<HighlighterCore['loadLanguage']>[0]));
      loaded.set(lang, l);
    }
    await l;
    const tokens = h.codeToTokensBase(code, { lang, theme: THEME });
    if (cache.size > 200) cache.clear();
    cache.set(key, tokens);
    return tokens;
  });
  chain = job.catch(() => undefined);
  return job.catch(() => undefined);
}
