/**
 * The processes olliesrv starts to act for agents and workflows (toolsrv, workflows, prompt commands). Whatever
 * descends from one of them is never the owner on the Unix socket, whatever its uid (principals.ts): a tool
 * that gets a Unix socket (a policy with `network.unix`, an approved bypass) still reaches the namespace only as
 * its agent.
 */
import type { ChildProcess } from 'node:child_process';
import { Launcher } from '../../platform/launcher.js';

const live = new Set<number>();

/** Registers `child` until it exits. Call right after spawning, before it can run anything. */
export function confine(child: ChildProcess): void {
  const pid = child.pid;
  if (pid === undefined) return;
  live.add(pid);
  child.once('exit', () => live.delete(pid));
}

export function confinedPids(): Iterable<number> {
  return live;
}

let launcher: Launcher | undefined;

/**
 * The launcher of olliesrv's own launches (workflows, prompt commands): every process it starts itself (the
 * spawner, or a fallback's process) is confined, and so is all that descends from it.
 */
export function confinedLauncher(): Launcher {
  return (launcher ??= Launcher.create({ adopt: confine }));
}

/** A launcher like confinedLauncher's that its user closes (and with it the processes it started). */
export function ownConfinedLauncher(): Launcher {
  return Launcher.create({ adopt: confine });
}
