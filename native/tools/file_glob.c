/*
 * file_glob: {"pattern", "path"?, "max_results"?} lists the files and directories (with a trailing /) under
 * path whose relative path matches pattern, newest first. The walk starts at the pattern's literal prefix
 * (the pattern src/x/y*.ts walks only src/x), skipping what .gitignore files name. In C for start-up time, like the other file tools.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/common.h"
#include "lib/walk.h"

struct hit {
  char *path;
  struct timespec mtime;
};

/* Matches collected before the walk gives up: sorting needs them all, but an absolute double-star pattern must not walk the
 * whole disk; past this the order is that of the matches seen, and the output says so. */
#define MAX_COLLECT 200000

struct ctx {
  int capped;
  char **pats;
  int npats;
  const char *base; /* literal prefix walked from, "" for none */
  struct hit *hits;
  size_t n, cap;
};

static int visit(const char *rel, const char *full, int is_dir, void *vc) {
  struct ctx *c = vc;
  char path[8192];
  snprintf(path, sizeof path, "%s%s%s", c->base, *c->base ? "/" : "", rel);
  for (int i = 0; i < c->npats; i++) {
    if (!glob_match(c->pats[i], path)) continue;
    if (c->n == MAX_COLLECT) {
      c->capped = 1;
      return -1;
    }
    if (c->n == c->cap) c->hits = realloc(c->hits, (c->cap = c->cap ? c->cap * 2 : 256) * sizeof *c->hits);
    struct stat st;
    struct timespec t = {0, 0};
    if (lstat(full, &st) == 0) t = st.st_mtim;
    if (asprintf(&c->hits[c->n].path, "%s%s", path, is_dir ? "/" : "") < 0) fail("out of memory");
    c->hits[c->n++].mtime = t;
    break;
  }
  return 0;
}

static int newest_first(const void *a, const void *b) {
  const struct hit *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? 1 : -1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? 1 : -1;
  return strcmp(x->path, y->path);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  tool_name = "file_glob";
  struct args *a = args_read();
  const char *pattern = arg_str(a, "pattern", NULL);
  const char *dir = arg_str(a, "path", NULL);
  long long max = arg_int(a, "max_results", 1000);
  if (!pattern || !*pattern) fail("argument pattern is required");
  if (max < 1) fail("max_results must be at least 1");
  if (pattern[0] == '/') { /* an absolute pattern searches from / and prints absolute paths */
    dir = "/";
    while (*pattern == '/') pattern++;
  }
  const char *root = dir && *dir ? dir : ".";
  struct stat st;
  if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode)) fail("%s is not a directory", root);

  struct ctx c = {0};
  c.npats = glob_braces(pattern, &c.pats);
  /* Walk from the literal prefix shared by all alternatives ("src/{a,b}/x.c" walks src). */
  char *base = glob_base(c.pats[0]);
  for (int i = 1; i < c.npats; i++) {
    char *b = glob_base(c.pats[i]);
    size_t k = 0;
    while (base[k] && base[k] == b[k]) k++;
    while (k && base[k] && base[k] != '/') k--; /* back to a segment boundary */
    if (base[k] && base[k] != '/') k = 0;
    base[k] = 0;
    free(b);
  }
  c.base = base;
  int flags = WALK_GITIGNORE;
  for (int i = 0; i < c.npats; i++)
    if (c.pats[i][0] == '.' || strstr(c.pats[i], "/.")) flags |= WALK_HIDDEN;
  char start[8192];
  snprintf(start, sizeof start, "%s%s%s", root, *base ? "/" : "", base);
  walk(root, start, flags, visit, &c);

  /* Every match is collected and sorted before the cut: the newest max_results, not the first ones walked. */
  qsort(c.hits, c.n, sizeof *c.hits, newest_first);
  size_t shown = c.n < (size_t)max ? c.n : (size_t)max;
  int prefix = dir && *dir && strcmp(dir, ".");
  for (size_t i = 0; i < shown; i++)
    printf("%s%s%s\n", prefix ? dir : "", prefix && dir[strlen(dir) - 1] != '/' ? "/" : "", c.hits[i].path);
  if (c.n == 0) printf("no files match %s\n", pattern);
  if (c.capped) printf("[stopped walking after %d matches: the newest of those shown; narrow the pattern]\n", MAX_COLLECT);
  else if (shown < c.n) printf("[%zu more: the newest %zu shown; narrow the pattern or raise max_results]\n", c.n - shown, shown);
  return 0;
}
