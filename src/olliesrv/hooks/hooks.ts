/**
 * The daemon's lifecycle hooks: which commands an event runs (config.ts), running them (runner.ts, sandboxed),
 * and what their exits mean — Claude Code's semantics, so its hooks port:
 *
 * - exit 0: go on. Plain stdout of a SessionStart or UserPrompt hook is context for the model; stdout that is a
 *   JSON object is read as Claude Code's hook output (decision, reason, continue/stopReason, systemMessage,
 *   hookSpecificOutput: permissionDecision, permissionDecisionReason, updatedInput, additionalContext).
 * - exit 2: block; stderr (else stdout) is the reason, told to the model and to the user.
 * - any other exit, a timeout, a hook that could not run: an error shown to the user; the agent goes on, unless
 *   the entry says `"failClosed": true` (then it blocks like exit 2).
 *
 * Every run is recorded: a line in the session's `hooks` file (the last RECORDS_KEPT, in memory), an event
 * `session.S.agent.A.hook` on the bus, and (by the caller, agent.ts's call sites) a block in the chat. Hooks
 * can be turned off per session by the owner (`session/S/ctl`: `hooks off`).
 */
import { HOOK_RUNS } from '../../formats/olliesrv.js';
import { readFileSync, renameSync } from 'node:fs';
import { dirname } from 'node:path';
import { privateDir, writePrivateFile } from '../../platform/private.js';
import type { EventBus } from '../event/bus.js';
import type { PromptCommandOptions } from '../agent/promptcmd.js';
import { loadHooks, matching, type HookCommand, type HookEvent } from './config.js';
import { runHook, type HookRun } from './runner.js';
import type { Launcher } from '../../platform/launcher.js';
import { ownConfinedLauncher } from '../auth/confined.js';

/** Lines kept per session in its `hooks` file. */
export const RECORDS_KEPT = 200;
/** Characters of a hook's output kept in its record line and its chat block. */
const OUTPUT_SHOWN = 2000;

/** Who fires an event: the agent, where it works, its session. */
export interface HookSite {
  sessionId: string;
  agentId: string;
  agentName: string;
  cwd: string;
  /** The directory whose sandbox policy (and project hooks file) applies. */
  root: string;
}

/** One hook that ran (or was to run). */
export interface HookRecord {
  at: number;
  agent: string;
  event: HookEvent;
  /** The tool it ran for ('' for events without one). */
  tool: string;
  command: string;
  /** `0`, `2`, … the exit status; `timeout`, `killed`, `notrun`. */
  exit: string;
  ms: number;
  /** stdout and stderr as shown (cut). */
  output: string;
  /** Why it did not run or was stopped. */
  why?: string;
}

export interface HookOutcome {
  records: HookRecord[];
  /**
   * Set when a hook blocked (exit 2, "decision": "block", "continue": false, "permissionDecision": "deny"), or one
   * that fails closed failed.
   */
  block?: string;
  /** Set when every block came from a hook that fails closed and failed, none from a hook's decision. */
  onlyFailures?: boolean;
  /** PreToolUse's "ask": a person must approve the call. */
  ask?: string;
  /** PreToolUse's new arguments. */
  updatedInput?: Record<string, unknown>;
  /** Text for the model (SessionStart/UserPrompt stdout, additionalContext). */
  context: string[];
  /** What the user is told besides the records: systemMessage, problems with the hooks files. */
  notes: string[];
}

export interface HooksOptions {
  configDir: string;
  /** The sandbox's dirs and the daemon's environment (the same as prompt commands'). */
  run: PromptCommandOptions;
  bus: EventBus;
  log: (m: string) => void;
  /** Where the sessions with hooks turned off are kept across restarts (one id per line, 0600); none: in memory. */
  offFile?: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const oneLine = (t: string): string =>
  t.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\t/g, '\\t').replace(/\r/g, '\\r');

export class Hooks {
  private readonly off = new Set<string>();
  private readonly records = new Map<string, HookRecord[]>();
  /** Problems with the hooks files already told, per session (each is told once, not at every tool call). */
  private readonly told = new Map<string, Set<string>>();
  /** Starts sandboxed hooks contained, as toolsrv's tools (hooks/contained.ts); started on first use. */
  private launcher: Launcher | undefined | null = null;

  constructor(private readonly o: HooksOptions) {
    if (!o.offFile) return;
    try {
      for (const id of readFileSync(o.offFile, 'utf8').split('\n')) if (id.trim()) this.off.add(id.trim());
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        o.log(`hooks: cannot read ${o.offFile}: ${(e as Error).message}; hooks are on in every session`);
    }
  }

  private saveOff(): void {
    const file = this.o.offFile;
    if (!file) return;
    try {
      privateDir(dirname(file), 'the data directory');
      const tmp = `${file}.${process.pid}.tmp`;
      writePrivateFile(tmp, [...this.off].map((id) => `${id}\n`).join(''));
      renameSync(tmp, file);
    } catch (e) {
      this.o.log(`hooks: cannot save ${file}: ${(e as Error).message}; the switch holds until the daemon stops`);
    }
  }

  /** Ends the spawner, and with it any hook still running; a hook fired later does not run. */
  close(): void {
    this.launcher?.close();
    this.launcher = undefined;
  }

  /** A launcher of the hooks' own (closing it ends their processes), only where its spawner runs. */
  private contained(): Launcher | undefined {
    if (this.launcher === null) {
      const l = ownConfinedLauncher();
      this.launcher = l.native ? l : undefined;
    }
    return this.launcher;
  }

  enabled(sessionId: string): boolean {
    return !this.off.has(sessionId);
  }

  /** `ctl hooks on|off` (the owner's only: see fs/spec.ts). */
  setEnabled(sessionId: string, on: boolean): void {
    if (on) this.off.delete(sessionId);
    else this.off.add(sessionId);
    this.saveOff();
    this.o.bus.publish(`session.${sessionId}.hooks`, on ? 'on' : 'off');
  }

  /** The session's `hooks` file: one line per run, oldest first (the format is in fs/spec.ts's doc). */
  lines(sessionId: string): string {
    return HOOK_RUNS.format(
      (this.records.get(sessionId) ?? []).map((r) => ({
        time: r.at,
        agent: r.agent,
        event: r.event,
        tool: r.tool || null,
        exit: r.exit,
        ms: r.ms,
        command: r.command,
        output: r.output,
      })),
    );
  }

  forget(sessionId: string): void {
    if (this.off.delete(sessionId)) this.saveOff();
    this.records.delete(sessionId);
    this.told.delete(sessionId);
  }

  /**
   * Runs the hooks of `event` (those matching `tool`, for tool events) side by side, each with `input` plus the
   * common fields on stdin, and combines what they say.
   */
  async fire(event: HookEvent, site: HookSite, input: Record<string, unknown>, tool?: string): Promise<HookOutcome> {
    const out: HookOutcome = { records: [], context: [], notes: [] };
    if (!this.enabled(site.sessionId)) return out;
    const loaded = loadHooks(this.o.configDir, site.root);
    const told = this.told.get(site.sessionId) ?? new Set<string>();
    this.told.set(site.sessionId, told);
    // A problem fixed and back later is told again.
    for (const p of told) if (!loaded.problems.includes(p)) told.delete(p);
    for (const p of loaded.problems) {
      if (told.has(p)) continue;
      told.add(p);
      this.o.log(`hooks: ${p}`);
      out.notes.push(`hooks: ${p}`);
    }
    // A trusted project hooks file the agent changed or removed may have held the owner's guard: no tool call runs
    // without it (as no tool runs under a tampered project sandbox file).
    if (loaded.tampered && event === 'PreToolUse') {
      out.block = loaded.tampered;
      return out;
    }
    const cmds: HookCommand[] = loaded.tables.flatMap((t) => matching(t, event, tool));
    if (!cmds.length) return out;
    const stdin = JSON.stringify({
      session_id: site.sessionId,
      transcript_path: '',
      cwd: site.cwd,
      hook_event_name: event === 'UserPrompt' ? 'UserPromptSubmit' : event,
      ollie_event: event,
      agent_id: site.agentId,
      agent_name: site.agentName,
      ...input,
    });
    const vars = {
      OLLIE_SESSION_ID: site.sessionId,
      OLLIE_UNAME: site.agentId,
      OLLIE_AGENT_NAME: site.agentName,
      OLLIE_HOOK_EVENT: event,
      OLLIE_PROJECT_DIR: site.root,
      CLAUDE_PROJECT_DIR: site.root,
    };
    const runs = await Promise.all(
      cmds.map((c) =>
        runHook(
          { command: c.command, timeoutSec: c.timeoutSec, cwd: site.cwd, policyRoot: site.root, input: stdin, vars },
          this.o.run,
          this.contained(),
        ),
      ),
    );
    const blocks: string[] = [];
    let failures = 0;
    const asks: string[] = [];
    runs.forEach((r, i) => {
      const c = cmds[i]!;
      const rec = this.record(event, site, tool ?? '', c, r);
      out.records.push(rec);
      const what = `${event} hook ${JSON.stringify(c.command)}`;
      // A hook that did not run, was killed or failed is told to the user by its record (the caller shows it),
      // and blocks only when its entry says it fails closed.
      if (r.notRun || r.cut || (r.code !== 0 && r.code !== 2)) {
        if (c.failClosed) {
          blocks.push(`${what} failed (${rec.why ?? `exit ${rec.exit}`}) and fails closed`);
          failures++;
        }
        return;
      }
      if (r.code === 2) return void blocks.push(r.stderr.trim() || r.stdout.trim() || `blocked by ${what}`);
      const json = parseOutput(r.stdout);
      if (!json) {
        if ((event === 'SessionStart' || event === 'UserPrompt') && r.stdout.trim()) out.context.push(r.stdout.trim());
        return;
      }
      if (typeof json.systemMessage === 'string') out.notes.push(json.systemMessage);
      if (json.continue === false) blocks.push(str(json.stopReason) ?? str(json.reason) ?? `stopped by ${what}`);
      if (json.decision === 'block') blocks.push(str(json.reason) ?? `blocked by ${what}`);
      const h = isObject(json.hookSpecificOutput) ? json.hookSpecificOutput : {};
      const ctx = str(h.additionalContext);
      if (ctx) out.context.push(ctx);
      const reason = str(h.permissionDecisionReason) ?? str(json.reason);
      if (h.permissionDecision === 'deny') blocks.push(reason ?? `denied by ${what}`);
      else if (h.permissionDecision === 'ask') asks.push(reason ?? what);
      if (h.updatedInput !== undefined) {
        if (isObject(h.updatedInput)) out.updatedInput = { ...out.updatedInput, ...h.updatedInput };
        else out.notes.push(`${what}: hookSpecificOutput.updatedInput must be an object; ignored`);
      }
    });
    if (blocks.length) {
      out.block = blocks.join('\n');
      if (failures === blocks.length) out.onlyFailures = true;
    } else if (asks.length) out.ask = asks.join('; ');
    return out;
  }

  private record(event: HookEvent, site: HookSite, tool: string, c: HookCommand, r: HookRun): HookRecord {
    const exit = r.notRun
      ? 'notrun'
      : r.cut
        ? r.cut.startsWith('timed out')
          ? 'timeout'
          : 'killed'
        : String(r.code ?? 'killed');
    const output = `${r.stdout}${r.stdout && r.stderr ? '\n' : ''}${r.stderr || r.notRun || ''}`
      .trim()
      .slice(0, OUTPUT_SHOWN);
    const why = r.notRun ?? r.cut;
    const rec: HookRecord = {
      at: Date.now(),
      agent: site.agentId,
      event,
      tool,
      command: c.command,
      exit,
      ms: r.ms,
      output,
      ...(why && { why }),
    };
    const list = this.records.get(site.sessionId) ?? [];
    list.push(rec);
    if (list.length > RECORDS_KEPT) list.splice(0, list.length - RECORDS_KEPT);
    this.records.set(site.sessionId, list);
    this.o.bus.publish(
      `session.${site.sessionId}.agent.${site.agentId}.hook`,
      `${event}\t${tool || '-'}\t${exit}\t${r.ms}\t${oneLine(c.command)}`,
    );
    return rec;
  }
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() ? v : undefined);

/** stdout as Claude Code's JSON hook output, when it is a JSON object. */
function parseOutput(stdout: string): Record<string, unknown> | undefined {
  const t = stdout.trim();
  if (!t.startsWith('{')) return undefined;
  try {
    const v = JSON.parse(t) as unknown;
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}
