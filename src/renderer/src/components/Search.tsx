/**
 * Full-text search over every session's history: the words go to the root `search` file (olliesrv's FTS5
 * index), the hits come back grouped by session and agent; opening one reads the block from its agent's
 * `block` file and shows the chat scrolled to it.
 */
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { groupHits, snippetParts, type SearchHit } from '../lib/parse.js';
import { notify, ollie, useStore } from '../lib/store.js';

function Snippet({ text }: { text: string }) {
  return (
    <>{snippetParts(text).map((p, i) => (p.hit ? <mark key={i}>{p.text}</mark> : <span key={i}>{p.text}</span>))}</>
  );
}

export function Search() {
  const search = useStore((s) => s.search);
  const conn = useStore((s) => s.conn);
  const [query, setQuery] = useState(search.query);
  const [opening, setOpening] = useState<string>();
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    input.current?.focus();
  }, []);

  const submit = (e: FormEvent): void => {
    e.preventDefault();
    void ollie.search(query);
  };
  const open = async (h: SearchHit): Promise<void> => {
    setOpening(h.block);
    try {
      const role = await ollie.openHit(h);
      if (role === 'context') notify('That block is context for the model; the chat does not show it.');
    } catch (e) {
      notify(`open ${h.session}/${h.agent}: ${(e as Error).message}`, true);
    } finally {
      setOpening(undefined);
    }
  };

  const groups = groupHits(search.hits);
  return (
    <section className="search-view" aria-label="Search">
      <form className="search-bar" role="search" onSubmit={submit}>
        <input
          ref={input}
          type="search"
          aria-label="Search words"
          placeholder="Words to find in every session's history (all must match)"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
          onKeyDown={(e) => {
            // Down from the box moves into the results.
            if (e.key === 'ArrowDown') {
              (document.querySelector('.search-results .hit') as HTMLElement | null)?.focus();
              e.preventDefault();
            }
          }}
        />
        <button type="submit" className="primary" disabled={conn !== 'open' || search.busy || !query.trim()}>
          {search.busy ? 'Searching…' : 'Search'}
        </button>
      </form>
      <div className="search-results" data-testid="search-results">
        {search.error ? (
          <p className="errmsg" role="alert">
            Search failed: {search.error}
          </p>
        ) : search.done === undefined ? (
          <p className="empty">
            Search finds messages, replies, tool calls and results of every agent, including ones that ended. Enter
            opens a result.
          </p>
        ) : search.hits.length === 0 ? (
          <p className="empty">Nothing matches “{search.done}”.</p>
        ) : (
          <>
            <p className="dim">
              {search.hits.length} result{search.hits.length === 1 ? '' : 's'} for “{search.done}”
            </p>
            {groups.map((g) => (
              <div key={g.session} className="hit-session" data-session={g.session}>
                <h3>{g.session}</h3>
                {g.agents.map((a) => (
                  <div key={a.key} className="hit-agent" data-agent={a.agent} data-ended={a.ended || undefined}>
                    <h4>
                      {a.agent}
                      {a.ended && <span className="tag">{a.ended}</span>}
                    </h4>
                    <ul>
                      {a.hits.map((h) => (
                        <li key={h.block}>
                          <button
                            type="button"
                            className="hit"
                            data-block={h.block}
                            disabled={opening !== undefined}
                            onClick={() => void open(h)}
                            onKeyDown={(e) => {
                              const all = [...document.querySelectorAll<HTMLElement>('.search-results .hit')];
                              const i = all.indexOf(e.currentTarget);
                              if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
                                e.preventDefault();
                                if (e.key === 'ArrowUp' && i === 0) input.current?.focus();
                                else
                                  all[
                                    Math.max(0, Math.min(all.length - 1, i + (e.key === 'ArrowDown' ? 1 : -1)))
                                  ]?.focus();
                              }
                            }}
                          >
                            <span className={`tag role-tag-${h.role}`}>{h.role}</span> <Snippet text={h.snippet} />
                          </button>
                        </li>
                      ))}
                    </ul>
                  </div>
                ))}
              </div>
            ))}
          </>
        )}
      </div>
    </section>
  );
}
