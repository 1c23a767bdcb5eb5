// Compiles the native parts of Ollie with the system C compiler: the sandbox helper (native/ollie-sandbox.c)
// and the tools written in C for speed (native/tools/*.c, each linked with native/tools/lib/*.c). Output goes to
// native/build/. A target is rebuilt only when a source it depends on is newer, so running this before every
// build or test costs a few stat calls. Exits non-zero with a clear message when there is no compiler: the
// sandbox is not optional (toolsrv fails closed without it).
//
//   node scripts/build-native.mjs [--force] [--quiet]
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const native = join(root, 'native');
const out = join(native, 'build');
const force = process.argv.includes('--force');
const quiet = process.argv.includes('--quiet');

if (process.platform !== 'linux') {
  // Landlock is Linux only; elsewhere toolsrv reports the sandbox as unavailable (and fails closed).
  if (!quiet) console.warn(`ollie: no native sandbox on ${process.platform}; tools will only run with --yolo.`);
  process.exit(0);
}

const mtime = (f) => (existsSync(f) ? statSync(f).mtimeMs : -1);
const compiler = [process.env.CC, 'cc', 'gcc', 'clang'].find(
  (c) => c && spawnSync(c, ['--version'], { stdio: 'ignore' }).status === 0,
);

const toolDir = join(native, 'tools');
const libDir = join(toolDir, 'lib');
const lib = readdirSync(libDir).map((f) => join(libDir, f));
const targets = [{ name: 'ollie-sandbox', sources: [join(native, 'ollie-sandbox.c')], deps: [] }];
for (const f of readdirSync(toolDir)) {
  if (f.endsWith('.c')) {
    targets.push({ name: f.slice(0, -2), sources: [join(toolDir, f), ...lib.filter((l) => l.endsWith('.c'))], deps: lib });
  }
}

const stale = targets.filter((t) => {
  const built = mtime(join(out, t.name));
  return force || built < 0 || [...t.sources, ...t.deps].some((s) => mtime(s) > built);
});
if (stale.length === 0) process.exit(0);

if (!compiler) {
  console.error('ollie: no C compiler found (tried $CC, cc, gcc, clang).');
  console.error('ollie: the Landlock sandbox helper must be compiled; install one (Debian/Ubuntu: apt-get install build-essential)');
  console.error('ollie: and run `node scripts/build-native.mjs` (or `npm install` again).');
  process.exit(1);
}

mkdirSync(out, { recursive: true });
for (const t of stale) {
  const target = join(out, t.name);
  const args = ['-O2', '-std=gnu11', '-Wall', '-Wextra', '-Werror', '-o', `${target}.tmp`, ...t.sources];
  // Statically linked when the C library allows it: every tool call execs the helper and then the tool, and
  // skipping the dynamic loader twice saves about a millisecond per call (measured: file_read 3.0 → 2.1 ms).
  let r = spawnSync(compiler, ['-static', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  if (r.status !== 0) r = spawnSync(compiler, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) {
    console.error(`ollie: compiling ${t.name} failed (${compiler} ${args.join(' ')})`);
    process.exit(1);
  }
  // Rename into place so that a concurrent run (or a tool running at that moment) never sees half a binary.
  renameSync(`${target}.tmp`, target);
  if (!quiet) console.log(`ollie: built native/build/${t.name}`);
}
