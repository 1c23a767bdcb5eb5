// The model the bench scripts' olliesrv talks to.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Writes `configDir`/backends.conf: the default backend is the mock LLM at `url`, as gpt-4o with `context` tokens. */
export function writeMockBackend(configDir, url, context) {
  mkdirSync(configDir, { recursive: true });
  writeFileSync(
    join(configDir, 'backends.conf'),
    `[default]\nbackend = mock\n\n[mock]\ntype = openai\nurl = ${url}/v1\nkey = k\nmodel = gpt-4o\ncontext = ${context}\n`,
  );
}
