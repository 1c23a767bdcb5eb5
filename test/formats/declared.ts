/**
 * The olliesrv namespace as declared (no daemon behind it: only the declaration is read, never a handler run), so
 * tests can enumerate every file and its declared format.
 */
import { olliesrvNamespace, type Olliesrv } from '../../src/olliesrv/fs/spec.js';
import type { DeclaredNode } from '../../src/ninep/index.js';
import type { AnyFormat } from '../../src/formats/index.js';

export function declaredTree(): DeclaredNode {
  // Building the namespace reads only the declaration; the handlers that would use `o` never run here.
  return olliesrvNamespace({} as Olliesrv, 'owner').declared();
}

export interface DeclaredLeaf {
  pattern: string;
  read?: DeclaredNode['read'];
  write?: DeclaredNode['write'];
  format?: AnyFormat;
  /** What a write or a rdwr request takes, when declared apart from the content. */
  request?: AnyFormat;
}

export function declaredLeaves(root: DeclaredNode = declaredTree()): DeclaredLeaf[] {
  const out: DeclaredLeaf[] = [];
  const visit = (n: DeclaredNode): void => {
    // A leaf, or the files of an EachFile (a template leaf).
    if (n.kind === 'leaf')
      out.push({
        pattern: n.pattern,
        read: n.read,
        write: n.write,
        format: n.format as AnyFormat | undefined,
        request: n.request as AnyFormat | undefined,
      });
    n.children.forEach(visit);
  };
  visit(root);
  return out;
}

/** Every distinct format object the namespace declares: contents and requests. */
export function declaredFormats(): AnyFormat[] {
  return [
    ...new Set(declaredLeaves().flatMap((l) => [l.format, l.request].filter((f): f is AnyFormat => f !== undefined))),
  ];
}
