/** The backend module's public surface: what the loop and the namespace import. */
export * from './types.js';
export * from './errors.js';
export { Backends, NoBackendError, createBackend, type BackendsOptions } from './pool.js';
export {
  loadBackendsConfig,
  parseBackendsConfig,
  emptyConfig,
  CONFIG_FILE,
  DEFAULT_URLS,
  DEFAULT_MODELS,
  DEFAULT_KEY_ENV,
  type BackendConfig,
  type BackendsConfig,
} from './config.js';
export { priceUsage, priceOf } from './pricing.js';
export * from './retry.js';
