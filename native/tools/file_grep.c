/*
 * file_grep: {"pattern", "path"?, "glob"?, "ignore_case"?, "context"?, "files_only"?, "max_results"?}
 * searches files for a regular expression; prints path:line:text for matches and path-line-text for context
 * lines, "--" between separate groups. Built in: POSIX extended regular expressions (glibc's, with \w \b \<
 * \>, and \d \s \D \S translated), skipping binary files, hidden files, .git, node_modules and what
 * .gitignore files name; lines longer than MAX_LINE are cut to a window around the match. With --rg
 * (the .meta's variant when ripgrep is on PATH) the same arguments are handed to rg instead; when rg cannot run
 * (EACCES in the sandbox, gone, killed) before printing anything, the built-in search runs after all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/common.h"
#include "lib/walk.h"

#define MAX_GLOBS 64
#define MAX_LINE 2000 /* bytes of a line shown; longer ones are cut around the match */
#define MAX_FILE (64 << 20) /* larger files are skipped while walking (still searched when named) */

static regex_t re;
static char **globs;
static int nglobs;
static long context, max_results, results;
static int files_only, stopped;
static const char *display_root; /* prefix printed before relative paths, "" for none */

/* \d \D \s \S are common in regexes written for other engines; POSIX spells them as classes. */
static char *translate(const char *p) {
  char *out = malloc(strlen(p) * 12 + 1), *o = out;
  int in_class = 0;
  for (; *p; p++) {
    if (*p == '\\' && p[1]) {
      const char *rep = NULL;
      switch (p[1]) {
      case 'd': rep = in_class ? "0-9" : "[0-9]"; break;
      case 'D': rep = in_class ? NULL : "[^0-9]"; break;
      case 's': rep = in_class ? "[:space:]" : "[[:space:]]"; break;
      case 'S': rep = in_class ? NULL : "[^[:space:]]"; break;
      }
      if (rep) {
        o = stpcpy(o, rep);
        p++;
        continue;
      }
      *o++ = *p++;
      *o++ = *p;
      continue;
    }
    if (*p == '[' && !in_class) {
      in_class = 1;
      *o++ = *p;
      if (p[1] == '^') *o++ = *++p;
      if (p[1] == ']') *o++ = *++p; /* a leading ] is literal */
      continue;
    }
    if (*p == ']' && in_class) in_class = 0;
    *o++ = *p;
  }
  *o = 0;
  return out;
}

static int wanted(const char *rel) {
  if (!nglobs) return 1;
  const char *base = strrchr(rel, '/');
  base = base ? base + 1 : rel;
  for (int i = 0; i < nglobs; i++) {
    /* Like rg's -g: a glob without a slash matches the file name at any depth. */
    if (glob_match(globs[i], strchr(globs[i], '/') ? rel : base)) return 1;
  }
  return 0;
}

/* The regex again, with match offsets (the one searched with is compiled with REG_NOSUB, which is faster), to
 * find where in a long line its match is. Compiled on the first long line; NULL when the pattern is not a POSIX
 * one (rg's syntax), and then a long line is shown from its start. */
static const char *pattern_text;
static int pattern_icase, pos_state; /* 0 not compiled yet, 1 compiled, -1 cannot */
static regex_t re_pos;

/* Prints the text of one output line, cut to a window of MAX_LINE bytes around the match (at the start for a
 * context line) when longer: a minified file or a data dump has lines of megabytes, which would fill the
 * model's context with nothing. */
static void put_text(const char *line, size_t len, int is_match) {
  if (len <= MAX_LINE) {
    fwrite(line, 1, len, stdout);
    return;
  }
  size_t ms = 0;
  if (is_match && pos_state == 0) {
    char *tr = translate(pattern_text);
    pos_state = regcomp(&re_pos, tr, REG_EXTENDED | REG_NEWLINE | (pattern_icase ? REG_ICASE : 0)) ? -1 : 1;
    free(tr);
  }
  if (is_match && pos_state == 1) {
    /* The line is not NUL-terminated here (rg output): REG_STARTEND searches exactly [0, len). */
    regmatch_t m[1] = {{.rm_so = 0, .rm_eo = (regoff_t)len}};
    if (regexec(&re_pos, line, 1, m, REG_STARTEND) == 0) ms = (size_t)m[0].rm_so;
  }
  /* A quarter of the window before the match, the rest from it on. */
  size_t start = ms > MAX_LINE / 4 ? ms - MAX_LINE / 4 : 0;
  size_t end = start + MAX_LINE < len ? start + MAX_LINE : len;
  if (end == len && len > MAX_LINE) start = len - MAX_LINE;
  /* Whole UTF-8 characters: never start or end inside one. */
  while (start > 0 && ((unsigned char)line[start] & 0xC0) == 0x80) start--;
  while (end < len && ((unsigned char)line[end] & 0xC0) == 0x80) end--;
  if (start) fputs("…", stdout);
  fwrite(line + start, 1, end - start, stdout);
  if (end < len) fputs("…", stdout);
  printf(" [line of %zu bytes cut to bytes %zu-%zu]", len, start + 1, end);
}

static void emit(const char *name, long no, char sep, const char *line, size_t len) {
  printf("%s%s%c%ld%c", display_root, name, ':', no, sep);
  put_text(line, len, sep == ':');
  putchar('\n');
}

/* `named`: the file was named by the caller, so failing to open it is an error rather than a skip. */
static void grep_file(const char *name, const char *full, int named) {
  int fd = open(full, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (named) fail("%s: %s", full, strerror(errno));
    return;
  }
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return;
  }
  if (st.st_size > MAX_FILE && !named) { /* logs, dumps, databases: not source, and read whole below */
    close(fd);
    return;
  }
  size_t len;
  char *text = read_all(fd, &len);
  close(fd);
  if (memchr(text, 0, len < 8192 ? len : 8192)) { /* binary */
    free(text);
    return;
  }
  /* Line starts, so that context before a match can be printed. */
  size_t cap = 1024, n = 0, *ls = malloc(cap * sizeof *ls);
  ls[n++] = 0;
  for (size_t i = 0; i < len; i++)
    if (text[i] == '\n') {
      text[i] = 0; /* regexec works on NUL-terminated lines */
      if (i + 1 < len) {
        if (n == cap) ls = realloc(ls, (cap *= 2) * sizeof *ls);
        ls[n++] = i + 1;
      }
    }
  if (len == 0) n = 0;
  long printed_to = -1; /* index of the last line printed */
  long after = 0;       /* context lines still to print after a match */
  for (size_t i = 0; i < n && !stopped; i++) {
    const char *line = text + ls[i];
    size_t ll = strlen(line);
    int hit = regexec(&re, line, 0, NULL, 0) == 0;
    if (hit && files_only) {
      printf("%s%s\n", display_root, name);
      if (++results >= max_results) stopped = 1;
      break;
    }
    if (hit) {
      long from = (long)i - context < 0 ? 0 : (long)i - context;
      if (from <= printed_to) from = printed_to + 1;
      if (context && printed_to >= 0 && from > printed_to + 1) puts("--");
      if (context && printed_to < 0 && results > 0) puts("--");
      for (long c = from; c < (long)i; c++) emit(name, c + 1, '-', text + ls[c], strlen(text + ls[c]));
      emit(name, (long)i + 1, ':', line, ll);
      printed_to = (long)i;
      after = context;
      if (++results >= max_results) stopped = 1;
    } else if (after > 0) {
      emit(name, (long)i + 1, '-', line, ll);
      printed_to = (long)i;
      after--;
    }
  }
  free(ls);
  free(text);
}

static int visit(const char *rel, const char *full, int is_dir, void *ctx) {
  (void)ctx;
  if (is_dir) return 0;
  if (wanted(rel)) grep_file(rel, full, 0);
  return stopped ? -1 : 0;
}

/* ripgrep with the same arguments; its output is passed through, cut after max_results lines. */
static int run_rg(const char *pattern, const char *path, int icase) {
  char *argv[24 + 2 * MAX_GLOBS];
  int n = 0;
  char ctx[32];
  argv[n++] = "rg";
  argv[n++] = "--line-number";
  argv[n++] = "--no-heading";
  argv[n++] = "--color=never";
  argv[n++] = "--with-filename";
  if (icase) argv[n++] = "--ignore-case";
  if (files_only) argv[n++] = "--files-with-matches";
  if (context) {
    snprintf(ctx, sizeof ctx, "--context=%ld", context);
    argv[n++] = ctx;
  }
  /* .gitignore files apply inside a git repository or not, as in the built-in search. */
  argv[n++] = "--no-require-git";
  /* Paths come as PATH NUL LINE:TEXT, so that the text can be found (and a long line cut) whatever the path. */
  if (!files_only) argv[n++] = "--null";
  /* rg skips what .gitignore names, but node_modules is often not named there (or there is no .gitignore):
   * like the built-in search, leave it out unless a glob or the path asks for it. A later --glob wins in rg, so
   * the caller's come after. */
  int vendored = path && strstr(path, "node_modules") != NULL;
  for (int i = 0; i < nglobs; i++) vendored |= strstr(globs[i], "node_modules") != NULL;
  if (!vendored) argv[n++] = "--glob", argv[n++] = "!node_modules";
  for (int i = 0; i < nglobs; i++) argv[n++] = "--glob", argv[n++] = globs[i];
  argv[n++] = "--regexp";
  argv[n++] = (char *)pattern;
  argv[n++] = "--";
  argv[n++] = (char *)(path ? path : ".");
  argv[n] = NULL;
  int fds[2];
  if (pipe(fds) < 0) fail("pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) fail("fork: %s", strerror(errno));
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execvp("rg", argv);
    int e = errno;
    fprintf(stderr, "file_grep: cannot run rg: %s\n", strerror(e));
    _exit(e == ENOENT ? 127 : 126);
  }
  close(fds[1]);
  FILE *in = fdopen(fds[0], "r");
  char *line = NULL;
  size_t cap = 0;
  ssize_t l;
  while ((l = getline(&line, &cap, in)) > 0) {
    size_t ll = (size_t)l;
    if (ll && line[ll - 1] == '\n') ll--;
    /* PATH NUL NUMBER (':' for a match, '-' for context) TEXT; anything else (a separator) as it is. */
    char *nul = memchr(line, 0, ll);
    int is_result = files_only || strcmp(line, "--\n");
    if (nul) {
      char *t = nul + 1;
      while (t < line + ll && *t >= '0' && *t <= '9') t++;
      if (t < line + ll && (*t == ':' || *t == '-')) {
        is_result = *t == ':';
        /* As the built-in search prints them: PATH:NUMBER:TEXT, context PATH:NUMBER-TEXT. */
        fwrite(line, 1, (size_t)(nul - line), stdout);
        putchar(':');
        fwrite(nul + 1, 1, (size_t)(t - nul), stdout);
        put_text(t + 1, (size_t)(line + ll - t - 1), is_result);
        putchar('\n');
      } else {
        *nul = ':';
        put_text(line, ll, 1);
        putchar('\n');
      }
    } else {
      put_text(line, ll, 0);
      putchar('\n');
    }
    /* Context lines and separators do not count as results. */
    if (is_result && ++results >= max_results) {
      stopped = 1;
      kill(pid, SIGTERM);
      break;
    }
  }
  int status;
  waitpid(pid, &status, 0);
  if (stopped) return 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1) return 1; /* no match */
  /*
   * rg could not run at all (not executable where it was found, gone since the variant was chosen, killed by a
   * limit or a filter) and printed nothing: the built-in search answers instead of the call failing.
   */
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (results == 0 && (code == 126 || code == 127 || WIFSIGNALED(status))) {
    if (WIFSIGNALED(status)) fprintf(stderr, "file_grep: rg was killed by signal %d\n", WTERMSIG(status));
    fprintf(stderr, "file_grep: using the built-in search instead of rg\n");
    return -1;
  }
  if (code != 0) exit(2);
  return 0;
}

int main(int argc, char **argv) {
  tool_name = "file_grep";
  struct args *a = args_read();
  const char *pattern = arg_str(a, "pattern", NULL);
  const char *path = arg_str(a, "path", NULL);
  int icase = arg_bool(a, "ignore_case", 0);
  context = arg_int(a, "context", 0);
  files_only = arg_bool(a, "files_only", 0);
  max_results = arg_int(a, "max_results", 500);
  if (!pattern || !*pattern) fail("argument pattern is required");
  if (context < 0 || context > 20) fail("context must be between 0 and 20");
  if (max_results < 1) fail("max_results must be at least 1");
  /* glob: a list of strings, or one string; each brace-expanded. */
  globs = calloc(MAX_GLOBS, sizeof *globs);
  for (const char *p = arg_strs(a, "glob"); p && *p && nglobs < MAX_GLOBS; p += strlen(p) + 1) {
    char **exp;
    int m = glob_braces(p, &exp);
    for (int i = 0; i < m && nglobs < MAX_GLOBS; i++) globs[nglobs++] = exp[i];
  }

  int none = -1;
  pattern_text = pattern;
  pattern_icase = icase;
  if (argc > 1 && !strcmp(argv[1], "--rg")) none = run_rg(pattern, path, icase);
  if (none < 0) {
    char *tr = translate(pattern);
    int rc = regcomp(&re, tr, REG_EXTENDED | REG_NOSUB | REG_NEWLINE | (icase ? REG_ICASE : 0));
    if (rc) {
      char msg[256];
      regerror(rc, &re, msg, sizeof msg);
      fail("bad regular expression %s: %s", pattern, msg);
    }
    const char *root = path && *path ? path : ".";
    struct stat st;
    if (stat(root, &st) < 0) fail("%s: %s", root, strerror(errno));
    display_root = "";
    if (S_ISDIR(st.st_mode)) {
      char *prefix = NULL;
      if (path && *path && strcmp(path, ".")) {
        if (asprintf(&prefix, "%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/") < 0) fail("out of memory");
        display_root = prefix;
      }
      walk(NULL, root, WALK_GITIGNORE, visit, NULL);
    } else {
      grep_file(root, root, 1);
    }
    none = results == 0;
  }
  if (none) printf("no matches for %s\n", pattern);
  if (stopped) printf("[stopped after %ld results: narrow the search or raise max_results]\n", max_results);
  return 0;
}
