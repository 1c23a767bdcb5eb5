/** One model request: streamed into the chat log, retried on transient errors, shrunk and resent on overflow. */
import { ContextOverflowError, RateLimitError } from '../backend/errors.js';
import { retryDelay } from '../backend/retry.js';
import type { Backend, Message, ToolCall, ToolSpec } from '../backend/types.js';
import type { Agent } from './agent.js';
import { ContextBudgetError, errText, overflowFigures } from './errors.js';
import { describeParts, fit, windowKey, windowSize } from './fit.js';
import type { Runtime } from './runtime.js';
import { addUsage } from './stats.js';

/** Overflow errors one request may meet, each answered with a smaller request, before the turn gives up. */
export const MAX_OVERFLOWS = 4;

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** One model response, with our retry policy. Undefined when the turn was stopped. */
export async function respond(
  agent: Agent,
  backend: Backend,
  rt: Runtime,
  tools: ToolSpec[],
  signal: AbortSignal,
): Promise<{ text: string; reasoning: string; signature?: string; calls: ToolCall[] } | undefined> {
  let overflows = 0;
  const model = agent.cfg.model || backend.defaultModel;
  const params = { ...rt.profile.params, ...agent.cfg.params };
  let ceiling = Infinity;
  let refused: string | undefined;
  for (let attempt = 0; ; attempt++) {
    let textId: string | undefined;
    let reasonId: string | undefined;
    let text = '';
    let reasoning = '';
    let signature: string | undefined;
    const calls: ToolCall[] = [];
    const req = await fit(agent, rt, tools, params, signal, ceiling, refused);
    try {
      const messages: Message[] = [{ role: 'system', content: rt.system }, ...req.messages];
      let usageSeen = false;
      for await (const ev of backend.stream({ model, messages, tools, params, signal })) {
        switch (ev.type) {
          case 'text':
            textId ??= agent.log.begin('assistant');
            agent.log.delta(textId, ev.delta);
            text += ev.delta;
            break;
          case 'reasoning':
            if (ev.signature) signature = ev.signature;
            if (!ev.delta) break;
            reasonId ??= agent.log.begin('reasoning');
            agent.log.delta(reasonId, ev.delta);
            reasoning += ev.delta;
            break;
          case 'tool-call':
            calls.push(ev.call);
            break;
          case 'usage':
            usageSeen = true;
            addUsage(agent.stats, model, ev.usage);
            agent.correction.observe(ev.usage.inputTokens, req.raw);
            agent.stats.estimateFactor = agent.correction.factor;
            break;
          case 'warning':
            agent.log.add('info', ev.message, { name: 'window' });
            break;
          case 'finish':
            break;
        }
      }
      if (reasonId) agent.log.end(reasonId);
      if (textId) agent.log.end(textId);
      if (!usageSeen) agent.stats.requests++;
      return { text, reasoning, signature, calls };
    } catch (e) {
      if (reasonId) agent.log.end(reasonId);
      if (textId) agent.log.end(textId);
      if (signal.aborted) return undefined;
      if (e instanceof ContextOverflowError) {
        // Our estimate was low or the window is smaller than we were told: learn both from the error, and
        // the next attempt must be smaller than this one, whatever the estimate says.
        if (++overflows > MAX_OVERFLOWS)
          throw new ContextBudgetError(
            `the model refused ${overflows} requests in a row as too long, the last one ~${req.estimate} tokens (${describeParts(agent, req.parts)}); ${errText(e)}`,
          );
        const fig = overflowFigures(errText(e));
        agent.correction.overflow(req.raw, fig.actual);
        agent.stats.estimateFactor = agent.correction.factor;
        const window = await windowSize(agent);
        if (fig.limit && fig.limit < window) agent.learnedWindow = { key: windowKey(agent), n: fig.limit };
        ceiling = req.raw - 1;
        refused = `the model refused a request of ~${req.estimate} tokens as too long (${errText(e)})`;
        agent.log.add(
          'info',
          `The model refused the request as too long (${errText(e)}); sending a smaller one (under ~${agent.correction.apply(ceiling)} tokens).`,
          { name: 'overflow' },
        );
        attempt--;
        continue;
      }
      const delay = (agent.deps.retryDelay ?? retryDelay)(e, attempt);
      if (delay === null) throw e;
      const limited = e instanceof RateLimitError;
      agent.log.add(
        'retry',
        `${limited ? 'rate limited' : errText(e)}; retrying in ${(delay / 1000).toFixed(1)} s (attempt ${attempt + 2})`,
        {
          name: limited ? 'limitretry' : 'retry',
        },
      );
      try {
        await sleep(delay, signal);
      } catch {
        return undefined;
      }
    }
  }
}
