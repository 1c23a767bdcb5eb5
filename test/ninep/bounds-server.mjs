// A 9P server in its own process, so a test can measure what hostile clients cost it (bounds.test.ts).
// argv: socket path, ServerOptions limits as JSON. Answers 'rss' messages with its RSS and connection count.
import { build, Dir, Leaf, Server } from '../../dist/ninep/index.js';
import { listen } from '../../dist/ninep/node.js';

const [path, opts] = process.argv.slice(2);
const log = [];
const server = new Server({
  fs: build(Dir('/', Leaf('hello', { read: () => 'hello\n' })), { uid: 'alice' }),
  onProtocolError: (m) => log.push(m),
  ...JSON.parse(opts ?? '{}'),
});
await listen(server, { kind: 'unix', path });
process.on('message', () => {
  globalThis.gc?.();
  process.send({ rss: process.memoryUsage().rss, connections: server.connections.size, log });
});
process.on('disconnect', () => process.exit(0));
process.send({ ready: true });
