/*
 * ollie-sandbox: runs one command under a Landlock sandbox.
 *
 *   ollie-sandbox [policy options] -- PROGRAM [ARGS...]
 *   ollie-sandbox --probe
 *
 * It parses the policy from argv, sets no_new_privs, builds a Landlock ruleset for the best ABI the kernel
 * offers, adds the rules, restricts itself, optionally installs a small seccomp filter on socket(2), filters
 * the environment and execve's PROGRAM. It fails closed: when Landlock is missing or weaker than the policy
 * needs, it exits with EXIT_UNAVAILABLE and says on stderr exactly what is missing. See docs/sandbox.md.
 *
 * The kernel headers of the build host may predate the Landlock features used here, so every constant and
 * structure is defined below from the kernel's UAPI (they are ABI and never change).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXIT_POLICY 120      /* bad command line / policy */
#define EXIT_UNAVAILABLE 121 /* Landlock missing or weaker than the policy needs */
#define EXIT_SETUP 122       /* a system call setting up the sandbox failed */
#define EXIT_EXEC 127        /* PROGRAM could not be executed (126 when it exists but may not be) */

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2

#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_REMOVE_DIR (1ULL << 4)
#define FS_REMOVE_FILE (1ULL << 5)
#define FS_MAKE_CHAR (1ULL << 6)
#define FS_MAKE_DIR (1ULL << 7)
#define FS_MAKE_REG (1ULL << 8)
#define FS_MAKE_SOCK (1ULL << 9)
#define FS_MAKE_FIFO (1ULL << 10)
#define FS_MAKE_BLOCK (1ULL << 11)
#define FS_MAKE_SYM (1ULL << 12)
#define FS_REFER (1ULL << 13)     /* ABI 2 */
#define FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */

#define NET_BIND_TCP (1ULL << 0)    /* ABI 4 */
#define NET_CONNECT_TCP (1ULL << 1) /* ABI 4 */

#define SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define SCOPE_SIGNAL (1ULL << 1)        /* ABI 6 */

#define RESTRICT_LOG_NEW_EXEC_ON (1U << 1) /* ABI 7 */

struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct ll_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));
struct ll_net_port_attr {
  uint64_t allowed_access;
  uint64_t port;
};

/* Rights that make sense on a file (as opposed to a directory): the kernel rejects the others on a file. */
#define FS_FILE_RIGHTS (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)

#define RIGHTS_RO (FS_READ_FILE | FS_READ_DIR)
#define RIGHTS_RW                                                                                              \
  (RIGHTS_RO | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG |      \
   FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM | FS_REFER | FS_TRUNCATE | FS_IOCTL_DEV)

static const char *prog = "ollie-sandbox";

static void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(code);
}

/* Everything the filesystem rights of an ABI cover. */
static uint64_t fs_rights_for_abi(int abi) {
  uint64_t r = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_REMOVE_DIR | FS_REMOVE_FILE |
               FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM;
  if (abi >= 2) r |= FS_REFER;
  if (abi >= 3) r |= FS_TRUNCATE;
  if (abi >= 5) r |= FS_IOCTL_DEV;
  return r;
}

static int kernel_abi(int *err) {
  long v = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  *err = v < 0 ? errno : 0;
  return v < 0 ? 0 : (int)v;
}

static const char *abi_missing_reason(int err) {
  if (err == ENOSYS)
    return "the kernel has no Landlock system calls (built without CONFIG_SECURITY_LANDLOCK, or a container's "
           "seccomp profile blocks them)";
  if (err == EOPNOTSUPP) return "Landlock is built in but not enabled (add landlock to the lsm= boot parameter)";
  return strerror(err);
}

/* ---- policy ---------------------------------------------------------------------------------------- */

struct rule {
  const char *path;
  uint64_t access;
};

#define MAX_ITEMS 512
static struct rule rules[MAX_ITEMS];
static int nrules;
static char *denies[MAX_ITEMS]; /* canonical paths no rule may cover */
static int ndenies;
static uint64_t bind_ports[MAX_ITEMS], connect_ports[MAX_ITEMS];
static int nbind, nconnect;
static const char *env_keep[MAX_ITEMS];
static int nenv_keep;
static const char *env_set[MAX_ITEMS];
static int nenv_set;
static int no_net, scope_signals, scope_abstract_unix, deny_unix, audit, env_filter;
static int abi_max = INT_MAX; /* test switch: behave as if the kernel offered at most this ABI */

static uint64_t parse_port(const char *s) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || *end || !*s || v > 65535) die(EXIT_POLICY, "bad port \"%s\"", s);
  return v;
}

static void check_room(const char *kind, const int *n) {
  if (*n >= MAX_ITEMS) die(EXIT_POLICY, "too many %s options (at most %d)", kind, MAX_ITEMS);
}

/* ---- filesystem rules ------------------------------------------------------------------------------ */

static int ruleset_fd = -1;
static uint64_t handled_fs;

/*
 * Opens `path` (O_PATH) and puts its canonical form in `out`: the kernel's name for the opened file, read back
 * from /proc/self/fd (one system call, where realpath(3) reads every component's link). Falls back to
 * realpath without /proc. Returns the descriptor, or -1 with errno set.
 */
static int open_canonical(const char *path, char out[PATH_MAX]) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return -1;
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, PATH_MAX - 1);
  if (n > 0 && out[0] == '/') {
    out[n] = 0;
    return fd;
  }
  if (!realpath(path, out)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/*
 * The canonical form of a denied path, which need not exist: a missing ~/.ssh must still keep a rule on HOME
 * from covering it (or a tool could create it). The longest existing prefix is canonicalised and the rest
 * appended, so that it compares correctly with canonical rule paths even below a symlinked directory.
 */
static void canonical_denied(const char *path, char out[PATH_MAX]) {
  int fd = open_canonical(path, out);
  if (fd >= 0) {
    close(fd);
    return;
  }
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path) {
    snprintf(out, PATH_MAX, "%s", path);
    return;
  }
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
  canonical_denied(parent, out);
  size_t n = strlen(out);
  snprintf(out + n, PATH_MAX - n, "%s%s", strcmp(out, "/") ? "" : "", slash + (strcmp(out, "/") ? 0 : 1));
}

/* 1 when `p` is `dir` or beneath it (both canonical). */
static int beneath(const char *p, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/') return 1;
  return strncmp(p, dir, n) == 0 && (p[n] == '/' || p[n] == 0);
}

static void add_fd_rule(int fd, uint64_t access, const char *path) {
  struct stat st;
  if (fstat(fd, &st) < 0) die(EXIT_SETUP, "stat %s: %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode)) access &= FS_FILE_RIGHTS;
  access &= handled_fs;
  if (!access) return;
  struct ll_path_beneath_attr attr = {.allowed_access = access, .parent_fd = fd};
  if (syscall(__NR_landlock_add_rule, ruleset_fd, LL_RULE_PATH_BENEATH, &attr, 0) < 0)
    die(EXIT_SETUP, "landlock_add_rule %s: %s", path, strerror(errno));
}

/*
 * Grants `access` beneath the canonical path `path`, except beneath the denied paths. Landlock is allow-only,
 * so a rule on a directory above a denied path would cover it: instead of that directory, each of its
 * entries is granted, skipping the denied one and descending towards denied paths deeper down. The directory
 * itself is then not listable, which is the price of the hole. Symlinks met while descending are not
 * followed (a link to ~/.ssh must not become a grant on it): access through them is whatever their target's
 * own rules allow.
 */
static void grant(const char *path, uint64_t access, int follow, int fd) {
  int above_deny = 0;
  for (int i = 0; i < ndenies; i++) {
    /* While descending, a denied entry is skipped; a rule naming it (or a path in it) explicitly still holds. */
    if (!follow && beneath(path, denies[i])) return;
    if (beneath(denies[i], path) && strcmp(denies[i], path)) above_deny = 1;
  }
  if (fd < 0) fd = open(path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return; /* nothing there to grant */
    die(EXIT_SETUP, "open %s: %s", path, strerror(errno));
  }
  if (!above_deny) {
    add_fd_rule(fd, access, path);
    close(fd);
    return;
  }
  int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  close(fd);
  if (dfd < 0) die(EXIT_SETUP, "open directory %s: %s", path, strerror(errno));
  DIR *d = fdopendir(dfd);
  if (!d) die(EXIT_SETUP, "opendir %s: %s", path, strerror(errno));
  struct dirent *e;
  char child[PATH_MAX];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (e->d_type == DT_LNK) continue;
    int n = snprintf(child, sizeof child, "%s/%s", strcmp(path, "/") ? path : "", e->d_name);
    if (n < 0 || (size_t)n >= sizeof child) continue;
    grant(child, access, 0, -1);
  }
  closedir(d);
}

/* ---- seccomp: which socket families may be created ----------------------------------------------- */

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define COMPAT_ARCH AUDIT_ARCH_I386
#define COMPAT_SOCKETCALL 102
#define COMPAT_SOCKET 359
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#define COMPAT_ARCH AUDIT_ARCH_ARM
#define COMPAT_SOCKETCALL 0xffffffff /* EABI arm has no socketcall */
#define COMPAT_SOCKET 281
#endif

#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define DENY (SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA))
#define ALLOW SECCOMP_RET_ALLOW

/*
 * Landlock (ABI <= 7) cannot refuse connect(2) to a pathname Unix socket, and its network rules cover TCP
 * only. So: without --allow-unix (the default) socket(AF_UNIX) fails, which keeps tools off the Ollie
 * sockets and any other local daemon; with --no-net only TCP (governed by Landlock) remains of the IP
 * families, and no other family (UDP, raw, netlink, packet) may be created. socketpair(2) stays allowed.
 */
static void install_socket_filter(void) {
#ifdef NATIVE_ARCH
  uint32_t unix_verdict = deny_unix ? DENY : ALLOW;
  uint32_t other_verdict = no_net ? DENY : ALLOW;
  int ports = !no_net && (nbind || nconnect);
  struct sock_filter f[40];
  int n = 0;
  f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 6, 0);
  /* 32-bit compat processes: no socket creation at all (their socketcall multiplexer hides the family). */
  f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_SOCKETCALL, 0, 1);
  f[n++] = (struct sock_filter)RET(DENY);
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_SOCKET, 0, 1);
  f[n++] = (struct sock_filter)RET(DENY);
  f[n++] = (struct sock_filter)RET(ALLOW);
  f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
  /* x32 system calls have their own numbers; refuse them all rather than track a second table. */
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1);
  f[n++] = (struct sock_filter)RET(SECCOMP_RET_ERRNO | ENOSYS);
#endif
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 1, 0);
  f[n++] = (struct sock_filter)RET(ALLOW);
  f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1);
  f[n++] = (struct sock_filter)RET(unix_verdict);
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 1, 0);
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 0, no_net ? 5 : ports ? 6 : 1);
  if (no_net) {
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]));
    f[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf); /* strip SOCK_NONBLOCK/CLOEXEC */
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 0, 1);
    f[n++] = (struct sock_filter)RET(ALLOW);
    f[n++] = (struct sock_filter)RET(DENY);
  } else if (ports) {
    /* Ports listed: TCP (Landlock's rules) and UDP (name lookups) only. A raw socket would go around the TCP
       port rules altogether. */
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]));
    f[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 1, 0);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_DGRAM, 0, 1);
    f[n++] = (struct sock_filter)RET(ALLOW);
    f[n++] = (struct sock_filter)RET(DENY);
    /* Other families: netlink stays (getaddrinfo asks it about interfaces); packet sockets and the rest go. */
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 0, 1);
    f[n++] = (struct sock_filter)RET(ALLOW);
    f[n++] = (struct sock_filter)RET(DENY);
  } else {
    f[n++] = (struct sock_filter)RET(ALLOW);
  }
  f[n++] = (struct sock_filter)RET(other_verdict);
  struct sock_fprog fp = {.len = (unsigned short)n, .filter = f};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) < 0) die(EXIT_SETUP, "seccomp: %s", strerror(errno));
#else
  die(EXIT_UNAVAILABLE, "unavailable: the socket filter is not implemented for this architecture");
#endif
}

/* ---- probe ----------------------------------------------------------------------------------------- */

static void probe(void) {
  int err;
  int abi = kernel_abi(&err);
  if (abi > abi_max) {
    abi = abi_max;
    err = 0;
  }
  printf("{\"abi\":%d,", abi);
  if (!abi) printf("\"reason\":\"%s\",", err ? abi_missing_reason(err) : "switched off by --abi-max");
  printf("\"enforces\":[");
  const char *sep = "";
#define ITEM(cond, s)                                                                                          \
  if (cond) {                                                                                                  \
    printf("%s\"%s\"", sep, s);                                                                                \
    sep = ",";                                                                                                 \
  }
  ITEM(abi >= 1, "filesystem");
  ITEM(abi >= 2, "refer");
  ITEM(abi >= 3, "truncate");
  ITEM(abi >= 4, "tcp");
  ITEM(abi >= 5, "ioctl_dev");
  ITEM(abi >= 6, "scope_abstract_unix");
  ITEM(abi >= 6, "scope_signals");
  ITEM(abi >= 7, "audit_log");
#ifdef NATIVE_ARCH
  ITEM(1, "socket_families");
#endif
  printf("]}\n");
  exit(0);
}

/* ---- environment ----------------------------------------------------------------------------------- */

extern char **environ;

static int keep_var(const char *kv) {
  size_t klen = strcspn(kv, "=");
  for (int i = 0; i < nenv_keep; i++) {
    const char *p = env_keep[i];
    size_t n = strlen(p);
    if (n && p[n - 1] == '*') { /* prefix pattern, e.g. LC_* */
      if (klen >= n - 1 && !strncmp(kv, p, n - 1)) return 1;
    } else if (klen == n && !strncmp(kv, p, n)) {
      return 1;
    }
  }
  return 0;
}

static char **build_env(void) {
  size_t count = 0;
  for (char **e = environ; *e; e++) count++;
  char **out = calloc(count + (size_t)nenv_set + 1, sizeof *out);
  if (!out) die(EXIT_SETUP, "out of memory");
  size_t n = 0;
  for (char **e = environ; *e; e++) {
    if (env_filter && !keep_var(*e)) continue;
    int overridden = 0;
    size_t klen = strcspn(*e, "=");
    for (int i = 0; i < nenv_set; i++)
      if (!strncmp(env_set[i], *e, klen) && env_set[i][klen] == '=') overridden = 1;
    if (!overridden) out[n++] = *e;
  }
  for (int i = 0; i < nenv_set; i++) out[n++] = (char *)env_set[i];
  out[n] = NULL;
  return out;
}

/* ---- tools built into this binary ----------------------------------------------------------------- */

/*
 * The core C tools (native/tools/NAME.c) are linked into this binary, and native/build/NAME are links to it. Run
 * as NAME, it is that tool. Run as the sandbox helper with PROGRAM being one of them, it calls the tool in
 * this process once the sandbox is in place, instead of exec'ing a second program: the restrictions are the
 * same (Landlock, no_new_privs, the socket filter and the environment apply to this process), and a call costs
 * one exec instead of two.
 */
struct builtin_tool {
  const char *name;
  int (*main)(int, char **);
};
extern const struct builtin_tool builtin_tools[]; /* generated by scripts/build-native.mjs */

static const struct builtin_tool *builtin(const char *name) {
  for (const struct builtin_tool *t = builtin_tools; t->name; t++)
    if (!strcmp(t->name, name)) return t;
  return NULL;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* Canonical paths of the rules that grant execute: a built-in tool runs in-process only from beneath one, as
 * exec would only run it from there. */
static char *exec_dirs[MAX_ITEMS];
static int nexec_dirs;

/* The built-in tool `file` names, when it is this very binary in a place the policy lets us execute. */
static const struct builtin_tool *builtin_program(const char *file) {
  const struct builtin_tool *t = builtin(base_name(file));
  if (!t) return NULL;
  struct stat a, b;
  if (stat(file, &a) < 0 || stat("/proc/self/exe", &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) return NULL;
  char real[PATH_MAX];
  if (!realpath(file, real)) return NULL;
  for (int i = 0; i < nexec_dirs; i++)
    if (beneath(real, exec_dirs[i])) return t;
  return NULL;
}

/* ---- main ------------------------------------------------------------------------------------------ */

static void usage(void) {
  fprintf(stderr,
          "usage: %s [--ro P] [--rox P] [--rw P] [--rwx P] [--deny P] [--no-net] [--net-bind PORT]\n"
          "       [--net-connect PORT] [--scope-signals] [--scope-abstract-unix] [--allow-unix | --deny-unix]\n"
          "       [--env-keep VAR|PREFIX*] [--env-set VAR=VALUE] [--audit] [--abi-max N] -- PROGRAM [ARGS...]\n"
          "       %s --probe [--abi-max N]\n",
          prog, prog);
  exit(EXIT_POLICY);
}

int main(int argc, char **argv) {
  const struct builtin_tool *self = argc > 0 ? builtin(base_name(argv[0])) : NULL;
  if (self) return self->main(argc, argv);
  int i = 1, do_probe = 0;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t rights = 0;
    if (!strcmp(a, "--ro")) rights = RIGHTS_RO;
    else if (!strcmp(a, "--rox")) rights = RIGHTS_RO | FS_EXECUTE;
    else if (!strcmp(a, "--rw")) rights = RIGHTS_RW;
    else if (!strcmp(a, "--rwx")) rights = RIGHTS_RW | FS_EXECUTE;
    if (rights) {
      if (!v) die(EXIT_POLICY, "%s needs a path", a);
      if (v[0] != '/') die(EXIT_POLICY, "%s %s: paths must be absolute", a, v);
      check_room("path", &nrules);
      rules[nrules++] = (struct rule){v, rights};
      i++;
    } else if (!strcmp(a, "--deny")) {
      if (!v || v[0] != '/') die(EXIT_POLICY, "--deny needs an absolute path");
      check_room("--deny", &ndenies);
      char real[PATH_MAX];
      canonical_denied(v, real);
      denies[ndenies++] = strdup(real);
      i++;
    } else if (!strcmp(a, "--net-bind") || !strcmp(a, "--net-connect")) {
      if (!v) die(EXIT_POLICY, "%s needs a port", a);
      if (a[6] == 'b') {
        check_room("--net-bind", &nbind);
        bind_ports[nbind++] = parse_port(v);
      } else {
        check_room("--net-connect", &nconnect);
        connect_ports[nconnect++] = parse_port(v);
      }
      i++;
    } else if (!strcmp(a, "--env-keep")) {
      if (!v) die(EXIT_POLICY, "--env-keep needs a name");
      check_room("--env-keep", &nenv_keep);
      env_keep[nenv_keep++] = v;
      env_filter = 1;
      i++;
    } else if (!strcmp(a, "--env-set")) {
      if (!v || !strchr(v, '=')) die(EXIT_POLICY, "--env-set needs VAR=VALUE");
      check_room("--env-set", &nenv_set);
      env_set[nenv_set++] = v;
      i++;
    } else if (!strcmp(a, "--abi-max")) {
      if (!v) die(EXIT_POLICY, "--abi-max needs a number");
      abi_max = atoi(v);
      i++;
    } else if (!strcmp(a, "--no-net")) no_net = 1;
    else if (!strcmp(a, "--scope-signals")) scope_signals = 1;
    else if (!strcmp(a, "--scope-abstract-unix")) scope_abstract_unix = 1;
    else if (!strcmp(a, "--deny-unix")) deny_unix = 1;
    else if (!strcmp(a, "--allow-unix")) deny_unix = 0;
    else if (!strcmp(a, "--audit")) audit = 1;
    else if (!strcmp(a, "--env-clear")) env_filter = 1;
    else if (!strcmp(a, "--probe")) do_probe = 1;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage();
    else die(EXIT_POLICY, "unknown option %s (try --help)", a);
  }
  if (do_probe) probe();
  if (i >= argc) usage();

  int err;
  int abi = kernel_abi(&err);
  if (abi > abi_max) {
    abi = abi_max;
    err = 0;
  }
  if (abi < 1)
    die(EXIT_UNAVAILABLE, "unavailable: Landlock is not available: %s",
        err ? abi_missing_reason(err) : "switched off by --abi-max");

  /* Fail closed: each feature of the policy names the ABI it needs. */
  int want_net = no_net || nbind || nconnect;
  if (abi < 3)
    die(EXIT_UNAVAILABLE,
        "unavailable: Landlock ABI %d cannot keep read-only files from being truncated (needs ABI 3, Linux 6.2)",
        abi);
  if (want_net && abi < 4)
    die(EXIT_UNAVAILABLE,
        "unavailable: the policy restricts the network but Landlock ABI %d has no network rules (needs ABI 4, "
        "Linux 6.7)",
        abi);
  if ((scope_signals || scope_abstract_unix) && abi < 6)
    die(EXIT_UNAVAILABLE,
        "unavailable: the policy scopes %s but Landlock ABI %d cannot (needs ABI 6, Linux 6.12)",
        scope_signals && scope_abstract_unix ? "signals and abstract Unix sockets"
        : scope_signals                      ? "signals"
                                             : "abstract Unix sockets",
        abi);

  handled_fs = fs_rights_for_abi(abi);
  struct ll_ruleset_attr attr = {.handled_access_fs = handled_fs};
  size_t attr_size = sizeof attr.handled_access_fs;
  if (abi >= 4) {
    if (want_net) attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
    attr_size = offsetof(struct ll_ruleset_attr, scoped);
  }
  if (abi >= 6) {
    attr.scoped = (scope_signals ? SCOPE_SIGNAL : 0) | (scope_abstract_unix ? SCOPE_ABSTRACT_UNIX : 0);
    attr_size = sizeof attr;
  }
  ruleset_fd = (int)syscall(__NR_landlock_create_ruleset, &attr, attr_size, 0);
  if (ruleset_fd < 0) die(EXIT_SETUP, "landlock_create_ruleset: %s", strerror(errno));

  char real[PATH_MAX];
  for (int r = 0; r < nrules; r++) {
    /* Compare canonical paths with the denied ones, so a symlinked spelling cannot cover a denied path. */
    int fd = open_canonical(rules[r].path, real);
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue; /* nothing there to grant */
      die(EXIT_SETUP, "%s: %s", rules[r].path, strerror(errno));
    }
    /*
     * Rule paths come resolved (toolsrv resolves them when it loads the policy). One that now resolves elsewhere
     * went through a symlink planted since, e.g. a workspace directory swapped for a link to ~/.ssh or /: the
     * rule would follow it (and a rule naming a path inside a denied one holds), so it grants nothing.
     */
    if (strcmp(real, rules[r].path)) {
      fprintf(stderr, "ollie-sandbox: %s now resolves to %s (a symbolic link): not granted\n", rules[r].path, real);
      close(fd);
      continue;
    }
    if (rules[r].access & FS_EXECUTE) exec_dirs[nexec_dirs++] = strdup(real);
    grant(real, rules[r].access, 1, fd);
  }
  for (int p = 0; p < nbind; p++) {
    struct ll_net_port_attr na = {.allowed_access = NET_BIND_TCP, .port = bind_ports[p]};
    if (syscall(__NR_landlock_add_rule, ruleset_fd, LL_RULE_NET_PORT, &na, 0) < 0)
      die(EXIT_SETUP, "landlock_add_rule bind %llu: %s", (unsigned long long)bind_ports[p], strerror(errno));
  }
  for (int p = 0; p < nconnect; p++) {
    struct ll_net_port_attr na = {.allowed_access = NET_CONNECT_TCP, .port = connect_ports[p]};
    if (syscall(__NR_landlock_add_rule, ruleset_fd, LL_RULE_NET_PORT, &na, 0) < 0)
      die(EXIT_SETUP, "landlock_add_rule connect %llu: %s", (unsigned long long)connect_ports[p],
          strerror(errno));
  }

  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die(EXIT_SETUP, "no_new_privs: %s", strerror(errno));
  unsigned flags = audit && abi >= 7 ? RESTRICT_LOG_NEW_EXEC_ON : 0;
  if (syscall(__NR_landlock_restrict_self, ruleset_fd, flags) < 0)
    die(EXIT_SETUP, "landlock_restrict_self: %s", strerror(errno));
  close(ruleset_fd);
  if (deny_unix || no_net || nbind || nconnect) install_socket_filter();

  char **envp = build_env();
  const char *file = argv[i];
  const struct builtin_tool *tool = strchr(file, '/') ? builtin_program(file) : NULL;
  if (tool) {
    environ = envp;
    exit(tool->main(argc - i, argv + i));
  }
  if (strchr(file, '/')) {
    execve(file, argv + i, envp);
  } else {
    /* PATH search with the filtered environment's PATH, as the tool will see it. */
    environ = envp;
    execvp(file, argv + i);
  }
  int e = errno;
  fprintf(stderr, "%s: cannot execute %s: %s\n", prog, file, strerror(e));
  return e == ENOENT ? EXIT_EXEC : 126;
}
