/**
 * The messages an agent sends to its model, appended to the store as each one completes. A compaction or a
 * `clear` replaces the working history by starting a new epoch; the old epoch stays in the store.
 */
import type { Message } from '../backend/types.js';
import type { AgentStore } from '../store/agents.js';

export class History {
  private msgs: Message[];
  private seq: number;
  private detached = false;

  constructor(
    private readonly store: AgentStore,
    private readonly agentId: string,
    private epochNo: number,
  ) {
    this.msgs = store.messages(agentId, epochNo).map((b) => JSON.parse(b) as Message);
    this.seq = store.nextMessageSeq(agentId);
  }

  get messages(): readonly Message[] {
    return this.msgs;
  }

  get epoch(): number {
    return this.epochNo;
  }

  get length(): number {
    return this.msgs.length;
  }

  /** Stops writing to the store (the agent is gone; its rows may already be deleted). */
  detach(): void {
    this.detached = true;
  }

  append(m: Message): void {
    if (!this.detached) this.store.addMessage(this.agentId, this.seq++, this.epochNo, JSON.stringify(m));
    this.msgs.push(m);
  }

  /** Starts a new epoch holding `messages` (empty for a clear). The previous epoch stays stored. */
  replace(messages: Message[]): void {
    const epoch = this.epochNo + 1;
    if (!this.detached) {
      this.store.addMessages(
        this.agentId,
        this.seq,
        epoch,
        messages.map((m) => JSON.stringify(m)),
      );
      this.store.setEpoch(this.agentId, epoch);
    }
    this.seq += messages.length;
    this.epochNo = epoch;
    this.msgs = [...messages];
  }

  /** Rough token count of the history (4 characters a token), for when no usage has been reported yet. */
  estimateTokens(): number {
    let chars = 0;
    for (const m of this.msgs) {
      chars += m.content.length;
      if (m.role === 'assistant') for (const c of m.toolCalls ?? []) chars += c.name.length + c.args.length;
    }
    return Math.ceil(chars / 4);
  }
}

/**
 * Makes a history safe to send after an interruption: every tool call gets a result (the provider APIs reject
 * a call without one). Returns the results it had to add.
 */
export function closeDanglingCalls(msgs: readonly Message[], note: string): Message[] {
  const answered = new Set<string>();
  for (const m of msgs) if (m.role === 'tool') answered.add(m.toolCallId);
  const added: Message[] = [];
  for (const m of msgs) {
    if (m.role !== 'assistant') continue;
    for (const c of m.toolCalls ?? []) {
      if (!answered.has(c.id))
        added.push({ role: 'tool', toolCallId: c.id, name: c.name, content: note, isError: true });
    }
  }
  return added;
}
