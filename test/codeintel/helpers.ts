/**
 * Code intelligence tests run the tools as toolsrv runs them: a real toolsrv (in-process) with the shipped tool
 * directory, sandboxed, so every call goes through the codeintel host process under Landlock. The workspace is
 * a throwaway directory with a file of each language.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, type Env } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

export const CODE_TOOLS = [
  'codebase_overview',
  'code_outline',
  'code_symbols',
  'code_dependencies',
  'code_query',
  'code_rewrite',
];

export const FILES: Record<string, string> = {
  '.gitignore': 'build/\n*.log\n/secret.ts\n',
  'README.md': `# Fixture

Some text.

## Install

\`\`\`sh
# not a heading
npm install
\`\`\`

Usage
-----

### Details
`,
  'package.json':
    '{\n  "name": "fixture",\n  "scripts": {\n    "test": "vitest"\n  },\n  "dependencies": {\n    "react": "^19.0.0"\n  }\n}\n',
  'config.yaml': 'server:\n  port: 8080\n  hosts:\n    - a\n    - b\ndebug: true\n',
  'src/greeter.ts': `import { join } from 'node:path';
import type { Options } from './types.js';

/** Greets. */
export class Greeter {
  private count = 0;

  constructor(readonly opts: Options) {}

  greet(name: string): string {
    this.count++;
    return join(this.opts.prefix, name);
  }
}

export function makeGreeter(prefix = 'hi'): Greeter {
  return new Greeter({ prefix });
}

export const VERSION = '1.0';
export const shout = (s: string): string => s.toUpperCase();
`,
  'src/types.ts': `export interface Options {
  prefix: string;
  loud?: boolean;
}

export type Name = string;

export enum Mode { A, B }

export namespace Util {
  export function id<T>(x: T): T {
    return x;
  }
}
`,
  'src/view.tsx': `import React from 'react';
import { makeGreeter } from './greeter';

export function Hello({ name }: { name: string }) {
  const g = makeGreeter();
  return <div className="hello">{g.greet(name)}</div>;
}
`,
  'src/legacy.js': `const fs = require('fs');

class Store {
  get(key) {
    return fs.readFileSync(key, 'utf8');
  }
}

module.exports = { Store };
`,
  'py/app.py': `import os
from .util import helper
from collections import OrderedDict as OD

LIMIT = 10

class App:
    def __init__(self, name):
        self.name = name

    @property
    def title(self):
        return helper(self.name)

def main():
    return App("x")
`,
  'py/util.py': 'def helper(s):\n    return s.title()\n',
  'go/server.go': `package server

import (
	"fmt"
	"net/http"
)

const DefaultPort = 8080

type Server struct {
	Port int
}

type Handler interface {
	Serve() error
}

func New(port int) *Server {
	return &Server{Port: port}
}

func (s *Server) Start() error {
	fmt.Println("start")
	return http.ListenAndServe(fmt.Sprint(s.Port), nil)
}
`,
  'rust/lib.rs': `use std::collections::HashMap;
mod parser;

pub struct Cache {
    map: HashMap<String, String>,
}

pub trait Store {
    fn get(&self, k: &str) -> Option<String>;
}

impl Store for Cache {
    fn get(&self, k: &str) -> Option<String> {
        self.map.get(k).cloned()
    }
}

pub fn new_cache() -> Cache {
    Cache { map: HashMap::new() }
}
`,
  'rust/parser.rs': 'pub fn parse() {}\n',
  'c/main.c': `#include <stdio.h>
#include "util.h"

#define MAX 10

struct point {
  int x, y;
};

typedef struct point point_t;

static int add(int a, int b) {
  return a + b;
}

int main(void) {
  printf("%d\\n", add(1, 2));
  return 0;
}
`,
  'c/util.h': '#ifndef UTIL_H\n#define UTIL_H\nint util_twice(int x);\n#endif\n',
  'cpp/shape.cpp': `#include <vector>
#include "shape.hpp"

namespace geo {

class Shape {
 public:
  virtual double area() const = 0;
  int sides;
};

double total(const std::vector<Shape*>& v) {
  double t = 0;
  for (auto* s : v) t += s->area();
  return t;
}

}  // namespace geo
`,
  'cpp/shape.hpp': '#pragma once\nnamespace geo { class Shape; }\n',
  'scripts/build.sh': '#!/bin/sh\nbuild() {\n  echo building\n}\nbuild\n',
  'node_modules/dep/index.ts': 'export function hiddenInNodeModules() {}\n',
  'build/out.ts': 'export function hiddenByGitignore() {}\n',
  'secret.ts': 'export function hiddenAnchored() {}\n',
};

export function writeWorkspace(files: Record<string, string> = FILES): string {
  const root = mkdtempSync(join(tmpdir(), 'codeintel-'));
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), text);
  }
  return root;
}

export interface CodeEnv {
  env: Env;
  c: Client;
  root: string;
  run(tool: string, args: Record<string, unknown>): Promise<ProcResult>;
  /** The output of a call that must succeed. */
  ok(tool: string, args: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

/** A sandboxed toolsrv over a fresh workspace, with `tools` loaded for one agent. */
export async function codeEnv(
  tools: string[] = CODE_TOOLS,
  opts: { files?: Record<string, string>; hostIdleMs?: number } = {},
): Promise<CodeEnv> {
  buildNative();
  expect(
    existsSync(join(PACKAGE_ROOT, 'dist', 'tools', 'hosts', 'codeintel.js')),
    'dist/ is not built: run npm run build:node',
  ).toBe(true);
  const root = writeWorkspace(opts.files);
  const env = await startEnv(
    {},
    {
      yolo: false,
      toolDirs: [SHIPPED_TOOLS],
      cwd: root,
      ...(opts.hostIdleMs !== undefined && { hostIdleMs: opts.hostIdleMs }),
    },
  );
  const c = await env.client('agent1');
  await c.write('ctl', `load ${tools.join(' ')}`);
  const run = (tool: string, args: Record<string, unknown>): Promise<ProcResult> => env.call(c, { tool, args });
  return {
    env,
    c,
    root,
    run,
    async ok(tool, args) {
      const r = await run(tool, args);
      expect(r, r.output).toMatchObject({ status: 'exited', exit: 0 });
      return r.output;
    },
    async close() {
      await env.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
