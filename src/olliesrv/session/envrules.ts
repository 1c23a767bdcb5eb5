/**
 * Which variables a session environment (`session/S/env`) may set. Its values reach tool processes, and through
 * an approved bypass (or --yolo) processes that run outside the sandbox; so a variable the daemon or toolsrv use
 * themselves, or one that makes a program load or run something else than it was asked to, is refused.
 */

interface Rule {
  /** Exact names, or prefixes ending in `*`. */
  names: string[];
  why: string;
}

const RULES: Rule[] = [
  {
    names: ['OLLIE_*'],
    why: 'OLLIE_* variables are set by the daemon and toolsrv themselves (allowed: the workflow parameter OLLIE_PANEL)',
  },
  {
    names: [
      'LD_*',
      'GCONV_PATH',
      'GETCONF_DIR',
      'HOSTALIASES',
      'LOCPATH',
      'MALLOC_TRACE',
      'NIS_PATH',
      'NLSPATH',
      'RESOLV_HOST_CONF',
    ],
    why: 'it makes the dynamic loader or the C library load other code or files (the variables glibc drops for setuid programs)',
  },
  {
    names: [
      'NODE_OPTIONS',
      'NODE_PATH',
      'NODE_EXTRA_CA_CERTS',
      'NODE_TLS_REJECT_UNAUTHORIZED',
      'NODE_REPL_EXTERNAL_MODULE',
      'ELECTRON_RUN_AS_NODE',
    ],
    why: 'it makes Node load other code or trust other certificates (Ollie itself and its tools run on Node)',
  },
  {
    names: [
      'BASH_ENV',
      'ENV',
      'PROMPT_COMMAND',
      'SHELLOPTS',
      'BASHOPTS',
      'PS4',
      'IFS',
      'ZDOTDIR',
      'BASH_FUNC_*',
      'SSH_CLIENT',
      'SSH2_CLIENT',
      'SSH_CONNECTION',
    ],
    // Exported functions (BASH_FUNC_name%%) replace commands; Debian's bash reads ~/.bashrc when it thinks ssh ran it.
    why: 'it makes a shell run code at startup or parse commands differently',
  },
  {
    names: [
      'MAKEFLAGS',
      'MFLAGS',
      'GNUMAKEFLAGS',
      'npm_config_*',
      'NPM_CONFIG_*',
      'RUSTC_WRAPPER',
      'RUSTC',
      'CARGO_BUILD_RUSTC_WRAPPER',
      'LESSOPEN',
      'LESSCLOSE',
    ],
    why: 'it makes a build tool, package manager or pager run another program',
  },
  {
    names: [
      'PYTHONSTARTUP',
      'PYTHONPATH',
      'PYTHONHOME',
      'PERL5OPT',
      'PERL5LIB',
      'PERLLIB',
      'PERL5DB',
      'RUBYOPT',
      'RUBYLIB',
      'JAVA_TOOL_OPTIONS',
      '_JAVA_OPTIONS',
      'JDK_JAVA_OPTIONS',
    ],
    why: 'it makes an interpreter load code at startup',
  },
  { names: ['TMPDIR'], why: "TMPDIR is set by toolsrv to the session's private tmp" },
];

/** GIT_* variables that only say who commits: every other one can run a program or read other configuration. */
const GIT_ALLOWED = new Set([
  'GIT_AUTHOR_NAME',
  'GIT_AUTHOR_EMAIL',
  'GIT_AUTHOR_DATE',
  'GIT_COMMITTER_NAME',
  'GIT_COMMITTER_EMAIL',
  'GIT_COMMITTER_DATE',
]);

/**
 * Workflow parameters read from the session environment by the workflows themselves (data/workflows), not by the
 * daemon or toolsrv: exceptions to the OLLIE_* rule.
 */
const OLLIE_ALLOWED = new Set(['OLLIE_PANEL']);

const matches = (name: string, pattern: string): boolean =>
  pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern;

/**
 * Why `name` may not be set in a session environment, or undefined when it may. PATH and HOME may be set: they
 * reach the tools only (toolsrv puts its tool directories first on PATH; the daemon, toolsrv and prompt commands
 * use their own).
 */
export function envRefusal(name: string): string | undefined {
  if (name.startsWith('GIT_') && !GIT_ALLOWED.has(name)) {
    return `GIT_* variables can make git run programs or read other configuration (allowed: ${[...GIT_ALLOWED].join(', ')})`;
  }
  if (OLLIE_ALLOWED.has(name)) return undefined;
  for (const r of RULES) if (r.names.some((p) => matches(name, p))) return r.why;
  return undefined;
}

/** The error text for a refused variable: names it, the rule, and that nothing was stored. */
export function envRefusalMessage(name: string, why: string, where: string): string {
  return `${where}: ${name} may not be set in a session environment: ${why}; nothing was changed`;
}
