/*
 * file_write: {"path", "content"} writes content to path, replacing the file (its mode is kept) or creating it
 * and any missing parent directories. Written in C to start as fast as file_read.
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

static void mkdirs(char *path) {
  for (char *s = path + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(path, 0777) < 0 && errno != EEXIST) fail("cannot create directory %s: %s", path, strerror(errno));
    *s = '/';
  }
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  tool_name = "file_write";
  struct args *a = args_read();
  const char *path = arg_str(a, "path", NULL);
  size_t len;
  const char *content = arg_str(a, "content", &len);
  if (!path || !*path) fail("argument path is required");
  if (!content) fail("argument content is required");

  struct stat st;
  int existed = stat(path, &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) fail("%s is a directory", path);
  if (!existed) {
    char *dir = strdup(path);
    mkdirs(dir);
    free(dir);
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail("%s: %s", path, strerror(errno));
  for (size_t off = 0; off < len;) {
    ssize_t w = write(fd, content + off, len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("%s: %s", path, strerror(errno));
    }
    off += (size_t)w;
  }
  if (close(fd) < 0) fail("%s: %s", path, strerror(errno));
  size_t lines = 0;
  for (size_t i = 0; i < len; i++) lines += content[i] == '\n';
  if (len && content[len - 1] != '\n') lines++;
  printf("%s %s: %zu bytes, %zu lines\n", existed ? "overwrote" : "created", path, len, lines);
  return 0;
}
