/*
 * ollie-spawner: starts toolsrv's tool processes, so that toolsrv (a large Node process) never forks.
 *
 * Node's child_process.spawn forks the whole Node process and then waits, with its event loop blocked, until
 * the child has exec'd: measured here at 2.3 ms of blocked toolsrv per tool call, during which no other call
 * makes progress. This program is small, so its fork costs tens of microseconds, and it forks on toolsrv's
 * behalf. It is a fork server in the manner of a zygote: one per toolsrv, started once, driven over its
 * stdin and stdout with the binary frames below, exiting when its stdin closes (toolsrv gone), after
 * killing the process groups it started.
 *
 * Containment. Each tool process is a child subreaper (PR_SET_CHILD_SUBREAPER, kept across its execs): whatever
 * it starts stays its descendant however it detaches (setsid, a double fork), because orphans go to the nearest
 * living subreaper. When it exits, they come to the spawner, a subreaper too, whose only legitimate children
 * are the calls' tool processes: every other child is a stray, and is killed with everything below it. A call's
 * exit is reported once no stray is left, so when toolsrv hears of it nothing of the call runs any more. The
 * same when the spawner leaves (toolsrv gone). A guardian, the spawner's parent and a subreaper, kills
 * everything the spawner leaves behind should it be killed outright. No cgroup is needed, so it works
 * unprivileged everywhere. (A tool that clears its own subreaper flag hands its orphans to the spawner at
 * once, which kills them as strays; as it does the siblings clone(CLONE_PARENT) makes. Strays are outside the
 * tree a call's limits count, so the sandbox helper's seccomp filter refuses both to sandboxed tools.)
 *
 * Limits. The tool starts with rlimits (RLIMIT_DATA for memory, RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE),
 * which bound each process, and the spawner bounds the call as a whole: every POLL_MS it counts the processes
 * below each tool and sums their resident memory, and kills them all when either is over its limit
 * (RLIMIT_NPROC cannot do this: it counts every process of the user, and does not apply to root).
 * Long-lived processes ('T': resident tool hosts, stdio MCP servers) are contained and limited the same way;
 * toolsrv sends them no CPU-seconds limit, which would kill a server once it had served for long enough.
 *
 * Every frame is: u32 length of what follows, u8 type, u32 id, payload (little-endian integers).
 *   toolsrv -> spawner
 *     'S' spawn   u32 argc, argc NUL-terminated strings (argv[0] is the program: a path, or a name found on
 *                 the child's PATH); u32 envc, envc "K=V" strings; the cwd, NUL-terminated; five u64 limits,
 *                 0 for none: processes, memory bytes, CPU seconds, file size bytes, open files; the rest is
 *                 written to the child's stdin, which is then closed.
 *     'T' start   a long-lived process (a resident tool host, a stdio MCP server): the payload of 'S', but the
 *                 child's stdin stays open once the trailing bytes are written (they count as an 'I' would),
 *                 and its stderr is a pipe of its own, relayed as 'R' (JSON-RPC on stdout must never be mixed
 *                 with its logs).
 *     'Y' tty     a tool on a terminal of its own: u16 columns, u16 rows, then the payload of 'T'. The child gets a
 *                 new pseudo-terminal as its controlling terminal (it leads the session, as every child does) and
 *                 as its stdin, stdout and stderr; the spawner keeps the master (close-on-exec, never in a child),
 *                 relays what the terminal prints as 'O' and writes 'I' bytes into it, as keystrokes. The master
 *                 reads EIO once no process holds the terminal any longer: its end of output ('E'). Contained and
 *                 limited as 'S' is (CPU seconds included: a tty tool is a call, not a server).
 *     'W' size    u16 columns, u16 rows: the new size of a 'Y' child's terminal (its foreground group gets
 *                 SIGWINCH). Ignored for an id that is not a running 'Y' child.
 *     'I' input   more bytes for the stdin of a 'T' child, or keystrokes for a 'Y' child's terminal, written as
 *                 it reads them. What waits unwritten is bounded by IN_MAX: an 'I' that would take it past that
 *                 closes the child's stdin (stops typing into its terminal) and drops what waited, and 'Q' says
 *                 so. A child that has not read 16 MiB is stuck or hostile, and buffering for it without end would
 *                 let it grow the spawner's memory at toolsrv's pace. Ignored for an id that is not running, or
 *                 whose stdin is closed (a child that closed its end of the pipe; a race with its exit is normal).
 *     'D' done    close the stdin of a 'T' child once what waits is written (the child sees end of file). For a
 *                 'Y' child, only the typing stops: its terminal stays open as long as it does.
 *     'C' close   stop reading the child's output: toolsrv gave up waiting for a pipe that a process which
 *                 left the group still holds, and the descriptor must not stay open here for as long as it runs.
 *                 Also closes the child's stdin.
 *   spawner -> toolsrv
 *     'P' started u32 pid (the child leads a new session, so its process group is -pid)
 *     'F' failed  a message saying what could not be done (chdir, exec) and why; nothing runs
 *     'O' output  bytes the child wrote to stdout or stderr (one pipe: they arrive in the order written), or
 *                 what a 'Y' child's terminal printed
 *     'X' exited  i32 exit code (-1 when killed), i32 signal number (0 when it exited), u32 the limit the
 *                 spawner killed the call for (0 none, 1 processes, 2 memory, 3 threads); sent once every process of
 *                 the call is gone
 *     'E' closed  the output pipe reached end of file (no process of the call holds it any longer); for a 'T'
 *                 child, once its stdout and its stderr pipes both have
 *     'R' stderr  bytes a 'T' child wrote to stderr
 *     'Q' dropped the stdin of a 'T' child was closed because more than IN_MAX bytes waited for it to read
 * A 'T' or 'Y' child's stdin is closed when it is reaped: nothing could read what comes after.
 * A protocol error (a frame that does not parse) is reported on stderr and ends the spawner: toolsrv is its
 * only client, so a bad frame is a bug there, and the in-flight calls fail with that message.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME (64u << 20) /* argv + env + stdin; toolsrv's own limits are far below */
#define READ_CHUNK 65536
/* How often the spawner counts each call's processes and their memory, when the call has such limits. */
#define POLL_MS 50
/* Seconds between SIGXCPU (the soft CPU limit) and SIGKILL (the hard one), for a tool that catches SIGXCPU. */
#define CPU_GRACE 5
/* The most stdin bytes that may wait for a 'T' child to read them (see 'I' above). */
#define IN_MAX (16u << 20)

enum { LIMIT_NONE = 0, LIMIT_PROCESSES = 1, LIMIT_MEMORY = 2, LIMIT_THREADS = 3 };
/*
 * Threads a call may hold, per process its limit allows (4,096 for the default 256 processes). Each thread takes a
 * pid as a process does, and costs this count a read of its children: without a bound a call could hold tens of
 * thousands of idle threads, small in memory, use up the machine's pids and slow every spawn. Sixteen per process
 * leaves room for a JVM's or a browser's threads, which the process limit alone would not.
 */
#define THREADS_PER_PROCESS 16

/* One call's limits, 0 for none. */
struct limits {
  uint64_t processes, memory, cpu, fsize, nofile;
};

struct child {
  uint32_t id;
  pid_t pid;        /* the tool, leader of its own session and subreaper of its processes; 0 once reaped */
  int out;          /* read end of stdout+stderr (stdout alone for a 'T' child, the master for 'Y'), -1 once closed */
  int err;          /* read end of a 'T' child's stderr; -1 once closed, and always for an 'S' child */
  int in;           /* write end of stdin, -1 once closed */
  char *in_buf;     /* stdin still to write: in_buf[in_off..in_len) */
  size_t in_len, in_off, in_cap;
  int interactive;  /* a 'T' or 'Y' child: its stdin stays open when drained */
  int tty;          /* a 'Y' child: `out` is its terminal's master, `in` a duplicate of it */
  int in_end;       /* 'D' came: close stdin once drained */
  struct limits lim;
  uint32_t over;    /* the limit it was killed for */
  int ended;        /* reaped; its exit (x) waits for the strays to be gone */
  char x[12];
};

static struct child *kids;
static size_t nkids, capkids;

static void kill_tree(pid_t root);
static size_t kill_strays(void);

/* Every way out ends the calls it started: with the spawner gone nobody could stop them any more, and a tool
 * must not outlive the server that answers for it. Killed, each with everything below it, before the exit:
 * a process with SIGKILL pending forks no more, so nothing is left to escape. */
static void leave(int code) __attribute__((noreturn));
static void leave(int code) {
  for (size_t i = 0; i < nkids; i++)
    if (kids[i].pid) kill_tree(kids[i].pid);
  kill_strays();
  exit(code);
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("ollie-spawner: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  leave(1);
}

/* ---- frames to toolsrv ----------------------------------------------------------------------------- */

static void write_all(int fd, const void *p, size_t n) {
  const char *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd pf = {fd, POLLOUT, 0};
        poll(&pf, 1, -1);
        continue;
      }
      leave(0); /* toolsrv is gone: nobody is left to tell */
    }
    b += w;
    n -= (size_t)w;
  }
}

static void put_u32(char *p, uint32_t v) {
  p[0] = (char)v, p[1] = (char)(v >> 8), p[2] = (char)(v >> 16), p[3] = (char)(v >> 24);
}

static uint32_t get_u32(const char *p) {
  const unsigned char *u = (const unsigned char *)p;
  return u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static void send_frame(char type, uint32_t id, const void *payload, size_t len) {
  char head[9];
  put_u32(head, (uint32_t)(5 + len));
  head[4] = type;
  put_u32(head + 5, id);
  struct iovec iov[2] = {{head, 9}, {(void *)payload, len}};
  /* One writev for small frames (the common case); write_all finishes a partial one. */
  ssize_t w;
  do w = writev(1, iov, len ? 2 : 1);
  while (w < 0 && errno == EINTR);
  if (w < 0 && errno != EAGAIN) leave(0);
  size_t done = w < 0 ? 0 : (size_t)w;
  if (done < 9) {
    write_all(1, head + done, 9 - done);
    done = 9;
  }
  if (done - 9 < len) write_all(1, (const char *)payload + (done - 9), len - (done - 9));
}

static void send_failed(uint32_t id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_failed(uint32_t id, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  send_frame('F', id, msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

/* ---- children ------------------------------------------------------------------------------------- */

static struct child *add_child(void) {
  if (nkids == capkids) {
    capkids = capkids ? capkids * 2 : 16;
    kids = realloc(kids, capkids * sizeof *kids);
    if (!kids) die("out of memory");
  }
  return &kids[nkids++];
}

/* A call is forgotten once it is reaped, its exit reported, its output closed and its stdin written. */
static void sweep(void) {
  size_t j = 0;
  for (size_t i = 0; i < nkids; i++) {
    if (kids[i].pid || kids[i].ended || kids[i].out >= 0 || kids[i].err >= 0 || kids[i].in >= 0) kids[j++] = kids[i];
  }
  nkids = j;
}

static void close_stdin(struct child *c) {
  if (c->in >= 0) close(c->in);
  c->in = -1;
  free(c->in_buf);
  c->in_buf = NULL;
  c->in_len = c->in_off = c->in_cap = 0;
}

static void pump_stdin(struct child *c) {
  while (c->in >= 0 && c->in_off < c->in_len) {
    ssize_t w = write(c->in, c->in_buf + c->in_off, c->in_len - c->in_off);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      break; /* EPIPE: a tool that never reads its arguments */
    }
    c->in_off += (size_t)w;
  }
  if (c->in >= 0 && c->in_off == c->in_len && c->interactive && !c->in_end) {
    c->in_off = c->in_len = 0; /* all written; the pipe stays open for the next 'I' */
    return;
  }
  close_stdin(c);
}

/* An 'I' frame: queues the bytes behind what waits (bounded by IN_MAX) and writes what the pipe takes now. */
static void add_input(struct child *c, const char *p, size_t n) {
  if (c->in < 0) return;
  if (c->in_len - c->in_off + n > IN_MAX) {
    close_stdin(c);
    send_frame('Q', c->id, NULL, 0);
    return;
  }
  if (c->in_off) {
    memmove(c->in_buf, c->in_buf + c->in_off, c->in_len - c->in_off);
    c->in_len -= c->in_off, c->in_off = 0;
  }
  if (c->in_len + n > c->in_cap) {
    size_t cap = c->in_cap ? c->in_cap : READ_CHUNK;
    while (cap < c->in_len + n) cap *= 2;
    char *b = realloc(c->in_buf, cap);
    if (!b) die("out of memory");
    c->in_buf = b, c->in_cap = cap;
  }
  memcpy(c->in_buf + c->in_len, p, n);
  c->in_len += n;
  pump_stdin(c);
}

/* Relays what the child wrote to one of its pipes (`*fd`, as frame `type`), two chunks at most: a tool writing
 * without pause must not hold up the spawns, exits and output of the others (poll brings it back for the rest).
 * 'E' goes once every output pipe of the child is at end of file. */
static void drain_pipe(struct child *c, int *fd, char type) {
  static char buf[READ_CHUNK];
  for (int chunks = 0; chunks < 2;) {
    ssize_t r = read(*fd, buf, sizeof buf);
    if (r > 0) {
      send_frame(type, c->id, buf, (size_t)r);
      if ((size_t)r < sizeof buf) return; /* likely drained; poll says when there is more */
      chunks++;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return;
    close(*fd);
    *fd = -1;
    if (c->out < 0 && c->err < 0) send_frame('E', c->id, NULL, 0);
    return;
  }
}

static void drain_output(struct child *c) {
  if (c->out >= 0) drain_pipe(c, &c->out, 'O');
  if (c->err >= 0) drain_pipe(c, &c->err, 'R');
}

/* The symbolic name of an errno (strerrorname_np is glibc 2.32 and later only). */
static const char *errno_name(int e) {
  switch (e) {
#define N(x) case x: return #x;
    N(ENOENT) N(EACCES) N(EPERM) N(ENOEXEC) N(ENOTDIR) N(EISDIR) N(ELOOP) N(ENAMETOOLONG) N(E2BIG) N(ENOMEM)
    N(ETXTBSY) N(EMFILE) N(ENFILE) N(EFAULT) N(EIO) N(EINVAL) N(ELIBBAD) N(ENXIO) N(ENOSPC)
#undef N
    default: return "error";
  }
}

/* Closes every descriptor from `lowest` on (close_range needs Linux 5.9; older kernels get the loop). */
static void close_from(int lowest) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)lowest, ~0U, 0) == 0) return;
#endif
  /* The open descriptors as the kernel lists them: a loop up to a limit would miss any above it. */
  DIR *d = opendir("/proc/self/fd");
  if (d) {
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
      int fd = atoi(e->d_name);
      if (fd >= lowest && fd != self) close(fd);
    }
    closedir(d);
    return;
  }
  struct rlimit rl;
  rlim_t max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 1u << 20;
  for (rlim_t fd = (rlim_t)lowest; fd < max; fd++) close((int)fd);
}

/* Looks `name` up on the PATH of the child's environment, as execvp would with that environment. */
static void exec_in_path(const char *name, char **argv, char **envp) {
  if (strchr(name, '/')) {
    execve(name, argv, envp);
    return;
  }
  const char *path = "/usr/local/bin:/usr/bin:/bin";
  for (char **e = envp; *e; e++)
    if (!strncmp(*e, "PATH=", 5)) path = *e + 5;
  int saved = ENOENT;
  char full[4096];
  for (const char *p = path;; p++) {
    const char *end = strchrnul(p, ':');
    int n = snprintf(full, sizeof full, "%.*s%s%s", (int)(end - p), p, end == p ? "" : "/", name);
    if (n > 0 && (size_t)n < sizeof full) {
      execve(full, argv, envp);
      if (errno == EACCES) saved = EACCES; /* as execvp: a later ENOENT does not hide a permission problem */
      else if (errno != ENOENT && errno != ENOTDIR) saved = errno;
    }
    if (!*end) break;
    p = end;
  }
  errno = saved;
}

/* ---- process trees ---------------------------------------------------------------------------------- */

struct pids {
  pid_t *v;
  size_t n, cap;
};

static void push_pid(struct pids *l, pid_t p) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    if (!l->v) _exit(125);
  }
  l->v[l->n++] = p;
}

/* Appends the children of `pid` (of each of its threads: a child belongs to the thread that forked it); returns
 * how many threads it has. */
static size_t children_of(pid_t pid, struct pids *out) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  size_t threads = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    threads++;
    char file[320];
    snprintf(file, sizeof file, "/proc/%d/task/%.32s/children", (int)pid, e->d_name);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[4096];
    long cur = -1;
    ssize_t r;
    /* Space-separated pids; one may straddle two reads. */
    while ((r = read(fd, buf, sizeof buf)) > 0) {
      for (ssize_t i = 0; i < r; i++) {
        if (buf[i] >= '0' && buf[i] <= '9') cur = (cur < 0 ? 0 : cur * 10) + (buf[i] - '0');
        else if (cur >= 0) push_pid(out, (pid_t)cur), cur = -1;
      }
    }
    if (cur >= 0) push_pid(out, (pid_t)cur);
    close(fd);
  }
  closedir(d);
  return threads;
}

/* Whether the statm file at `path` is a live process's (a zombie's reads 0), and its resident pages. */
static int statm_live(const char *path, unsigned long *resident) {
  char buf[128];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  unsigned long size;
  return r > 0 && (buf[r] = 0, sscanf(buf, "%lu %lu", &size, resident) == 2) && size > 0;
}

/*
 * Whether `pid` (with `tasks` threads) still runs, and its resident pages. Its main thread may have exited
 * (pthread_exit) while others run: /proc/PID/statm then reads 0 as a zombie's does, so the memory is read
 * through another of its threads; else the process, its threads and its memory would go uncounted.
 */
static int resident_of(pid_t pid, size_t tasks, unsigned long *resident) {
  char path[320];
  snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
  if (statm_live(path, resident)) return 1;
  if (tasks < 2) return 0;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  int live = 0;
  struct dirent *e;
  while (!live && (e = readdir(d))) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == pid) continue;
    snprintf(path, sizeof path, "/proc/%d/task/%.32s/statm", (int)pid, e->d_name);
    live = statm_live(path, resident);
  }
  closedir(d);
  return live;
}

/*
 * `root` and its descendants, breadth first (no recursion: a chain of processes can be deep). With `kill_them`,
 * each is killed before its children are listed: once SIGKILL is pending a process forks no more, so none is
 * missed, and a dying process reaps nobody, so no pid listed is reused meanwhile. Otherwise counts them, but
 * not zombies (a tool that does not reap its orphans' remains is not running them), adding up their resident
 * memory in bytes into `rss` and their threads into `threads`.
 */
static size_t tree(pid_t root, int kill_them, uint64_t *rss, size_t *threads) {
  static struct pids l;
  static long page;
  if (!page) page = sysconf(_SC_PAGESIZE);
  l.n = 0;
  push_pid(&l, root);
  size_t live = 0;
  for (size_t i = 0; i < l.n; i++) {
    pid_t p = l.v[i];
    if (kill_them) kill(p, SIGKILL);
    size_t t = children_of(p, &l);
    unsigned long resident;
    if (!kill_them && resident_of(p, t, &resident)) {
      live++;
      *rss += (uint64_t)resident * (uint64_t)page;
      *threads += t ? t : 1;
    }
  }
  return kill_them ? l.n : live;
}

static void kill_tree(pid_t root) {
  tree(root, 1, NULL, NULL);
}

/* A live call's tool process. */
static int is_tool(pid_t pid) {
  for (size_t k = 0; k < nkids; k++)
    if (kids[k].pid == pid) return 1;
  return 0;
}

/* Kills every child of the spawner that is not a call's tool, with everything below it: orphans of a tool that
 * exited (or cleared its subreaper flag). Returns how many there were. */
static size_t kill_strays(void) {
  struct pids l = {0};
  children_of(getpid(), &l);
  size_t n = 0;
  for (size_t i = 0; i < l.n; i++)
    if (!is_tool(l.v[i])) kill_tree(l.v[i]), n++;
  free(l.v);
  return n;
}

/* Sets an rlimit to `v` (soft) and `hard`, never above the hard limit the spawner itself has. */
static int set_limit(int res, uint64_t v, uint64_t hard) {
  struct rlimit r;
  if (getrlimit(res, &r) < 0) return -1;
  if (r.rlim_max != RLIM_INFINITY && v > r.rlim_max) v = r.rlim_max;
  if (r.rlim_max != RLIM_INFINITY && hard > r.rlim_max) hard = r.rlim_max;
  r.rlim_cur = (rlim_t)v;
  r.rlim_max = (rlim_t)hard;
  return setrlimit(res, &r);
}

/*
 * A new pseudo-terminal of `cols` by `rows`: its master (non-blocking) in *master, the terminal in *term, both
 * close-on-exec. The terminal is opened here rather than by name in the child, so that what the child gets is
 * this master's peer and nothing else. Returns -1 with errno set, having closed what it opened.
 */
static int open_tty(uint16_t cols, uint16_t rows, int *master, int *term) {
  *master = *term = -1;
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -1;
  char name[128];
  struct winsize ws = {.ws_row = rows, .ws_col = cols};
  /* O_CLOEXEC again by fcntl: POSIX leaves posix_openpt's other flags to the C library. */
  if (fcntl(m, F_SETFD, FD_CLOEXEC) < 0 || grantpt(m) < 0 || unlockpt(m) < 0 ||
      (errno = ptsname_r(m, name, sizeof name)) != 0 || ioctl(m, TIOCSWINSZ, &ws) < 0 ||
      fcntl(m, F_SETFL, O_NONBLOCK) < 0 || (*term = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
    int e = errno;
    close(m);
    errno = e;
    return -1;
  }
  *master = m;
  return 0;
}

/* Closes the spawner's copies of a child's stdin, stdout and stderr (one descriptor for all three on a terminal). */
static void close_child_ends(int cin, int cout, int cerr) {
  if (cin >= 0) close(cin);
  if (cout >= 0 && cout != cin) close(cout);
  if (cerr >= 0 && cerr != cin && cerr != cout) close(cerr);
}

/*
 * Parses a spawn frame of `type` ('S', 'T' or 'Y') and starts the child. The child reports a failed chdir,
 * setrlimit or exec through a close-on-exec pipe (as libuv does): a successful exec closes it empty, so the parent
 * learns the outcome before it answers.
 */
static void spawn_child(char type, uint32_t id, char *p, size_t len, const sigset_t *oldmask) {
  int tty = type == 'Y', interactive = type != 'S';
  char *end = p + len;
#define NEED(n) \
  if ((size_t)(end - p) < (size_t)(n)) die("spawn frame %u is truncated", id)
  uint16_t cols = 0, rows = 0;
  if (tty) {
    NEED(4);
    cols = (uint16_t)((unsigned char)p[0] | (unsigned char)p[1] << 8);
    rows = (uint16_t)((unsigned char)p[2] | (unsigned char)p[3] << 8);
    p += 4;
  }
  NEED(4);
  uint32_t argc = get_u32(p);
  p += 4;
  if (argc == 0 || argc > 1u << 20) die("spawn frame %u has %u arguments", id, argc);
  char **argv = calloc(argc + 1, sizeof *argv);
  if (!argv) die("out of memory");
  for (uint32_t i = 0; i < argc; i++) {
    char *z = memchr(p, 0, (size_t)(end - p));
    if (!z) die("spawn frame %u: argument %u is not NUL-terminated", id, i);
    argv[i] = p;
    p = z + 1;
  }
  NEED(4);
  uint32_t envc = get_u32(p);
  p += 4;
  if (envc > 1u << 20) die("spawn frame %u has %u environment entries", id, envc);
  char **envp = calloc(envc + 1, sizeof *envp);
  if (!envp) die("out of memory");
  for (uint32_t i = 0; i < envc; i++) {
    char *z = memchr(p, 0, (size_t)(end - p));
    if (!z) die("spawn frame %u: environment entry %u is not NUL-terminated", id, i);
    envp[i] = p;
    p = z + 1;
  }
  char *z = memchr(p, 0, (size_t)(end - p));
  if (!z) die("spawn frame %u: the cwd is not NUL-terminated", id);
  const char *cwd = p;
  p = z + 1;
  NEED(40);
  struct limits lim;
  uint64_t *fields[] = {&lim.processes, &lim.memory, &lim.cpu, &lim.fsize, &lim.nofile};
  for (int i = 0; i < 5; i++, p += 8) *fields[i] = get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
#undef NEED

  /* Ours: `in`, `out`, `err` as in struct child. The child's: `cin`, `cout`, `cerr` (an 'S' child's stdout and
   * stderr are one pipe, a 'Y' child's three are its terminal). `report` carries a failed start's reason. */
  int in = -1, out = -1, err = -1, cin = -1, cout = -1, cerr = -1, report[2] = {-1, -1};
  int ok = 1;
  if (tty) {
    /* `in` is a second descriptor of the master, so that closing the input ('D', IN_MAX) leaves the output. */
    ok = open_tty(cols, rows, &out, &cin) == 0 && (in = fcntl(out, F_DUPFD_CLOEXEC, 3)) >= 0;
    cout = cerr = cin;
  } else {
    int a[2], b[2], e[2];
    if ((ok = pipe2(a, O_CLOEXEC) == 0)) cin = a[0], in = a[1];
    if (ok && (ok = pipe2(b, O_CLOEXEC) == 0)) out = b[0], cout = cerr = b[1];
    if (ok && interactive && (ok = pipe2(e, O_CLOEXEC) == 0)) err = e[0], cerr = e[1];
  }
  if (ok) ok = pipe2(report, O_CLOEXEC) == 0;
  if (!ok) {
    int e = errno;
    close_child_ends(cin, cout, cerr);
    close_child_ends(in, out, err);
    send_failed(id, "cannot start %s: %s: %s (%s)", argv[0], tty ? "pseudo-terminal" : "pipe", errno_name(e),
                strerror(e));
    free(argv), free(envp);
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    /* The child: a session of its own (its group is signalled as one), the subreaper of whatever it starts,
     * the default signal handling toolsrv's children had, stdin from the pipe, stdout and stderr into one
     * pipe (two for a 'T' child; all three on the terminal, its controlling one, for a 'Y' child), the call's
     * rlimits. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGPIPE, &dfl, NULL);
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    setsid();
    const char *stage = "prctl(PR_SET_CHILD_SUBREAPER)", *what = "";
    int fd = report[1];
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) == 0) {
      stage = "chdir ", what = cwd;
      if (chdir(cwd) == 0) {
        stage = "setrlimit", what = "";
        if ((!lim.memory || set_limit(RLIMIT_DATA, lim.memory, lim.memory) == 0) &&
            (!lim.cpu || set_limit(RLIMIT_CPU, lim.cpu, lim.cpu + CPU_GRACE) == 0) &&
            (!lim.fsize || set_limit(RLIMIT_FSIZE, lim.fsize, lim.fsize) == 0) &&
            (!lim.nofile || set_limit(RLIMIT_NOFILE, lim.nofile, lim.nofile) == 0)) {
          stage = "ioctl(TIOCSCTTY)";
          if (!tty || ioctl(cin, TIOCSCTTY, 0) == 0) {
            stage = "dup2";
            if (dup2(cin, 0) >= 0 && dup2(cout, 1) >= 0 && dup2(cerr, 2) >= 0 &&
                (fd == 3 || dup3(report[1], 3, O_CLOEXEC) == 3)) {
              fd = 3;
              /* Nothing else crosses into the tool (the master of its terminal least of all): Landlock does not
               * govern descriptors that are already open, so one inherited from toolsrv's own parent would be a
               * way around the sandbox. */
              close_from(4);
              stage = "exec";
              exec_in_path(argv[0], argv, envp);
            }
          }
        }
      }
    }
    int e = errno;
    char msg[512];
    int n = snprintf(msg, sizeof msg, "%s%s: %s (%s)", stage, what, errno_name(e), strerror(e));
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    if (write(fd, msg, (size_t)n) < 0) _exit(127);
    _exit(127);
  }
  int fork_errno = errno;
  close_child_ends(cin, cout, cerr);
  close(report[1]);
  if (pid < 0) {
    close_child_ends(in, out, err);
    close(report[0]);
    send_failed(id, "cannot start %s: fork: %s", argv[0], strerror(fork_errno));
    free(argv), free(envp);
    return;
  }
  char why[512];
  ssize_t n;
  do n = read(report[0], why, sizeof why - 1);
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n > 0) {
    why[n] = 0;
    close_child_ends(in, out, err);
    /* The child has _exit'ed or is about to; its reaping in reap() finds no entry and is dropped. */
    waitpid(pid, NULL, 0);
    send_failed(id, "cannot start %s: %s", argv[0], why);
    free(argv), free(envp);
    return;
  }
  fcntl(in, F_SETFL, O_NONBLOCK);
  fcntl(out, F_SETFL, O_NONBLOCK);
  if (err >= 0) fcntl(err, F_SETFL, O_NONBLOCK);
  struct child *c = add_child();
  *c = (struct child){.id = id, .pid = pid, .out = out, .err = err, .in = in, .lim = lim, .interactive = interactive,
                      .tty = tty};
  size_t stdin_len = (size_t)(end - p);
  if (stdin_len && !interactive) {
    c->in_buf = malloc(stdin_len);
    if (!c->in_buf) die("out of memory");
    memcpy(c->in_buf, p, stdin_len);
    c->in_len = c->in_cap = stdin_len;
  }
  char pidb[4];
  put_u32(pidb, (uint32_t)pid);
  send_frame('P', id, pidb, 4);
  /* A 'T' or 'Y' child's first bytes are bounded as any 'I' is. */
  if (interactive && stdin_len) add_input(c, p, stdin_len);
  else pump_stdin(c);
  free(argv), free(envp);
}

/*
 * Reaps what exited. A tool's exit is held back until no stray is left: its orphans came here when it died,
 * and are killed now (with those of any other call that ended); their deaths bring the next round.
 */
static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (size_t i = 0; i < nkids; i++) {
      if (kids[i].pid != pid) continue;
      put_u32(kids[i].x, WIFEXITED(status) ? (uint32_t)WEXITSTATUS(status) : (uint32_t)-1);
      put_u32(kids[i].x + 4, WIFSIGNALED(status) ? (uint32_t)WTERMSIG(status) : 0);
      put_u32(kids[i].x + 8, kids[i].over);
      kids[i].pid = 0;
      kids[i].ended = 1;
      if (kids[i].interactive) close_stdin(&kids[i]);
      /* What it left in its group is among the strays now; the group goes at once. */
      kill(-pid, SIGKILL);
      break;
    }
  }
  if (kill_strays()) return;
  for (size_t i = 0; i < nkids; i++) {
    if (!kids[i].ended) continue;
    /* Output written before the exit goes out before it. */
    drain_output(&kids[i]);
    send_frame('X', kids[i].id, kids[i].x, sizeof kids[i].x);
    kids[i].ended = 0;
  }
}

/* The calls' process and memory limits, and strays from a tool that cleared its subreaper flag. */
static void watch(void) {
  for (size_t i = 0; i < nkids; i++) {
    struct child *c = &kids[i];
    if (!c->pid || c->over || !(c->lim.processes || c->lim.memory)) continue;
    uint64_t rss = 0;
    size_t threads = 0;
    size_t n = tree(c->pid, 0, &rss, &threads);
    /* A process limit too large to multiply (2^60 and more, past any pid_max) would wrap to a bound of 0. */
    int thread_bound = c->lim.processes && c->lim.processes <= UINT64_MAX / THREADS_PER_PROCESS;
    c->over = c->lim.processes && n > c->lim.processes                               ? LIMIT_PROCESSES
              : thread_bound && threads > c->lim.processes * THREADS_PER_PROCESS ? LIMIT_THREADS
              : c->lim.memory && rss > c->lim.memory                                 ? LIMIT_MEMORY
                                                                                     : LIMIT_NONE;
    if (c->over) kill_tree(c->pid);
  }
  kill_strays();
}

static int watching(void) {
  for (size_t i = 0; i < nkids; i++)
    if (kids[i].pid && (kids[i].lim.processes || kids[i].lim.memory)) return 1;
  return 0;
}

/* ---- requests from toolsrv ------------------------------------------------------------------------ */

static void stop_output(uint32_t id) {
  for (size_t i = 0; i < nkids; i++) {
    if (kids[i].id != id) continue;
    if (kids[i].out >= 0) close(kids[i].out);
    if (kids[i].err >= 0) close(kids[i].err);
    kids[i].out = kids[i].err = -1;
    close_stdin(&kids[i]); /* and the arguments it may never read */
  }
}

/* The running 'T' or 'Y' child of `id`, or NULL. */
static struct child *interactive_child(uint32_t id) {
  for (size_t i = 0; i < nkids; i++)
    if (kids[i].id == id && kids[i].interactive && kids[i].pid) return &kids[i];
  return NULL;
}

/* A 'W' frame: the new size of a 'Y' child's terminal, set on the master (the kernel sends the SIGWINCH). */
static void resize_tty(uint32_t id, const char *p, size_t n) {
  if (n != 4) die("size frame %u has %zu bytes (4 expected)", id, n);
  struct child *c = interactive_child(id);
  int master = c && c->tty ? (c->out >= 0 ? c->out : c->in) : -1;
  if (master < 0) return;
  struct winsize ws = {.ws_col = (unsigned short)((unsigned char)p[0] | (unsigned char)p[1] << 8),
                       .ws_row = (unsigned short)((unsigned char)p[2] | (unsigned char)p[3] << 8)};
  ioctl(master, TIOCSWINSZ, &ws);
}

static char *req;
static size_t req_len, req_cap;

/* Reads what toolsrv sent; returns 0 at end of file. */
static int read_requests(const sigset_t *oldmask) {
  if (req_cap - req_len < READ_CHUNK) {
    req_cap = req_cap ? req_cap * 2 : 2 * READ_CHUNK;
    req = realloc(req, req_cap);
    if (!req) die("out of memory");
  }
  ssize_t r = read(0, req + req_len, req_cap - req_len);
  if (r < 0) return errno == EINTR || errno == EAGAIN;
  if (r == 0) return 0;
  req_len += (size_t)r;
  size_t off = 0;
  while (req_len - off >= 4) {
    uint32_t flen = get_u32(req + off);
    if (flen < 5 || flen > MAX_FRAME) die("a frame of %u bytes (5 to %u allowed)", flen, MAX_FRAME);
    if (req_len - off - 4 < flen) {
      /* Incomplete: make room for the whole frame. */
      if (req_cap < flen + 4) {
        memmove(req, req + off, req_len - off);
        req_len -= off, off = 0;
        req_cap = flen + 4 + READ_CHUNK;
        req = realloc(req, req_cap);
        if (!req) die("out of memory");
      }
      break;
    }
    char type = req[off + 4];
    uint32_t id = get_u32(req + off + 5);
    if (type == 'S' || type == 'T' || type == 'Y') spawn_child(type, id, req + off + 9, flen - 5, oldmask);
    else if (type == 'I' || type == 'D') {
      struct child *c = interactive_child(id);
      if (c && type == 'I') add_input(c, req + off + 9, flen - 5);
      else if (c) c->in_end = 1, pump_stdin(c);
    } else if (type == 'W') resize_tty(id, req + off + 9, flen - 5);
    else if (type == 'C') stop_output(id);
    else die("unknown frame type 0x%02x", (unsigned char)type);
    off += 4 + flen;
  }
  memmove(req, req + off, req_len - off);
  req_len -= off;
  return 1;
}

/*
 * The guardian: the spawner's parent, a subreaper, doing nothing until the spawner ends. Should it be killed
 * outright, its calls' tool processes and everything below them come here, and are killed. It then ends as the
 * spawner did, so that toolsrv hears the same reason.
 */
static void guardian(pid_t spawner) __attribute__((noreturn));
static void guardian(pid_t spawner) {
  /* toolsrv's pipes are the spawner's: holding them here would hide the spawner's death from toolsrv. */
  for (int fd = 0; fd < 3; fd++) close(fd);
  int status = 0, code = -1;
  for (;;) {
    pid_t r = waitpid(-1, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (r == spawner) code = status;
    if (code < 0) continue;
    /* Everything left is an orphan of the spawner's calls. */
    struct pids l = {0};
    children_of(getpid(), &l);
    for (size_t i = 0; i < l.n; i++) kill_tree(l.v[i]);
    free(l.v);
  }
  if (WIFSIGNALED(code)) {
    signal(WTERMSIG(code), SIG_DFL);
    raise(WTERMSIG(code));
  }
  _exit(WIFEXITED(code) ? WEXITSTATUS(code) : 1);
}

int main(int argc, char **argv) {
  (void)argv;
  if (argc != 1) die("takes no arguments: it is driven by toolsrv over stdin and stdout");
  signal(SIGPIPE, SIG_IGN);
  /* Both are subreapers: the guardian for the spawner's orphans, the spawner for its tools'. */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) die("prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
  pid_t parent = getpid();
  pid_t self = fork();
  if (self < 0) die("fork: %s", strerror(errno));
  if (self > 0) guardian(self);
  sigset_t sigs, oldmask;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGCHLD);
  sigaddset(&sigs, SIGTERM);
  sigprocmask(SIG_BLOCK, &sigs, &oldmask);
  int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) die("signalfd: %s", strerror(errno));
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) die("prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
  /* The guardian gone (killed) is SIGTERM here; toolsrv gone is the end of stdin. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) leave(0);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  fcntl(0, F_SETFD, FD_CLOEXEC);
  struct pollfd *pfds = NULL;
  size_t pcap = 0;
  struct timespec last = {0, 0};
  for (;;) {
    sweep();
    size_t n = 2 + 3 * nkids;
    if (n > pcap) {
      pcap = n * 2;
      pfds = realloc(pfds, pcap * sizeof *pfds);
      if (!pfds) die("out of memory");
    }
    pfds[0] = (struct pollfd){0, POLLIN, 0};
    pfds[1] = (struct pollfd){sfd, POLLIN, 0};
    for (size_t i = 0; i < nkids; i++) {
      pfds[2 + 3 * i] = (struct pollfd){kids[i].out, POLLIN, 0};
      pfds[3 + 3 * i] = (struct pollfd){kids[i].in_off < kids[i].in_len ? kids[i].in : -1, POLLOUT, 0};
      pfds[4 + 3 * i] = (struct pollfd){kids[i].err, POLLIN, 0};
    }
    int limits = watching();
    if (poll(pfds, n, limits ? POLL_MS : -1) < 0) {
      if (errno == EINTR) continue;
      die("poll: %s", strerror(errno));
    }
    /* Children's pipes first, then exits, so that output precedes the exit it came before. */
    size_t before = nkids;
    for (size_t i = 0; i < before; i++) {
      if (pfds[2 + 3 * i].revents && kids[i].out >= 0) drain_pipe(&kids[i], &kids[i].out, 'O');
      if (pfds[4 + 3 * i].revents && kids[i].err >= 0) drain_pipe(&kids[i], &kids[i].err, 'R');
      if (pfds[3 + 3 * i].revents && kids[i].in >= 0) pump_stdin(&kids[i]);
    }
    if (pfds[1].revents) {
      struct signalfd_siginfo si;
      int term = 0;
      while (read(sfd, &si, sizeof si) > 0)
        if (si.ssi_signo == SIGTERM) term = 1;
      if (term) leave(0);
      reap();
    }
    if (limits) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000 >= POLL_MS) {
        last = now;
        watch();
      }
    }
    if (pfds[0].revents && !read_requests(&oldmask)) leave(0);
  }
}
