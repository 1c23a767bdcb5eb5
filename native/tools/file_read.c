/*
 * file_read: {"path", "offset"?, "limit"?} prints lines offset..offset+limit-1 (1-based) of a text file,
 * each prefixed with its number and a tab, and says how to continue when more follow. A file with a NUL byte
 * in its first 8 KiB is reported as binary instead. Written in C: it is the most frequent tool call, and the
 * budget for it end to end through toolsrv is 5 ms.
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

#define DEFAULT_LIMIT 2000
#define MAX_LINE 2000 /* characters of one line shown; longer lines are cut */
#define SNIFF 8192

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  tool_name = "file_read";
  struct args *a = args_read();
  const char *path = arg_str(a, "path", NULL);
  if (!path || !*path) fail("argument path is required");
  long long offset = arg_int(a, "offset", 1);
  long long limit = arg_int(a, "limit", DEFAULT_LIMIT);
  if (offset < 1) offset = 1;
  if (limit < 1) fail("limit must be at least 1");

  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0) fail("%s: %s", path, strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("%s is a directory (use file_glob to list it)", path);

  FILE *f = fdopen(fd, "r");
  if (!f) fail("%s: %s", path, strerror(errno));
  static char sniff[SNIFF];
  size_t got = fread(sniff, 1, SNIFF, f);
  if (memchr(sniff, 0, got)) {
    printf("%s: binary file (%lld bytes), not shown\n", path, (long long)st.st_size);
    return 0;
  }
  if (got == 0) {
    printf("%s: empty file\n", path);
    return 0;
  }
  rewind(f);

  static char out[1 << 16];
  setvbuf(stdout, out, _IOFBF, sizeof out);
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  long long no = 0, last = offset + limit - 1, crlf = 0;
  int more = 0;
  while ((n = getline(&line, &cap, f)) >= 0) {
    no++;
    if (no < offset) continue;
    if (no > last) {
      more = 1;
      break;
    }
    if (n > 0 && line[n - 1] == '\n') n--;
    if (n > 0 && line[n - 1] == '\r') n--, crlf++;
    if (n > MAX_LINE) {
      printf("%6lld\t%.*s… [line cut at %d of %zd characters]\n", no, MAX_LINE, line, MAX_LINE, n);
    } else {
      printf("%6lld\t%.*s\n", no, (int)n, line);
    }
  }
  if (ferror(f)) fail("%s: %s", path, strerror(errno));
  /* The \r of CRLF line ends is not shown (it would clutter every line), but the model must know it is there:
   * text it copies from this output has LF line ends, and file_edit needs to know what it is matching. */
  if (crlf) {
    printf("[%s: %lld of the lines shown end in CRLF (\\r\\n), not shown; file_edit matches LF text against them]\n",
           path, crlf);
  }
  if (no < offset) {
    printf("%s has %lld lines; offset %lld is past the end\n", path, no, offset);
  } else if (more) {
    printf("[more lines follow: continue with offset=%lld]\n", last + 1);
  }
  return 0;
}
