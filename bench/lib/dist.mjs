// Where the bench scripts find this checkout and its build (`npm run build:node` writes dist/).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout's root directory. */
export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** A module of dist/, by its path there (e.g. `platform/launcher.js`). */
export const fromDist = (path) => import(join(root, 'dist', path));
