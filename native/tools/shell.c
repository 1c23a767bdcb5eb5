/*
 * shell: runs {"command": "..."} with bash -c in the current directory (toolsrv starts tools in the agent's
 * cwd), stderr merged into stdout; the exit code is bash's. Written in C so that a call costs one exec
 * more than bash itself, not a Node start.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "lib/common.h"

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  tool_name = "shell";
  struct args *a = args_read();
  const char *cmd = arg_str(a, "command", NULL);
  if (!cmd) fail("argument command is required");
  /* The JSON was the whole of stdin: give the command an empty stdin rather than a drained pipe. */
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) dup2(null, 0);
  dup2(1, 2);
  char *const bash[] = {"bash", "-c", (char *)cmd, NULL};
  execv("/bin/bash", bash);
  execvp("bash", bash);
  fail("cannot run bash: %s", strerror(errno));
}
