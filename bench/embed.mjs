#!/usr/bin/env node
// Skill and tool-hint matching (src/olliesrv/skills): model load time, index build time and the time to match
// one prompt (SkillMatcher.enrich: embed the prompt, cosine against 200 skills, then against 30 loaded tools)
// with a generated BERT-shaped ONNX model (src/olliesrv/skills/tiny-model.ts: the real tokenizer, onnxruntime
// session, pooling and ranking, but an embedding lookup instead of MiniLM's six transformer layers), and with
// the BM25 fallback (no model). Needs `npm run build:node`.
//
//   node bench/embed.mjs [--n 200] [--skills 200] [--dim 384] [--json]
//
// Target: matching ≤ 10 ms per prompt (it runs before every prompt goes to the model).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';

const { writeTinyModel } = await fromDist('olliesrv/skills/tiny-model.js');
const { OnnxEmbedder } = await fromDist('olliesrv/skills/embed.js');
const { SkillMatcher } = await fromDist('olliesrv/skills/matcher.js');

const { n: N, skills: SKILLS, dim: DIM, json } = benchArgs({ n: 200, skills: 200, dim: 384, json: false });

// A vocabulary of made-up words (and the usual English ones) so descriptions and prompts tokenize into real pieces.
let seed = 42;
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed / 2147483648);
const syl = ['ba', 'co', 'de', 'fi', 'go', 'hu', 'ka', 'lo', 'me', 'ni', 'po', 'ra', 'su', 'ti', 'vo', 'ze'];
const english =
  'how to write test tests fix bug debug git commit branch merge review code file files search run build deploy the a and of for with in on my this that error crash failing unit'.split(
    ' ',
  );
const words = [
  ...new Set([
    ...english,
    ...Array.from(
      { length: 3000 },
      () => syl[Math.floor(rnd() * 16)] + syl[Math.floor(rnd() * 16)] + syl[Math.floor(rnd() * 16)],
    ),
  ]),
];
const pick = (n) => Array.from({ length: n }, () => words[Math.floor(rnd() * words.length)]).join(' ');

const dir = mkdtempSync(join(tmpdir(), 'bench-embed-'));
const skillsDir = join(dir, 'skills');
for (let i = 0; i < SKILLS; i++) {
  mkdirSync(join(skillsDir, `skill-${i}`), { recursive: true });
  writeFileSync(
    join(skillsDir, `skill-${i}`, 'SKILL.md'),
    `---\nname: skill-${i}\ndescription: ${pick(12 + (i % 20))}\n---\n# skill ${i}\n${pick(200)}\n`,
  );
}
const tools = Array.from({ length: 30 }, (_, i) => ({ name: `tool_${i}`, description: pick(15 + (i % 15)) }));
const prompts = Array.from({ length: N }, (_, i) => pick(8 + (i % 40)));
const modelsDir = join(dir, 'models');
writeTinyModel(join(modelsDir, 'all-MiniLM-L6-v2'), { vocab: words, dim: DIM, maxLength: 256 });

const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const ms = (x) => x.toFixed(2);

async function run(kind) {
  const configDir = join(dir, `config-${kind}`);
  mkdirSync(configDir, { recursive: true });
  if (kind === 'bm25') writeFileSync(join(configDir, 'embedding.conf'), 'model = none\n');
  let loadMs;
  if (kind === 'onnx') {
    const t0 = performance.now();
    const e = await OnnxEmbedder.load(join(modelsDir, 'all-MiniLM-L6-v2'));
    loadMs = performance.now() - t0;
    await e.close();
  }
  const m = new SkillMatcher({
    configDir,
    modelsDir,
    shippedDir: skillsDir,
    config: { skillThreshold: 0, toolThreshold: 0 },
  });
  const t0 = performance.now();
  await m.list();
  const readyMs = performance.now() - t0;
  // Warm-up: the first turn embeds the tools' descriptions once (cached afterwards), and JIT.
  for (let i = 0; i < 20; i++) await m.enrich({ prompt: prompts[i % N], tools });
  const times = [];
  let injected = 0;
  for (const prompt of prompts) {
    const t = performance.now();
    const items = await m.enrich({ prompt, tools });
    times.push(performance.now() - t);
    injected += items.length;
  }
  return {
    kind,
    loadMs,
    readyMs,
    median: q(times, 0.5),
    p95: q(times, 0.95),
    max: Math.max(...times),
    injected: injected / N,
  };
}

const results = [await run('onnx'), await run('bm25')];
rmSync(dir, { recursive: true, force: true });
if (json) {
  process.stdout.write(`${JSON.stringify({ n: N, skills: SKILLS, dim: DIM, load: loadavg()[0], results })}\n`);
} else {
  process.stdout.write(
    `matching one prompt against ${SKILLS} skills and 30 tools, n = ${N}, load average ${loadavg()[0].toFixed(2)}\n`,
  );
  process.stdout.write(
    'method                          model load   ready (load+index)   match median / p95 / max ms\n',
  );
  for (const r of results) {
    const name = r.kind === 'onnx' ? `tiny ONNX model (${DIM}-d)` : 'BM25 (no model)';
    process.stdout.write(
      `${name.padEnd(32)}${(r.loadMs === undefined ? '-' : `${ms(r.loadMs)} ms`).padEnd(13)}${`${ms(r.readyMs)} ms`.padEnd(21)}${ms(r.median)} / ${ms(r.p95)} / ${ms(r.max)}\n`,
    );
  }
  const worst = Math.max(...results.map((r) => r.median));
  process.stdout.write(`target: matching ≤ 10 ms per prompt (median): ${worst <= 10 ? 'met' : 'NOT met'}\n`);
}
