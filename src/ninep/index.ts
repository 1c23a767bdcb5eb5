/** ninep: a self-contained 9P2000 library. This entry point is browser-safe; sockets live in ./node.js. */
export * from './common/constants.js';
export * from './common/errors.js';
export * from './common/codec.js';
export { Framer } from './common/framer.js';
export * from './common/channel.js';
export * from './common/address.js';
export { Server, Connection, DEFAULT_MAX_MSIZE, DEFAULT_LIMITS } from './common/server.js';
export type {
  User,
  Pending,
  OpenFile,
  FileServer,
  AuthConversation,
  AuthProvider,
  AttachRequest,
  ServerOptions,
} from './common/server.js';
export { sharedSecretAuth, sharedSecretResponder, tokenAuth, TokenConversation } from './common/auth.js';
export { Client, Fid, lines, splitPath } from './common/client.js';
export type { ClientOptions } from './common/client.js';
export * from './common/namespace.js';
