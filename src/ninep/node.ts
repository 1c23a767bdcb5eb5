/** ninep for Node: everything in the browser-safe entry plus socket transports. */
export * from './index.js';
export * from './node/socket.js';
