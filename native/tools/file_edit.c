/*
 * file_edit: {"path", "old_string", "new_string", "replace_all"?} replaces old_string by new_string in the
 * file. old_string must occur exactly once unless replace_all; an empty old_string creates the file (or fills
 * an empty one). Prints a unified diff of the change (3 lines of context). In C because editing is, after
 * reading, the most frequent tool call, and Node's start-up alone costs more than the whole edit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/common.h"

#define CONTEXT 3

static const char *path;

static void write_file(const char *data, size_t len, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) fail("%s: %s", path, strerror(errno));
  for (size_t off = 0; off < len;) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("%s: %s", path, strerror(errno));
    }
    off += (size_t)w;
  }
  if (close(fd) < 0) fail("%s: %s", path, strerror(errno));
}

/* Lines of s[0..len): newlines, plus one for a last line without one. */
static long count_lines(const char *s, size_t len) {
  long n = 0;
  for (size_t i = 0; i < len; i++) n += s[i] == '\n';
  return n + (len && s[len - 1] != '\n');
}

/* Prints each line of s[0..len) prefixed by `mark`, noting a missing final newline as diff does. */
static void print_lines(char mark, const char *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    const char *nl = memchr(s + i, '\n', len - i);
    size_t e = nl ? (size_t)(nl - s) + 1 : len;
    putchar(mark);
    fwrite(s + i, 1, e - i, stdout);
    if (!nl) fputs("\n\\ No newline at end of file\n", stdout);
    i = e;
  }
}

/* Offsets of the non-overlapping occurrences of needle in text, left to right; their count in *n. */
static size_t *find_all(const char *text, size_t len, const char *needle, size_t nlen, size_t *n) {
  size_t cap = 16, k = 0, *m = malloc(cap * sizeof *m);
  for (const char *p = text; (p = memmem(p, len - (size_t)(p - text), needle, nlen)); p += nlen) {
    if (k == cap) m = realloc(m, (cap *= 2) * sizeof *m);
    m[k++] = (size_t)(p - text);
  }
  *n = k;
  return m;
}

/* s[0..*len) with each LF not already preceded by CR turned into CRLF; *len updated. */
static const char *to_crlf(const char *s, size_t *len) {
  char *r = malloc(*len * 2 + 1);
  size_t n = 0;
  for (size_t i = 0; i < *len; i++) {
    if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r')) r[n++] = '\r';
    r[n++] = s[i];
  }
  r[n] = 0;
  *len = n;
  return r;
}

/* Reports that old_string is not in the file, with what is known to help find the difference: the longest
 * leading part of old_string that does occur (whole lines), and where. */
static void __attribute__((noreturn)) not_found(const char *text, size_t len, const char *old, size_t olen) {
  size_t best = 0, at = 0, nm;
  /* Longer prefixes, each a whole line more: the first that is missing ends the search. */
  for (size_t e = 0; e < olen; e++) {
    if (old[e] != '\n') continue;
    const char *p = memmem(text, len, old, e + 1);
    if (!p) break;
    best = e + 1, at = (size_t)(p - text);
  }
  if (best == 0) {
    /* Not even its first line: say whether that line occurs at all, ignoring leading whitespace. */
    const char *s = old;
    while (s < old + olen && (*s == ' ' || *s == '\t')) s++;
    const char *nl = memchr(s, '\n', olen - (size_t)(s - old));
    size_t flen = nl ? (size_t)(nl - s) : olen - (size_t)(s - old);
    if (flen && nl) {
      size_t *m = find_all(text, len, s, flen, &nm);
      if (nm) {
        at = m[0];
        fail("old_string was not found in %s (it must match exactly, whitespace included); its first line, without "
             "its indentation, occurs at line %ld: compare the indentation and the lines after it",
             path, count_lines(text, at + 1));
      }
    }
    fail("old_string was not found in %s (it must match exactly, whitespace included; read the file again to "
         "copy the text as it is now)", path);
  }
  long k = count_lines(old, best);
  fail("old_string was not found in %s (it must match exactly, whitespace included); its first %ld line%s match%s "
       "the file from line %ld, its line %ld differs",
       path, k, k == 1 ? "" : "s", k == 1 ? "es" : "", count_lines(text, at + 1), k + 1);
}

struct block {
  size_t start, end; /* byte range in the old text, whole lines */
  char *repl;        /* what replaces it */
  size_t repl_len;
  long line;         /* 0-based index of its first old line */
};

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  tool_name = "file_edit";
  struct args *a = args_read();
  path = arg_str(a, "path", NULL);
  size_t olen, nlen;
  const char *old = arg_str(a, "old_string", &olen);
  const char *new = arg_str(a, "new_string", &nlen);
  int all = arg_bool(a, "replace_all", 0);
  if (!path || !*path) fail("argument path is required");
  if (!old || !new) fail("arguments old_string and new_string are required");
  if (olen == nlen && !memcmp(old, new, olen)) fail("old_string and new_string are the same: nothing to do");

  size_t len = 0;
  char *text = NULL;
  mode_t mode = 0666;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT || olen) fail("%s: %s", path, strerror(errno));
  } else {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) fail("%s is a directory", path);
    mode = st.st_mode & 07777;
    text = read_all(fd, &len);
    close(fd);
  }
  if (!text) text = "";

  if (olen == 0) {
    if (len) fail("%s is not empty: an empty old_string only creates a file or fills an empty one", path);
    write_file(new, nlen, mode);
    printf("--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%ld @@\n", path, count_lines(new, nlen));
    print_lines('+', new, nlen);
    return 0;
  }

  size_t nm;
  size_t *m = find_all(text, len, old, olen, &nm);
  /* file_read does not show the \r of CRLF line ends, so a model copying lines from it writes LF: on a file
   * with CRLF line ends, multi-line text given with LF is matched (and its replacement written) with CRLF. */
  int crlf = 0;
  if (nm == 0 && memchr(old, '\n', olen) && !memchr(old, '\r', olen) && memmem(text, len, "\r\n", 2)) {
    old = to_crlf(old, &olen);
    new = to_crlf(new, &nlen);
    free(m);
    m = find_all(text, len, old, olen, &nm);
    crlf = nm > 0;
  }
  if (nm == 0) not_found(text, len, old, olen);
  if (nm > 1 && !all) {
    printf("file_edit: old_string occurs %zu times in %s, at lines", nm, path);
    for (size_t i = 0; i < nm && i < 10; i++) printf(" %ld", count_lines(text, m[i] + 1));
    printf("%s; include more context to make it unique, or set replace_all\n", nm > 10 ? " …" : "");
    return 1;
  }

  /* The new text. */
  size_t outlen = len + nm * nlen - nm * olen;
  char *out = malloc(outlen + 1), *o = out;
  size_t prev = 0;
  for (size_t i = 0; i < nm; i++) {
    memcpy(o, text + prev, m[i] - prev), o += m[i] - prev;
    memcpy(o, new, nlen), o += nlen;
    prev = m[i] + olen;
  }
  memcpy(o, text + prev, len - prev);
  write_file(out, outlen, mode);

  /* Changed blocks: each match widened to whole lines, overlapping ones merged. */
  struct block *b = calloc(nm, sizeof *b);
  size_t nb = 0;
  for (size_t i = 0; i < nm; i++) {
    size_t s = m[i], e = m[i] + olen;
    while (s > 0 && text[s - 1] != '\n') s--;
    if (e > 0 && text[e - 1] != '\n') {
      while (e < len && text[e] != '\n') e++;
      if (e < len) e++;
    }
    if (nb && s < b[nb - 1].end) b[nb - 1].end = e;
    else b[nb++] = (struct block){.start = s, .end = e};
  }
  size_t k = 0;
  for (size_t i = 0; i < nb; i++) {
    /* Apply the matches inside this block to its text. */
    size_t blen = b[i].end - b[i].start, n = 0;
    char *r = malloc(blen + nm * nlen + 1);
    size_t at = b[i].start;
    for (; k < nm && m[k] < b[i].end; k++) {
      memcpy(r + n, text + at, m[k] - at), n += m[k] - at;
      memcpy(r + n, new, nlen), n += nlen;
      at = m[k] + olen;
    }
    memcpy(r + n, text + at, b[i].end - at), n += b[i].end - at;
    b[i].repl = r;
    b[i].repl_len = n;
    b[i].line = count_lines(text, b[i].start) - 0;
    /* count_lines counts a partial last line; a block starts on a line boundary, so this is exact. */
  }

  /* Old line starts, for context. */
  long nlines = count_lines(text, len);
  size_t *ls = malloc(((size_t)nlines + 2) * sizeof *ls);
  long li = 0;
  ls[li++] = 0;
  for (size_t i = 0; i < len; i++)
    if (text[i] == '\n' && i + 1 < len) ls[li++] = i + 1;
  ls[nlines] = len; /* sentinel: the end of the last line */

  if (crlf) printf("[%s has CRLF line ends: old_string and new_string were matched and written with CRLF]\n", path);
  printf("--- a/%s\n+++ b/%s\n", path, path);
  long delta = 0; /* new line number minus old line number, before the current hunk */
  for (size_t i = 0; i < nb;) {
    /* A hunk: blocks whose context would touch, merged. */
    size_t j = i;
    long first_old = b[i].line;
    long last_old = b[j].line + count_lines(text + b[j].start, b[j].end - b[j].start); /* exclusive */
    while (j + 1 < nb && b[j + 1].line - last_old <= 2 * CONTEXT) {
      j++;
      last_old = b[j].line + count_lines(text + b[j].start, b[j].end - b[j].start);
    }
    long cs = first_old - CONTEXT < 0 ? 0 : first_old - CONTEXT;
    long ce = last_old + CONTEXT > nlines ? nlines : last_old + CONTEXT;
    long oc = 0, nc = 0;
    for (size_t x = i; x <= j; x++) {
      oc += count_lines(text + b[x].start, b[x].end - b[x].start);
      nc += count_lines(b[x].repl, b[x].repl_len);
    }
    long ctx_lines = (first_old - cs) + (ce - last_old);
    for (size_t x = i; x < j; x++) {
      long gap_start = b[x].line + count_lines(text + b[x].start, b[x].end - b[x].start);
      ctx_lines += b[x + 1].line - gap_start;
    }
    oc += ctx_lines;
    nc += ctx_lines;
    long os = oc ? cs + 1 : cs, ns = nc ? cs + delta + 1 : cs + delta;
    printf("@@ -%ld,%ld +%ld,%ld @@\n", os, oc, ns, nc);
    print_lines(' ', text + ls[cs], b[i].start - ls[cs]);
    for (size_t x = i; x <= j; x++) {
      print_lines('-', text + b[x].start, b[x].end - b[x].start);
      print_lines('+', b[x].repl, b[x].repl_len);
      size_t gap_end = x < j ? b[x + 1].start : (ce >= nlines ? len : ls[ce]);
      print_lines(' ', text + b[x].end, gap_end - b[x].end);
      delta += count_lines(b[x].repl, b[x].repl_len) - count_lines(text + b[x].start, b[x].end - b[x].start);
    }
    i = j + 1;
  }
  return 0;
}
