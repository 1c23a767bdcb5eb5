// How many output chunks a tool that writes one byte at a time makes reach toolsrv through the launcher, and
// what keeping them costs: toolsrv's Proc keeps up to 16 MiB of output (RETAIN) counted in bytes, as chunks,
// and every slow follower of proc/N/out holds a reference to each chunk pushed since it last read.
// Usage: npm run build:node && node bench/proc-chunks.mjs [seconds]
import { Launcher } from '../dist/platform/launcher.js';

const seconds = Number(process.argv[2] ?? 3);
const launcher = Launcher.create();
const kept = [];
let bytes = 0;
const rss0 = process.memoryUsage().rss;
await new Promise((done) =>
  launcher.launch(
    {
      file: '/usr/bin/perl',
      args: ['-e', `$|=1; my $e=time+${seconds}; while (time < $e) { syswrite(STDOUT, "x") }`],
      cwd: '/tmp',
      env: {},
      stdin: '',
    },
    {
      output: (b) => {
        kept.push(b);
        bytes += b.length;
      },
      exited: () => undefined,
      closed: done,
      lost: done,
    },
  ),
);
launcher.close();
const rss = process.memoryUsage().rss - rss0;
const perChunk = bytes / kept.length;
console.log(
  `${launcher.native ? 'spawner' : 'fallback'}: ${kept.length} chunks, ${bytes} bytes in ${seconds} s (${perChunk.toFixed(1)} bytes a chunk)`,
);
console.log(`memory kept for them: ${(rss / 1e6).toFixed(0)} MB, ${(rss / bytes).toFixed(1)} bytes per output byte`);
console.log(`at that rate, 16 MiB retained would cost ~${((16 * 2 ** 20 * rss) / bytes / 1e6).toFixed(0)} MB`);
