/**
 * What the agent's `ctl` commands do. Their names, arguments and who may give them are declared once
 * (formats/olliesrv.ts AGENT_CTL, which clients complete from); writing `cmd args` to ctl and typing `/cmd args` as a
 * prompt are the same thing (fs/spec.ts dispatchAgentCommand). Each command returns the text read back from ctl.
 */
import { realpathSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import type { Agent } from './agent.js';
import type { AgentDeps } from './deps.js';
import { renderStats } from './stats.js';
import { MCP_COMMAND_USAGE, mcpAlias, runMcpCommand } from '../mcp/prompts.js';
import { FormatError } from '../../formats/format.js';
import { AGENT_CTL, COMMAND_LIST, CONTEXT, MODEL_LIST, QUEUE_LIST, TOOL_LIST } from '../../formats/olliesrv.js';

export class CommandError extends Error {
  override name = 'CommandError';
}

type Command = { usage: string; run: (a: Agent, args: string, deps: AgentDeps) => string | Promise<string> };

const line = (s: string): string => (s.endsWith('\n') ? s : `${s}\n`);

function needArg(cmd: string, args: string): string {
  if (!args) throw new CommandError(`usage: ${COMMANDS[cmd]!.usage}`);
  return args;
}

function noArg(cmd: string, args: string): void {
  if (args) throw new CommandError(`${cmd} takes no arguments`);
}

export const COMMANDS: Record<string, Command> = {
  stop: { usage: 'stop', run: (a, args) => (noArg('stop', args), a.stop() ? 'stopping\n' : 'not running\n') },
  compact: { usage: 'compact', run: (a, args) => (noArg('compact', args), a.compact()) },
  clear: { usage: 'clear', run: (a, args) => (noArg('clear', args), a.clear(), 'cleared\n') },
  restore: { usage: 'restore', run: (a, args) => (noArg('restore', args), a.restore()) },
  inject: {
    usage: 'inject TEXT',
    run: (a, args) => (a.inject(needArg('inject', args)), a.busy ? 'injected\n' : 'injected (used by the next turn)\n'),
  },
  agent: {
    usage: 'agent [PROFILE]',
    run: async (a, args, d) => {
      if (!args) return line(`${a.cfg.profile}\nprofiles: ${d.profiles.names().join(' ')}`);
      await a.switchProfile(args);
      return `profile ${args}\n`;
    },
  },
  model: {
    usage: 'model [NAME]',
    run: (a, args) => {
      if (!args) {
        // First the backend: an agent whose backend is gone moves to the default one, and drops its old model.
        const b = a.backend();
        return line(a.cfg.model || b.defaultModel);
      }
      a.cfg.model = args;
      a.saveCfg();
      return `model ${args}\n`;
    },
  },
  models: {
    usage: 'models',
    run: async (a, args) => {
      noArg('models', args);
      const list = await a.backend().models();
      return MODEL_LIST.format(list.map((m) => ({ model: m.id, context: m.contextLength || null })));
    },
  },
  backend: {
    usage: 'backend [NAME]',
    run: (a, args, d) => {
      if (!args) return line(`${a.cfg.backend}\nbackends: ${d.backends.names().join(' ')}`);
      if (a.busy) throw new CommandError('the agent is running; stop it first');
      d.backends.get(args);
      a.cfg.backend = args;
      a.cfg.model = '';
      a.saveCfg();
      return `backend ${args}\n`;
    },
  },
  tools: {
    usage: 'tools',
    run: async (a, args) => {
      noArg('tools', args);
      const tools = await a.tools();
      return TOOL_LIST.format(
        tools.map((t) => ({ name: t.name, scope: t.scope, description: t.description.split('\n')[0] ?? '' })),
      );
    },
  },
  skills: {
    usage: 'skills [NAME]',
    run: (_a, args, d) => {
      if (!d.skills) throw new CommandError('skills are not available in this daemon');
      return d.skills.command(args);
    },
  },
  tool_load: {
    usage: 'tool_load NAME',
    run: async (a, args) => (await a.loadTool(needArg('tool_load', args)), `loaded ${args}\n`),
  },
  cwd: {
    usage: 'cwd [PATH]',
    run: async (a, args) => {
      if (!args) return line(a.cfg.cwd);
      const dir = isAbsolute(args) ? args : resolve(a.cfg.cwd, args);
      let ok = false;
      try {
        ok = statSync(dir).isDirectory();
      } catch {
        // reported below
      }
      if (!ok) throw new CommandError(`${dir} is not an existing directory`);
      // Kept resolved: the sandbox refuses a working directory that a symlink redirects later.
      const real = realpathSync(dir);
      await a.setCwd(real);
      return line(real);
    },
  },
  name: { usage: 'name [NEWNAME]', run: (a, args, d) => (args ? (d.rename(a, args), line(args)) : line(a.name)) },
  systemprompt: { usage: 'systemprompt', run: (a, args) => (noArg('systemprompt', args), a.systemPrompt()) },
  context: {
    usage: 'context',
    run: async (a, args) => {
      noArg('context', args);
      const len = await a.contextLength();
      const est = a.contextEstimate();
      const p = a.stats.context!;
      return CONTEXT.format({
        messages: a.history.length,
        epoch: a.history.epoch,
        estimate: est,
        length: len,
        percent: ((100 * est) / len).toFixed(1),
        system: p.system,
        tools: p.tools,
        history: p.history,
        skills: p.skills,
        attachments: p.attachments,
      });
    },
  },
  usage: {
    usage: 'usage',
    run: async (a, args) => (noArg('usage', args), renderStats(a.stats, a.contextEstimate(), await a.contextLength())),
  },
  peeradd: {
    usage: 'peeradd NAME',
    run: (a, args, d) => (d.peers.add(a, needArg('peeradd', args)), `peer ${args} added\n`),
  },
  peerdel: {
    usage: 'peerdel NAME',
    run: (a, args, d) => (d.peers.del(a, needArg('peerdel', args)), `peer ${args} removed\n`),
  },
  peers: {
    usage: 'peers',
    run: (a, args, d) => (
      noArg('peers', args),
      d.peers
        .names(a)
        .map((n) => `${n}\n`)
        .join('')
    ),
  },
  queue: {
    usage: 'queue',
    run: (a, args) => (noArg('queue', args), QUEUE_LIST.format(a.queue.map((prompt, i) => ({ n: i + 1, prompt })))),
  },
  mcp: { usage: MCP_COMMAND_USAGE, run: runMcpCommand },
  rewind: {
    usage: 'rewind ID [files|all] [force|keep]',
    run: (a, args, d) => {
      if (!d.checkpoints) throw new CommandError('checkpoints are off in this daemon');
      return d.checkpoints.rewind(a, needArg('rewind', args));
    },
  },
  checkpoint: {
    usage: 'checkpoint gc',
    run: (_a, args, d) => {
      if (!d.checkpoints) throw new CommandError('checkpoints are off in this daemon');
      if (args !== 'gc') throw new CommandError('usage: checkpoint gc');
      return d.checkpoints.gc();
    },
  },
  help: {
    usage: 'help',
    run: () => COMMAND_LIST.format(AGENT_CTL.commands.map((c) => ({ usage: AGENT_CTL.usage(c), help: c.help }))),
  },
};

/** Runs a command as written: read through the declared table (arguments unquoted), then run by this one. */
export async function runCommand(a: Agent, text: string, deps: AgentDeps): Promise<string> {
  const t = text.trim();
  const sp = t.search(/\s/);
  const alias = mcpAlias(sp === -1 ? t : t.slice(0, sp), sp === -1 ? '' : t.slice(sp).trim());
  if (alias !== undefined) return runMcpCommand(a, alias, deps);
  let parsed;
  try {
    parsed = AGENT_CTL.parse(text);
  } catch (e) {
    if (e instanceof FormatError) throw new CommandError(e.message);
    throw e;
  }
  const c = COMMANDS[parsed.name];
  if (!c) throw new CommandError(`command ${parsed.name} is declared but this daemon has no handler for it`);
  return c.run(a, parsed.args[0] ?? '', deps);
}
