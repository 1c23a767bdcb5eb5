/**
 * The content formats of olliesrv's files, declared once. src/olliesrv/fs/spec.ts puts each on its Leaf (`format`)
 * and produces the files through it; the renderer, the HTTP gateway (JSON, OpenAPI), `o` and the tests read and
 * write through the same objects. Changing a declaration here changes every one of them.
 */
import { Commands, type CommandDecl } from './commands.js';
import { FormatError } from './format.js';
import { nextWord, quoteWord, splitWords } from './words.js';
import { EnvLines } from './env.js';
import { Events } from './events.js';
import type { Field } from './format.js';
import { KeyValues } from './keyvalues.js';
import { Records } from './records.js';
import { Json, JsonLines, Lines, OneLine, Status, Text } from './simple.js';

const f = (name: string, doc?: string, more: Partial<Field> = {}): Field => ({ name, ...(doc && { doc }), ...more });
const opt = (name: string, doc?: string, more: Partial<Field> = {}): Field => f(name, doc, { optional: true, ...more });
const int = (name: string, doc?: string): Field => f(name, doc, { type: 'integer' });

/** A model's context length, where the backend tells it. */
const contextLength = opt('context', 'the context length', { type: 'integer' });

export const BACKENDS = new Records('backends', [
  f('name', "the default backend's ends in *"),
  f('type'),
  f('url'),
  f('model', 'its default model'),
]);
export const MODELS = new Records('models', [
  f('backend'),
  opt('model'),
  contextLength,
  opt('error', 'why the backend could not be asked'),
]);
export const PROFILES = new Lines('agent profile names');
export const BYPASS_RULES = new Records(
  'bypassrules',
  [
    int('id'),
    f('tool'),
    f('kind', 'prefix or exact'),
    f('rule'),
    f('scope', 'global, or session NAME'),
    f('created', 'ISO 8601', { type: 'time' }),
  ],
  'Write "revoke ID" lines to remove rules.',
);
export const PROVIDERS = new Records('providers', [
  f('id'),
  f('label'),
  f('type', 'the backends.conf type'),
  opt('url', 'none when the user gives one'),
  opt('key_env', 'the variable its key usually is in'),
  f('key', 'needed or optional'),
]);
export const CHECKED_MODELS = new Records('check', [f('model'), contextLength]);
export const TRUST = new Records(
  'trust',
  [f('sha256'), f('path')],
  'Write "trust PATH [SHA256]" or "untrust PATH" lines (a SHA-256 trusts the file only if it still has those bytes).',
);
export const SEARCH_HITS = new Records(
  'search',
  [
    f('session'),
    f('agent'),
    f('block'),
    f('role'),
    f('snippet', 'the matched words in [brackets]'),
    f('agent_id'),
    opt('ended', 'how the agent ended; none while it lives'),
  ],
  'Write the words to find.',
);
export const SANDBOX = new Json('what the tool sandbox applies on this machine');
export const SESSION_IDX = new Records('session/idx', [
  f('id'),
  f('name'),
  f('paused', '', { type: 'boolean' }),
  f('connected', '1 while a tool server serves it', { type: 'boolean' }),
  opt('remote', 'none for this machine'),
  f('cwd'),
]);
export const AGENT_IDX = new Records('agent/idx', [
  f('session', 'session id'),
  f('id'),
  f('name'),
  opt('parent', 'parent agent id'),
  int('depth'),
  f('state'),
  opt('last', 'how the last turn ended: ok, error, stopped'),
]);
export const ENDED_IDX = new Records('ended/idx', [
  f('session', 'session id'),
  f('id'),
  f('name'),
  opt('parent', 'parent agent id'),
  int('depth'),
  f('ended', 'ms since the epoch', { type: 'integer' }),
  f('how', 'finished, killed or interrupted'),
  opt('last', 'how its last turn ended'),
]);
export const BYPASS = new Records(
  'bypass',
  [
    f('id'),
    f('agent', 'agent id'),
    f('tool'),
    f('cwd'),
    f('cmd', 'the command'),
    f('reason'),
    f('remember', 'what session or always would store: prefix, exact, or once when it can only be approved once'),
    f('rule', 'the rule stored (empty with once)'),
  ],
  'Write "ID approve|deny [once|session|always]".',
);
export const PROC_IDX = new Records('proc/idx', [
  int('pid'),
  f('tool'),
  f('status', 'running, or how it ended'),
  opt('exit', 'exit code; none while running'),
  f('args', 'its arguments (JSON)'),
]);

export const SESSION_NEW = new KeyValues(
  'session/new',
  [f('name'), f('cwd'), f('remote', '[user@]host[:port] or an ssh Host alias: its tools run there')],
  undefined,
  "Read back the new session's name.",
);
/** The generation parameters an agent takes at creation (agent/new) and shows and changes in `cfg`. */
const generation = (): Field[] => [
  f('temperature', '', { type: 'number' }),
  f('topP', '', { type: 'number' }),
  int('topK'),
  int('maxTokens'),
  int('seed'),
  int('thinkingBudget'),
  f('reasoningEffort'),
];
export const AGENT_NEW = new KeyValues('agent/new', [
  f('name'),
  f('cwd'),
  f('backend'),
  f('model'),
  f('agent', 'the profile'),
  f('parent'),
  f('prompt', 'last, may be unquoted: the rest of the request'),
  int('steps'),
  int('tokens'),
  ...generation(),
]);
export const CFG = new KeyValues('cfg', [
  f('backend'),
  f('model'),
  f('profile'),
  f('cwd'),
  ...generation(),
  f('stop', 'stop sequences, comma-separated'),
  int('maxSteps'),
  f('compactAt', 'a fraction of the window', { type: 'number' }),
]);
const n = (name: string, doc?: string): Field => f(name, doc, { type: 'number' });
export const STATS = new KeyValues(
  'stats',
  [
    int('input_tokens'),
    int('output_tokens'),
    int('cached_tokens'),
    int('cache_creation_tokens'),
    int('requests'),
    n('cost_last_turn', 'USD'),
    n('cost_session', 'USD'),
    int('context_estimate', "the next request, corrected by the provider's reports"),
    int('context_length', 'the window'),
    n('context_percent'),
    int('context_system'),
    int('context_tools'),
    int('context_history'),
    int('context_skills'),
    int('context_attachments'),
    n('estimate_factor'),
    int('subagents', 'finished sub-agents (removed; their caller pays)'),
    int('subagents_input_tokens'),
    int('subagents_output_tokens'),
    int('subagents_cached_tokens'),
    int('subagents_cache_creation_tokens'),
    int('subagents_requests'),
    n('subagents_cost'),
    n('cost_total', 'cost_session plus subagents_cost'),
  ],
  {
    pattern: /^subagent\.[^=\s]+$/,
    doc: 'one per sub-agent: "name=NAME input_tokens=… output_tokens=… cached_tokens=… requests=… cost=…" (each including its own sub-agents)',
  },
);
export const PROC_STAT = new KeyValues(
  'proc stat',
  [
    f('state', 'running or exited'),
    f('status', 'running, or how it ended'),
    int('runtime_ms'),
    f('tool'),
    f('exit', 'exit code, empty while running'),
    f('signal', 'the signal that ended it, if one did'),
    f('agent', 'agent id'),
    int('os_pid'),
    f('background', '', { type: 'boolean' }),
    f('bypassed', 'ran outside the sandbox', { type: 'boolean' }),
    f('tty', '1 in a pty', { type: 'boolean' }),
    int('output_bytes'),
    f('cmd', 'the command, as JSON'),
  ],
  { pattern: /^[a-z_]+$/, doc: 'what a newer tool server adds' },
);
export const ENV = new EnvLines('the session environment');

export const LOG = new JsonLines('chat log blocks', ['role', 'id', 'content'], ['name', 'format', 'partial']);
export const BLOCK = new Json('one chat log block');
export const QUEUE = new Json('the queued prompts, an array of strings');
export const GOAL_STATUS = new Status(['running', 'complete', 'blocked', 'error'], 'a summary');
export const TEXT = (doc: string): Text => new Text(doc);
export const VALUE = (doc: string): OneLine => new OneLine(doc);

const p1 = (name: string): Records => new Records(name, [f(name)]);
const none = new Records('none', []);
export const EVENTS = new Events([
  { topic: 'session.{session}.new', payload: p1('name') },
  { topic: 'session.{session}.rename', payload: new Records('rename', [f('old'), f('new')]) },
  { topic: 'session.{session}.kill', payload: none },
  { topic: 'session.{session}.pause', payload: none },
  { topic: 'session.{session}.resume', payload: none },
  { topic: 'session.{session}.goal', payload: p1('status') },
  { topic: 'session.{session}.agent.{agent}.new', payload: p1('name') },
  { topic: 'session.{session}.agent.{agent}.rename', payload: new Records('rename', [f('old'), f('new')]) },
  { topic: 'session.{session}.agent.{agent}.kill', payload: none },
  { topic: 'session.{session}.agent.{agent}.state', payload: p1('state') },
  {
    topic: 'session.{session}.agent.{agent}.turn',
    payload: new Records('turn', [f('how', 'ok, stopped or error'), opt('error', 'why, when it is error')]),
  },
  { topic: 'session.{session}.agent.{agent}.peer.add', payload: p1('peer') },
  { topic: 'session.{session}.agent.{agent}.peer.del', payload: p1('peer') },
  { topic: 'session.{session}.agent.{agent}.peer.message', payload: p1('from') },
  {
    topic: 'session.{session}.agent.{agent}.bypass.request',
    payload: new Records('bypass.request', [f('id'), f('cmd'), f('cwd'), f('tool')]),
  },
  {
    topic: 'session.{session}.agent.{agent}.bypass.resolved',
    payload: new Records('bypass.resolved', [f('id'), f('decision', 'approved, denied or cancelled')]),
  },
  {
    topic: 'ollie.overflow',
    payload: new Records('overflow', [int('dropped', 'events this subscriber lost: re-read the idx files')]),
  },
]);

const cmd = (
  name: string,
  help: string,
  args: CommandDecl['args'] = [],
  agent?: CommandDecl['agent'],
  reply?: CommandDecl['reply'],
): CommandDecl => ({ name, args, help, ...(agent && { agent }), ...(reply && { reply }) });

/** Replies of agent commands. */
export const TOOL_LIST = new Records('tools', [
  f('name'),
  f('scope', 'read, write or global'),
  f('description', 'its first line'),
]);
export const MODEL_LIST = new Records('models', [f('model'), contextLength]);
export const QUEUE_LIST = new Records('queue', [int('n', 'its place, from 1'), f('prompt')]);
export const COMMAND_LIST = new Records('help', [f('usage'), f('help')]);
export const CONTEXT = new KeyValues('context', [
  int('messages'),
  int('epoch'),
  int('estimate', 'the next request'),
  int('length', 'the window'),
  n('percent'),
  int('system'),
  int('tools'),
  int('history'),
  int('skills'),
  int('attachments'),
]);
const a = (name: string, optional = false) => ({ name, ...(optional && { optional }) });

/** An agent's ctl, and `/cmd` typed as its prompt. `agent` says what agents may give themselves and their sub-agents. */
export const AGENT_CTL = new Commands('agent ctl', [
  cmd('stop', 'cancel the running turn', [], 'always'),
  cmd('compact', 'compact the history now', [], 'always'),
  cmd('clear', 'clear the history', [], 'never'),
  cmd('restore', 'undo the last clear or compaction', [], 'never'),
  cmd('inject', 'add text to the running turn', [a('TEXT')], 'always'),
  cmd('agent', 'show or switch the profile (history cleared)', [a('PROFILE', true)], 'bare'),
  cmd('model', 'show or switch the model', [a('NAME', true)], 'bare'),
  cmd('models', "list the backend's models", [], 'bare', MODEL_LIST),
  cmd('backend', 'show or switch the backend', [a('NAME', true)], 'bare'),
  cmd('tools', 'list loaded tools', [], 'always', TOOL_LIST),
  cmd('skills', 'list skills, or show one', [a('NAME', true)], 'always'),
  cmd('tool_load', 'load a tool', [a('NAME')], 'always'),
  cmd('cwd', 'show or change the working directory', [a('PATH', true)], 'bare'),
  cmd('name', "show or change the agent's name", [a('NEWNAME', true)], 'bare'),
  cmd('systemprompt', 'show the system prompt', [], 'always'),
  cmd('context', 'show the context and its parts', [], 'always', CONTEXT),
  cmd('usage', 'token usage and cost', [], 'always', STATS),
  cmd('peeradd', 'link a peer agent', [a('NAME')], 'never'),
  cmd('peerdel', 'unlink a peer agent', [a('NAME')], 'never'),
  cmd('peers', 'list peers', [], 'always'),
  cmd('queue', 'list queued prompts', [], 'always', QUEUE_LIST),
  cmd(
    'mcp',
    "list the MCP servers' prompts, or run one as a prompt",
    [a('SERVER PROMPT [NAME=VALUE…]', true)],
    'never',
  ),
  cmd(
    'rewind',
    'restore the files (all: and the conversation) to checkpoint ID; force or keep settle conflicts',
    [a('ID [files|all] [force|keep]')],
    'never',
  ),
  cmd('checkpoint', "gc: apply the retention policy to the agent's checkpoints now", [a('gc')], 'never'),
  cmd('help', 'list the commands', [], 'always', COMMAND_LIST),
]);

export const SESSION_CTL = new Commands('session ctl', [
  cmd('kill', 'kill the session'),
  cmd('save', 'checkpoint to disk'),
  cmd('pause', 'pause its agents'),
  cmd('resume', 'resume its agents'),
  cmd('workflow', 'show or set the session workflow', [a('NAME', true)]),
  cmd('hooks', 'show, or turn on or off, the lifecycle hooks of this session', [a('on|off', true)]),
  cmd('remote', 'show or set the host its tools run on (- for this machine)', [a('HOST|-', true)]),
]);

/** What a `bypass` write takes after the request's ID: "ID approve|deny [once|session|always]". */
export const BYPASS_DECISION = new Commands('bypass decision, after the ID', [
  cmd('approve', 'run it outside the sandbox; session or always also stores the rule', [
    a('once|session|always', true),
  ]),
  cmd('deny', 'refuse it', [a('once|session|always', true)]),
]);

/** The line a client writes to `bypass`. */
export function bypassDecisionLine(id: string, decision: 'approve' | 'deny', remember?: string): string {
  return `${quoteWord(id)} ${BYPASS_DECISION.format(decision, remember ? [remember] : [])}`;
}

/** A `bypass` write: the ID (a shell word), then the decision through BYPASS_DECISION. */
export function parseBypassDecision(text: string): { id: string; decision: 'approve' | 'deny'; remember?: string } {
  const usage = 'expected: ID approve|deny [once|session|always]';
  let head;
  try {
    head = nextWord(text, 0);
  } catch (e) {
    throw new FormatError(`bypass: ${(e as Error).message}; ${usage}`);
  }
  if (!head) throw new FormatError(`bypass: an empty request; ${usage}`);
  let c;
  try {
    c = BYPASS_DECISION.parse(text.slice(head.end));
  } catch (e) {
    throw new FormatError(`bypass: ${(e as Error).message}; ${usage}`);
  }
  // An unquoted last argument would take the rest of the line: words beyond the declared ones are refused.
  if (splitWords(text).length !== 2 + c.args.length) throw new FormatError(`bypass: too many words; ${usage}`);
  // What is remembered is checked where rules are made (the tool server), which says why one is refused.
  const remember = c.args[0];
  return { id: head.word, decision: c.name as 'approve' | 'deny', ...(remember !== undefined && { remember }) };
}

/** What `bypassrules` takes: one command a line. */
export const BYPASS_RULES_WRITE = new Commands('bypassrules', [
  cmd('revoke', 'remove the remembered rule ID', [a('ID')]),
]);

/** A `log.from` request: where the chat log starts (N at most 10000). */
export const LOG_FROM = new Commands('log.from', [
  cmd('tail', 'the last N blocks, then live', [a('N')]),
  cmd('before', 'the N blocks before BLOCKID, then EOF', [a('BLOCKID'), a('N')]),
  cmd('after', 'every block after BLOCKID, then live', [a('BLOCKID')]),
]);

/** The header lines of a `generate` or `complete` request: key=value lines, a blank line, then the text. */
export const ONESHOT_HEADERS = new KeyValues(
  'generate/complete headers',
  [
    f('backend'),
    f('model'),
    f('system', 'replaces the default system prompt'),
    f('suffix', 'complete: the text after the cursor'),
    n('temperature'),
    n('topP'),
    int('topK'),
    int('maxTokens'),
    int('seed'),
  ],
  undefined,
  'Then a blank line and the text; a request whose first line is not a header is all text.',
);

/** A `config/check` or `config/backend` request. */
export const BACKEND_SETUP = new KeyValues(
  'config/backend',
  [
    f('provider', 'openai, anthropic, openrouter, ollama, gemini, copilot or compatible'),
    f('name', 'the section (config/backend)'),
    f('url'),
    f('key'),
    f('key_env', 'the environment variable holding the key'),
    f('model'),
    f('default', 'yes or no (config/backend)'),
  ],
  undefined,
  'Lines starting with # are comments.',
);

export const ROOT_CTL = new Commands('ctl', [cmd('reload', 're-read backends.conf')]);

export const PROC_CTL = new Commands('proc ctl', [
  cmd('signal', 'send a signal', [a('N')]),
  cmd('term', 'SIGTERM, then SIGKILL after a grace period'),
  cmd('kill', 'SIGKILL'),
  cmd('resize', "a tty tool's terminal size", [a('COLS'), a('ROWS')]),
  cmd('dismiss', 'remove it from the list'),
]);

// Hooks, MCP servers, remote hosts and checkpoints.
export const SSH_HOSTS = new Lines('the Host aliases of the ssh config (hosts a session can run its tools on)');
export const HOOK_RUNS = new Records('hooks', [
  f('time', 'ms since the epoch', { type: 'integer' }),
  f('agent', 'agent id'),
  f('event'),
  opt('tool', 'none outside tool events'),
  f('exit', 'its exit status, timeout, killed or notrun'),
  int('ms', 'how long it ran'),
  f('command'),
  f('output'),
]);
/** What names a checkpoint, in its index line and its info file alike. */
const checkpointHead = [f('id'), int('turn'), f('time', 'ISO 8601', { type: 'time' })];
export const CHECKPOINT_IDX = new Records('checkpoint/idx', [
  ...checkpointHead,
  int('changed', 'files its round changed (under a directory tracked as a whole: each file changed in it)'),
  int('bytes', 'bytes it added to the store'),
]);
export const CHECKPOINT_INFO = new KeyValues('checkpoint info', [
  ...checkpointHead,
  f('kind', 'round or rewind'),
  int('changed'),
  int('bytes'),
  f('done', '1 once its round ended', { type: 'boolean' }),
  f('target', 'the checkpoint a rewind went to'),
  f('note', 'what a rewind did'),
  int('reviewed', 'files marked reviewed'),
]);
export const CHECKPOINT_FILES = new Records('checkpoint files', [
  f('change', 'A added, D deleted, M modified, T type changed'),
  f(
    'path',
    'relative to the working directory when inside it; a directory tracked as a whole is one line: "DIR/ (whole: N files changed, M bytes)"',
  ),
]);
export const REVIEWED = new Lines('paths marked reviewed; write PATH or +PATH to mark, -PATH to unmark');
