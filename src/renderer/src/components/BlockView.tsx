/** One chat block, by role. Memoized on the block object: a streaming chunk re-renders only its own block. */
import { memo, useState } from 'react';
import { callView, isLong, looksLikeDiff, prettyArgs, type Block } from '../lib/chatlog.js';
import { parseProcInterrupt, type ProcInterrupt } from '../lib/parse.js';
import { useStore } from '../lib/store.js';
import { Ansi } from './Ansi.js';
import { Code } from './Code.js';
import { CopyButton } from './CopyButton.js';
import { Markdown } from './Markdown.js';

function Diff({ text }: { text: string }) {
  return (
    <div className="code diff">
      <CopyButton text={text} />
      <pre>
        {text.split('\n').map((l, i) => {
          const cls =
            l.startsWith('+++') || l.startsWith('---')
              ? 'file'
              : l.startsWith('+')
                ? 'add'
                : l.startsWith('-')
                  ? 'del'
                  : l.startsWith('@@')
                    ? 'hunk'
                    : '';
          return (
            <span key={i} className={cls}>
              {l}
            </span>
          );
        })}
      </pre>
    </div>
  );
}

/** The arguments besides the main one, small: `key=value`, wrapped. */
function Rest({ rest }: { rest: [string, string][] }) {
  if (rest.length === 0) return null;
  return (
    <div className="call-rest">
      {rest.map(([k, v]) => (
        <span key={k} className="arg">
          <span className="k">{k}</span>=<span className="v">{v}</span>
        </span>
      ))}
    </div>
  );
}

/** A tool call as its tool reads: a shell command, a file's path, an edit's diff; raw JSON only when all else fails. */
function Call({ block }: { block: Block }) {
  const [open, setOpen] = useState(false);
  const v = block.partial ? undefined : callView(block.name, block.content);
  if (!v) return <Code code={prettyArgs(block.content)} format="json" streaming={block.partial} />;
  switch (v.kind) {
    case 'shell':
      return (
        <div className="call-view" data-view="shell">
          <pre className="cmd">
            <span className="prompt-sign" aria-hidden="true">
              ${' '}
            </span>
            {v.command}
          </pre>
          <Rest rest={v.rest} />
        </div>
      );
    case 'edit':
      return (
        <div className="call-view" data-view="edit">
          <code className="path">{v.path}</code>
          <Diff text={v.diff} />
          <Rest rest={v.rest} />
        </div>
      );
    case 'path':
      return (
        <div className="call-view" data-view="path">
          <code className="path">{v.path}</code>
          <Rest rest={v.rest} />
          {v.content !== undefined && (
            <>
              <button type="button" className="toggle" aria-expanded={open} onClick={() => setOpen(!open)}>
                {open ? '▾ hide content' : `▸ content (${v.content.split('\n').length} lines)`}
              </button>
              {open && <Code code={v.content} />}
            </>
          )}
        </div>
      );
    default:
      return (
        <div className="call-view" data-view="args">
          <Rest rest={v.rest} />
        </div>
      );
  }
}

/** Errors, retries and stalls: one line that opens to the whole text, so that five retries do not fill the screen. */
function Compact({ block, label }: { block: Block; label: string }) {
  const [open, setOpen] = useState(false);
  const first = block.content.split('\n')[0] ?? '';
  return (
    <div className={`block compact role-${block.role}`} data-role={block.role} data-id={block.id}>
      <button type="button" className="compact-line" aria-expanded={open} onClick={() => setOpen(!open)}>
        <span className="who">{label}</span>
        {block.name && block.name !== block.role && block.name !== label.toLowerCase() && (
          <span className="tool-name">{block.name}</span>
        )}
        <span className="first">{first}</span>
        <span className="twist" aria-hidden="true">
          {open ? '▾' : '▸'}
        </span>
      </button>
      {open && (
        <div className="compact-body">
          <pre className="text">{block.content}</pre>
          <CopyButton text={block.content} />
        </div>
      )}
    </div>
  );
}

const COMPACT = new Set(['error', 'retry', 'stalled']);

function ToolResult({ block }: { block: Block }) {
  const long = isLong(block.content);
  const [open, setOpen] = useState(!long);
  const diff = looksLikeDiff(block);
  const lines = block.content.split('\n').length;
  return (
    <>
      {long && (
        <button type="button" className="toggle" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? '▾ collapse' : `▸ show all ${lines} lines (${block.content.length.toLocaleString()} chars)`}
        </button>
      )}
      {open ? (
        diff ? (
          <Diff text={block.content} />
        ) : (
          <Code code={block.content} format={block.format} streaming={block.partial} />
        )
      ) : (
        <pre className="preview">{block.content.split('\n').slice(0, 4).join('\n')}…</pre>
      )}
    </>
  );
}

/** A background process's exit notice (a prompt toolsrv sends): what ended and how, its last output in colour. */
function ProcEnded({ p }: { p: ProcInterrupt }) {
  const ok = p.status === 'exited' && p.exit === '0';
  return (
    <div className="proc-ended">
      <div>
        <span className={`pstatus st-${ok ? 'ok' : 'failed'}`}>
          {p.status}
          {p.exit !== undefined ? ` ${p.exit}` : ''}
        </span>{' '}
        <code>
          #{p.pid} {p.cmd}
        </code>{' '}
        <button
          type="button"
          className="link"
          onClick={() => useStore.setState({ procsOpen: true, procPid: p.pid, view: 'chat' })}
        >
          show in Processes
        </button>
      </div>
      {p.output && (
        <pre className="proc-out small">
          <Ansi text={p.output} />
        </pre>
      )}
    </div>
  );
}

const LABEL: Record<string, string> = {
  user: 'You',
  assistant: 'Assistant',
  reasoning: 'Reasoning',
  call: 'Tool call',
  tool: 'Result',
  error: 'Error',
  info: 'Info',
  retry: 'Retry',
  stalled: 'Stalled',
};

export const BlockView = memo(function BlockView({ block }: { block: Block }) {
  const [reasoningOpen, setReasoningOpen] = useState(false);
  const role = block.role;
  if (COMPACT.has(role)) return <Compact block={block} label={LABEL[role] ?? role} />;
  // A hook that ran (olliesrv/hooks): one line, its output behind the twist.
  if (role === 'info' && block.name === 'hook') return <Compact block={block} label="Hook" />;
  let body;
  switch (role) {
    case 'assistant':
      body = <Markdown text={block.content} streaming={block.partial} />;
      break;
    case 'reasoning':
      body = (
        <>
          <button
            type="button"
            className="toggle"
            aria-expanded={reasoningOpen}
            onClick={() => setReasoningOpen(!reasoningOpen)}
          >
            {reasoningOpen ? '▾ hide reasoning' : '▸ show reasoning'}
          </button>
          {reasoningOpen && <pre className="text">{block.content}</pre>}
        </>
      );
      break;
    case 'call':
      body = <Call block={block} />;
      break;
    case 'tool':
      body = <ToolResult block={block} />;
      break;
    default: {
      const ended = role === 'user' ? parseProcInterrupt(block.content) : undefined;
      body = ended ? <ProcEnded p={ended} /> : <pre className="text">{block.content}</pre>;
    }
  }
  return (
    <div className={`block role-${role}${block.partial ? ' partial' : ''}`} data-role={role} data-id={block.id}>
      <div className="block-head">
        <span className="who">
          {role === 'user' && block.content.startsWith('<system-proc-interrupt')
            ? 'Process ended'
            : (LABEL[role] ?? role)}
        </span>
        {block.name && <span className="tool-name">{block.name}</span>}
        {block.partial && (
          <span className="streaming" aria-label="streaming">
            ●
          </span>
        )}
        {role !== 'tool' && role !== 'call' && <CopyButton text={block.content} />}
        {role === 'call' && <CopyButton text={block.content} label="Copy args" />}
      </div>
      {body}
    </div>
  );
});
