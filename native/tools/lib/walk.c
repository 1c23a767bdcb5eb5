#define _GNU_SOURCE
#include "walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"

/* One character class at p (on '['): sets *adv to its length; returns whether c is in it. -1 if malformed. */
static int match_class(const char *p, char c, int *adv) {
  const char *q = p + 1;
  int neg = *q == '!' || *q == '^', hit = 0;
  if (neg) q++;
  int first = 1;
  while (*q && (first || *q != ']')) {
    first = 0;
    char lo = *q, hi = lo;
    if (q[1] == '-' && q[2] && q[2] != ']') {
      hi = q[2];
      q += 3;
    } else {
      q++;
    }
    if (c >= lo && c <= hi) hit = 1;
  }
  if (*q != ']') return -1;
  *adv = (int)(q - p) + 1;
  return hit != neg;
}

int glob_match(const char *p, const char *s) {
  for (;;) {
    if (p[0] == '*' && p[1] == '*' && (p[2] == '/' || p[2] == 0)) {
      /* `**` matches any number of whole segments. */
      const char *rest = p[2] == '/' ? p + 3 : p + 2;
      if (!*rest) return 1;
      for (const char *t = s;; t++) {
        if ((t == s || t[-1] == '/') && glob_match(rest, t)) return 1;
        if (!*t) return 0;
      }
    }
    if (*p == '*') {
      while (*p == '*') p++;
      for (const char *t = s;; t++) {
        if (glob_match(p, t)) return 1;
        if (!*t || *t == '/') return 0;
      }
    }
    if (!*p) return !*s;
    if (!*s) return 0;
    if (*p == '?') {
      if (*s == '/') return 0;
    } else if (*p == '[') {
      int adv, r = match_class(p, *s, &adv);
      if (r < 0) {
        if (*s != '[') return 0; /* a lone '[' is literal */
      } else {
        if (!r || *s == '/') return 0;
        p += adv;
        s++;
        continue;
      }
    } else if (*p == '\\' && p[1]) {
      p++;
      if (*p != *s) return 0;
    } else if (*p != *s) {
      return 0;
    }
    p++;
    s++;
  }
}

int glob_braces(const char *pat, char ***out) {
  const char *open = NULL;
  int depth = 0;
  for (const char *p = pat; *p; p++) {
    if (*p == '\\' && p[1]) {
      p++;
    } else if (*p == '{') {
      if (!depth++) open = p;
    } else if (*p == '}' && depth && !--depth) {
      /* Expand this group's alternatives, then recurse on each result (for later and nested groups). */
      char **res = NULL;
      int n = 0;
      const char *alt = open + 1;
      int d = 0;
      for (const char *q = open + 1; q <= p; q++) {
        if (*q == '{') d++;
        else if (*q == '}' && d) d--;
        else if ((*q == ',' && !d) || q == p) {
          char *one;
          if (asprintf(&one, "%.*s%.*s%s", (int)(open - pat), pat, (int)(q - alt), alt, p + 1) < 0) fail("out of memory");
          char **sub;
          int m = glob_braces(one, &sub);
          res = realloc(res, (size_t)(n + m) * sizeof *res);
          memcpy(res + n, sub, (size_t)m * sizeof *sub);
          n += m;
          free(sub);
          free(one);
          alt = q + 1;
        }
      }
      *out = res;
      return n;
    }
  }
  *out = malloc(sizeof **out);
  (*out)[0] = strdup(pat);
  return 1;
}

char *glob_base(const char *pat) {
  const char *last = pat; /* end of the last literal segment */
  for (const char *p = pat; *p; p++) {
    if (strchr("*?[\\", *p)) break;
    if (*p == '/') last = p;
  }
  return strndup(pat, (size_t)(last - pat));
}

/*
 * .gitignore rules. One file's rules apply to paths relative to its directory: for a file below the walk's
 * root, rel minus `strip` leading characters; for one above it (top/SUB), `prepend` (SUB/) plus rel.
 */
struct rule {
  char *pat;
  int neg, dir_only, anchored;
};
struct ignore {
  struct rule *rules;
  int n;
  size_t strip;
  char *prepend;
  struct ignore *up;
};

/* The rules of DIR/.gitignore pushed onto `up`, or `up` itself when there is none. */
static struct ignore *load_ignore(const char *dir, struct ignore *up, size_t strip, const char *prepend) {
  char f[PATH_MAX];
  if (snprintf(f, sizeof f, "%s/.gitignore", dir) >= (int)sizeof f) return up;
  int fd = open(f, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return up;
  size_t len;
  char *text = read_all(fd, &len);
  close(fd);
  struct ignore *ig = calloc(1, sizeof *ig);
  ig->strip = strip;
  ig->prepend = strdup(prepend);
  ig->up = up;
  for (char *line = text, *next; line < text + len; line = next) {
    char *nl = memchr(line, '\n', (size_t)(text + len - line));
    next = nl ? nl + 1 : text + len;
    char *e = nl ? nl : text + len;
    while (e > line && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) e--; /* unescaped trailing spaces */
    *e = 0;
    if (!*line || *line == '#') continue;
    struct rule r = {0};
    if (*line == '!') r.neg = 1, line++;
    else if (*line == '\\' && (line[1] == '#' || line[1] == '!')) line++;
    size_t l = strlen(line);
    if (l && line[l - 1] == '/') r.dir_only = 1, line[--l] = 0;
    if (!l) continue;
    /* A slash anywhere but at the end anchors the pattern to this directory; otherwise it is a name. */
    r.anchored = strchr(line, '/') != NULL;
    while (*line == '/') line++;
    r.pat = strdup(line);
    ig->rules = realloc(ig->rules, (size_t)(ig->n + 1) * sizeof *ig->rules);
    ig->rules[ig->n++] = r;
  }
  free(text);
  return ig;
}

/* Whether rel (relative to the walk's root) is ignored: the last rule that matches it decides, inner files
 * after outer ones, as in git. */
static int ignored(struct ignore *ig, const char *rel, int is_dir) {
  const char *base = strrchr(rel, '/');
  base = base ? base + 1 : rel;
  for (; ig; ig = ig->up) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s%s", ig->prepend, rel + ig->strip) >= (int)sizeof path) continue;
    for (int i = ig->n - 1; i >= 0; i--) {
      struct rule *r = &ig->rules[i];
      if (r->dir_only && !is_dir) continue;
      if (glob_match(r->pat, r->anchored ? path : base)) return !r->neg;
    }
  }
  return 0;
}

static int walk_dir(const char *full, char *rel, size_t rlen, int flags, struct ignore *ig, walk_fn fn, void *ctx) {
  DIR *d = opendir(full);
  if (!d) return 0;
  if (flags & WALK_GITIGNORE) ig = load_ignore(full, ig, rlen ? rlen + 1 : 0, "");
  struct dirent *e;
  char child[PATH_MAX];
  int stop = 0;
  while (!stop && (e = readdir(d))) {
    const char *n = e->d_name;
    if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
    if (!strcmp(n, ".git") || !strcmp(n, "node_modules")) continue;
    if (n[0] == '.' && !(flags & WALK_HIDDEN)) continue;
    size_t nl = strlen(n);
    if (rlen + nl + 2 >= PATH_MAX) continue;
    if (rlen) rel[rlen] = '/';
    memcpy(rel + rlen + (rlen ? 1 : 0), n, nl + 1);
    size_t newlen = rlen + (rlen ? 1 : 0) + nl;
    if (snprintf(child, sizeof child, "%s/%s", full, n) >= (int)sizeof child) continue;
    int is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = lstat(child, &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (ig && ignored(ig, rel, is_dir)) {
      rel[rlen] = 0;
      continue;
    }
    int r = fn(rel, child, is_dir, ctx);
    if (r < 0) stop = 1;
    else if (r == 0 && is_dir && walk_dir(child, rel, newlen, flags, ig, fn, ctx)) stop = 1;
    rel[rlen] = 0;
  }
  closedir(d);
  return stop;
}

void walk(const char *top, const char *root, int flags, walk_fn fn, void *ctx) {
  char rel[PATH_MAX] = "";
  struct ignore *ig = NULL;
  if ((flags & WALK_GITIGNORE) && top) {
    /* root is top/SUB: the .gitignore of top and of each directory on the way down, but not root's own (the
     * walk loads that one). Each sees rel with the rest of SUB in front. */
    size_t tl = strlen(top);
    const char *sub = root + tl;
    while (*sub == '/') sub++;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", top);
    for (const char *p = sub; *sub;) {
      const char *slash = strchr(p, '/');
      char prepend[PATH_MAX];
      snprintf(prepend, sizeof prepend, "%s/", p);
      ig = load_ignore(dir, ig, 0, prepend);
      if (!slash) break;
      snprintf(dir, sizeof dir, "%s/%.*s", top, (int)(slash - sub), sub);
      p = slash + 1;
    }
  }
  walk_dir(root, rel, 0, flags, ig, fn, ctx);
}
