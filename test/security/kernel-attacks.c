/*
 * The attacks of test/security/kernel.test.ts, as a model would write them into a tool call: each subcommand
 * tries one way around the sandbox with the raw system call (no library that might give up early) and prints
 * one line, `NAME: ok [detail]` when the kernel let it through or `NAME: refused ERRNAME` when it did not.
 * The test compiles this with the system C compiler and runs it inside and outside the sandbox: outside, each
 * attack must work (so the test can fail), inside, each must be refused.
 *
 *   kernel-attacks uring-unix PATH | mptcp PORT | raw | packet | bpf | perf | clone-newuser | clone3 |
 *                  unshare-user | int80 | handle PATH | socketpair | dgram-pair PATH | dgram-listen PATH |
 *                  mknod PATH | caps | tiocsti
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(const char *name, long rc, const char *detail) {
  if (rc < 0) {
    printf("%s: refused %s\n", name, strerrorname_np(errno));
    return 1;
  }
  printf("%s: ok%s%s\n", name, detail ? " " : "", detail ? detail : "");
  return 0;
}

/* One io_uring with a single submission: returns the completion's result (a negative errno on failure). */
static int uring_one(int ring, struct io_uring_params *p, void *sq, void *cq, struct io_uring_sqe *sqes,
                     const struct io_uring_sqe *sqe) {
  unsigned *tail = (unsigned *)((char *)sq + p->sq_off.tail);
  unsigned *mask = (unsigned *)((char *)sq + p->sq_off.ring_mask);
  unsigned *array = (unsigned *)((char *)sq + p->sq_off.array);
  unsigned t = *tail, i = t & *mask;
  sqes[i] = *sqe;
  array[i] = i;
  __atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
  if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) return -errno;
  unsigned *chead = (unsigned *)((char *)cq + p->cq_off.head);
  unsigned *cmask = (unsigned *)((char *)cq + p->cq_off.ring_mask);
  struct io_uring_cqe *cqes = (struct io_uring_cqe *)((char *)cq + p->cq_off.cqes);
  unsigned h = *chead;
  int res = cqes[h & *cmask].res;
  __atomic_store_n(chead, h + 1, __ATOMIC_RELEASE);
  return res;
}

/* A Unix socket made and connected by io_uring, never by socket(2) or connect(2). */
static int uring_unix(const char *path) {
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  int ring = (int)syscall(__NR_io_uring_setup, 4, &p);
  if (ring < 0) return report("io_uring_setup", -1, NULL);
  void *sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned), PROT_READ | PROT_WRITE, MAP_SHARED,
                  ring, IORING_OFF_SQ_RING);
  void *cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe), PROT_READ | PROT_WRITE,
                  MAP_SHARED, ring, IORING_OFF_CQ_RING);
  struct io_uring_sqe *sqes =
      mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_SQES);
  if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return report("io_uring mmap", -1, NULL);
  struct io_uring_sqe s;
  memset(&s, 0, sizeof s);
  s.opcode = IORING_OP_SOCKET;
  s.fd = AF_UNIX;
  s.off = SOCK_STREAM;
  int fd = uring_one(ring, &p, sq, cq, sqes, &s);
  if (fd < 0) {
    errno = -fd;
    return report("io_uring socket", -1, NULL);
  }
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  memset(&s, 0, sizeof s);
  s.opcode = IORING_OP_CONNECT;
  s.fd = fd;
  s.addr = (uintptr_t)&a;
  s.off = sizeof a;
  int rc = uring_one(ring, &p, sq, cq, sqes, &s);
  if (rc < 0) {
    errno = -rc;
    return report("io_uring connect", -1, NULL);
  }
  if (write(fd, "hello from io_uring\n", 20) != 20) return report("write", -1, NULL);
  return report("io_uring connect", 0, path);
}

static int mptcp(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 262 /* IPPROTO_MPTCP */);
  if (s < 0) return report("mptcp socket", -1, NULL);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = {htonl(INADDR_LOOPBACK)}};
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) return report("mptcp connect", -1, NULL);
  if (write(s, "hello over mptcp\n", 17) != 17) return report("write", -1, NULL);
  return report("mptcp connect", 0, NULL);
}

static int bpf_map(void) {
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  return report("bpf", syscall(__NR_bpf, BPF_MAP_CREATE, &attr, sizeof attr), NULL);
}

static int perf(void) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  return report("perf_event_open", syscall(__NR_perf_event_open, &a, 0, -1, -1, 0), NULL);
}

static int clone_newuser(void) {
  long pid = syscall(__NR_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid((pid_t)pid, NULL, 0);
  return report("clone(CLONE_NEWUSER)", pid, NULL);
}

static int clone3_plain(void) {
  struct {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
  } args = {.exit_signal = SIGCHLD};
  long pid = syscall(__NR_clone3, &args, sizeof args);
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid((pid_t)pid, NULL, 0);
  return report("clone3", pid, NULL);
}

/* getpid through the i386 entry point: 32-bit system calls have their own table, which the filter refuses. */
static int int80(void) {
#if defined(__x86_64__)
  long rc;
  __asm__ volatile("int $0x80" : "=a"(rc) : "a"(20L /* i386 getpid */) : "memory");
  if (rc < 0 && rc > -4096) {
    errno = (int)-rc;
    rc = -1;
  }
  char pid[32];
  snprintf(pid, sizeof pid, "pid=%ld", rc);
  return report("int 0x80 getpid", rc, pid);
#else
  printf("int 0x80 getpid: not x86-64\n");
  return 2;
#endif
}

/* A file handle opened by number: the way past Landlock's path rules that the filter closes. */
static int handle(const char *path) {
  struct {
    struct file_handle h;
    unsigned char bytes[128];
  } fh;
  fh.h.handle_bytes = sizeof fh.bytes;
  int mount_id;
  if (syscall(__NR_name_to_handle_at, AT_FDCWD, path, &fh.h, &mount_id, 0) < 0) return report("name_to_handle_at", -1, NULL);
  int mfd = open("/", O_RDONLY | O_DIRECTORY);
  int fd = (int)syscall(__NR_open_by_handle_at, mfd, &fh.h, O_RDONLY);
  if (fd < 0) return report("open_by_handle_at", -1, NULL);
  char buf[256] = {0};
  if (read(fd, buf, sizeof buf - 1) < 0) return report("read by handle", -1, NULL);
  buf[strcspn(buf, "\n")] = 0;
  return report("open_by_handle_at", 0, buf);
}

/* The victim of dgram-pair: a datagram socket at PATH, as syslog's or the journal's. */
static int dgram_listen(const char *path) {
  int s = socket(AF_UNIX, SOCK_DGRAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0) return report("dgram listen", -1, NULL);
  printf("listening\n");
  char buf[64] = {0};
  if (recv(s, buf, sizeof buf - 1, 0) < 0) return report("recv", -1, NULL);
  printf("received %s", buf);
  return 0;
}

/* The control: the socketpair every program that talks to a child over a socket uses. */
static int pair(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return report("socketpair stream", -1, NULL);
  char buf[8] = {0};
  if (write(sv[0], "ping", 4) != 4 || read(sv[1], buf, sizeof buf) != 4 || strcmp(buf, "ping"))
    return report("socketpair stream", -1, NULL);
  return report("socketpair stream", 0, buf);
}

/* A datagram pair is unconnected enough to sendto(2) any datagram socket on the machine by its path. */
static int dgram_pair(const char *path) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0) return report("socketpair dgram", -1, NULL);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  return report("sendto from a dgram pair", sendto(sv[0], "escaped\n", 8, 0, (struct sockaddr *)&a, sizeof a), NULL);
}

/* Input pushed into a terminal, which whatever reads it next (a shell) would run: here the call's own pty. */
static int tiocsti(void) {
  int m = posix_openpt(O_RDWR | O_NOCTTY);
  if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) return report("openpty", -1, NULL);
  const char *name = ptsname(m);
  pid_t p = fork();
  if (p == 0) {
    setsid();
    int s = open(name, O_RDWR); /* the session's controlling terminal from now on */
    char c = 'x';
    _exit(report("TIOCSTI", s < 0 ? -1 : ioctl(s, TIOCSTI, &c), NULL));
  }
  int st;
  waitpid(p, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int caps(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "Cap", 3)) fputs(line, stdout);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  const char *c = argc > 1 ? argv[1] : "";
  const char *arg = argc > 2 ? argv[2] : "";
  if (!strcmp(c, "uring-unix")) return uring_unix(arg);
  if (!strcmp(c, "mptcp")) return mptcp(atoi(arg));
  if (!strcmp(c, "raw")) return report("raw socket", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), NULL);
  if (!strcmp(c, "packet")) return report("packet socket", socket(AF_PACKET, SOCK_RAW, htons(0x0003)), NULL);
  if (!strcmp(c, "bpf")) return bpf_map();
  if (!strcmp(c, "perf")) return perf();
  if (!strcmp(c, "clone-newuser")) return clone_newuser();
  if (!strcmp(c, "clone3")) return clone3_plain();
  if (!strcmp(c, "unshare-user")) return report("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), NULL);
  if (!strcmp(c, "int80")) return int80();
  if (!strcmp(c, "handle")) return handle(arg);
  if (!strcmp(c, "socketpair")) return pair();
  if (!strcmp(c, "dgram-pair")) return dgram_pair(arg);
  if (!strcmp(c, "dgram-listen")) return dgram_listen(arg);
  if (!strcmp(c, "mknod")) return report("mknod /dev/null twin", mknod(arg, S_IFCHR | 0666, makedev(1, 3)), NULL);
  if (!strcmp(c, "caps")) return caps();
  if (!strcmp(c, "tiocsti")) return tiocsti();
  fprintf(stderr, "kernel-attacks: unknown attack \"%s\"\n", c);
  return 2;
}
