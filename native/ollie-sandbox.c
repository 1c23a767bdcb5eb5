/*
 * ollie-sandbox: runs one command under a Landlock sandbox.
 *
 *   ollie-sandbox [policy options] -- PROGRAM [ARGS...]
 *   ollie-sandbox --probe
 *
 * It parses the policy from argv, builds a Landlock ruleset for the best ABI the kernel offers and adds the
 * rules, drops every capability, sets no_new_privs, restricts itself, installs the seccomp filter on the system
 * calls Landlock does not govern, filters the environment and execve's PROGRAM. It fails closed: when Landlock
 * is missing or weaker than the policy needs, it exits with EXIT_UNAVAILABLE, and when any step fails, with
 * EXIT_SETUP, saying on stderr exactly what is missing or failed; the tool never runs half-confined. `--probe`
 * prints every mechanism it would apply. See docs/sandbox.md.
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
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <netinet/in.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_POLICY 120      /* bad command line / policy */
#define EXIT_UNAVAILABLE 121 /* Landlock missing or weaker than the policy needs */
#define EXIT_SETUP 122       /* a system call setting up the sandbox failed (Landlock, capabilities, seccomp) */
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
/* Appends room for one more to a list that grows: the helper's own additions (the terminal devices of every /dev a
 * rule covers, the devpts mounts of the machine) have no bound of the command line's, and a fixed one would either
 * fail every call or leave the ones past it out. */
#define GROW(list, n, cap)                                                          \
  do {                                                                              \
    if ((n) >= (cap)) {                                                             \
      (cap) = (cap) ? (cap) * 2 : 64;                                               \
      (list) = realloc((list), (size_t)(cap) * sizeof *(list));                     \
      if (!(list)) die(EXIT_SETUP, "out of memory");                                \
    }                                                                               \
  } while (0)
static char **denies; /* canonical paths no rule may cover */
static int ndenies, denies_cap;
static const char *protects[MAX_ITEMS]; /* kept read-only even beneath a write rule (a bind mount) */
static int nprotects;
/* --private-pts: a devpts instance of the tool's own on /dev/pts; `pts_closed` when there can be none. */
static int private_pts, pts_closed;
static const char *pins[MAX_ITEMS]; /* made mount points, so that they cannot be renamed or removed */
static int npins;
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

/* `type` is the entry's d_type when a directory listing gave it (saving a stat per entry), else DT_UNKNOWN. */
static void add_fd_rule(int fd, uint64_t access, const char *path, unsigned char type) {
  if (type == DT_UNKNOWN) {
    struct stat st;
    if (fstat(fd, &st) < 0) die(EXIT_SETUP, "stat %s: %s", path, strerror(errno));
    type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
  }
  if (type != DT_DIR) access &= FS_FILE_RIGHTS;
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
static void grant(const char *path, uint64_t access, int follow, int fd, unsigned char type, int at, const char *name) {
  int above_deny = 0;
  for (int i = 0; i < ndenies; i++) {
    /* While descending, a denied entry is skipped; a rule naming it (or a path in it) explicitly still holds. */
    if (!follow && beneath(path, denies[i])) return;
    if (beneath(denies[i], path) && strcmp(denies[i], path)) above_deny = 1;
  }
  /* Entries are opened relative to their directory (`at`, `name`): one lookup, not a walk from the root. */
  if (fd < 0) fd = openat(at, name, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return; /* nothing there to grant */
    die(EXIT_SETUP, "open %s: %s", path, strerror(errno));
  }
  if (!above_deny) {
    add_fd_rule(fd, access, path, type);
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
    grant(child, access, 0, -1, e->d_type, dfd, e->d_name);
  }
  closedir(d);
}

/* ---- seccomp: the system calls Landlock does not govern ------------------------------------------- */

/*
 * Landlock governs files, TCP ports, signals and abstract Unix sockets. Everything else a process can reach
 * in the kernel it reaches through system calls, and the filter below closes the ones that go around those
 * rules or around the process's lack of privilege: io_uring (which opens sockets and files without the system
 * calls filtered here), socket families and protocols Landlock cannot see (a pathname Unix socket, UDP, raw,
 * packet, MPTCP, SCTP…), new namespaces, mounts, file handles (open_by_handle_at reaches any inode of a
 * mounted filesystem, whatever Landlock says of its path), BPF, perf, keyrings, userfaultfd, kexec and
 * modules. Refusals return an error, never kill: a program that tries io_uring or an exotic socket falls back
 * or reports the error, as it would on a kernel built without the feature.
 *
 * The other architectures the kernel runs in the same process (x86-64's i386 and x32 system calls, aarch64's
 * 32-bit ARM ones) have their own numbers and their own socketcall multiplexer; rather than keep a second
 * table, every such call fails with ENOSYS.
 */
#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define NATIVE_ARCH_NAME "x86_64"
#define COMPAT_NAME "i386 and x32"
#define X32_SYSCALL_BIT 0x40000000
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#define NATIVE_ARCH_NAME "aarch64"
#define COMPAT_NAME "arm (32-bit)"
#endif

/* Numbers newer than some build hosts' headers; since 424 every architecture shares them. */
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#define __NR_io_uring_enter 426
#define __NR_io_uring_register 427
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#define __NR_move_mount 429
#define __NR_fsopen 430
#define __NR_fsconfig 431
#define __NR_fsmount 432
#define __NR_fspick 433
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_quotactl_fd
#define __NR_quotactl_fd 443
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif

#define CLONE_NS_FLAGS                                                                                         \
  (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)
#define CLONE_NEWTIME_FLAG 0x00000080 /* unshare only: in clone(2) these bits are the exit signal */
#define NETLINK_ROUTE_PROTO 0

struct refused_call {
  long nr;
  const char *name;
  int err;
};

/* Refused whatever their arguments. */
static const struct refused_call REFUSED[] = {
    /* io_uring: IORING_OP_SOCKET and IORING_OP_CONNECT make sockets no socket(2) filter sees. */
    {__NR_io_uring_setup, "io_uring_setup", EPERM},
    {__NR_io_uring_enter, "io_uring_enter", EPERM},
    {__NR_io_uring_register, "io_uring_register", EPERM},
    /* Namespaces: a new user namespace gives back every capability inside it, and with it the kernel code
       (netfilter, mounts of many filesystems) that only privileged processes reach. unshare and clone are
       refused by flag, below. */
    {__NR_setns, "setns", EPERM},
    /* Mounts, in both APIs: a mount changes what a path Landlock allowed points at. */
    {__NR_mount, "mount", EPERM},
    {__NR_umount2, "umount2", EPERM},
    {__NR_pivot_root, "pivot_root", EPERM},
    {__NR_chroot, "chroot", EPERM},
    {__NR_open_tree, "open_tree", EPERM},
    {__NR_open_tree_attr, "open_tree_attr", EPERM},
    {__NR_move_mount, "move_mount", EPERM},
    {__NR_fsopen, "fsopen", EPERM},
    {__NR_fsconfig, "fsconfig", EPERM},
    {__NR_fsmount, "fsmount", EPERM},
    {__NR_fspick, "fspick", EPERM},
    {__NR_mount_setattr, "mount_setattr", EPERM},
    /* File handles name inodes, not paths: open_by_handle_at is a way past every Landlock path rule. */
    {__NR_name_to_handle_at, "name_to_handle_at", EPERM},
    {__NR_open_by_handle_at, "open_by_handle_at", EPERM},
    /* Kernel code reachable from user space with a large attack surface and no use in a tool. */
    {__NR_bpf, "bpf", EPERM},
    {__NR_perf_event_open, "perf_event_open", EPERM},
    {__NR_userfaultfd, "userfaultfd", EPERM},
    {__NR_keyctl, "keyctl", EPERM},
    {__NR_add_key, "add_key", EPERM},
    {__NR_request_key, "request_key", EPERM},
    {__NR_fanotify_init, "fanotify_init", EPERM},
    /* Another process's descriptors: Landlock scopes the access check, but nothing a tool does needs it. */
    {__NR_pidfd_getfd, "pidfd_getfd", EPERM},
    /* The machine's own state. */
    {__NR_kexec_load, "kexec_load", EPERM},
    {__NR_kexec_file_load, "kexec_file_load", EPERM},
    {__NR_init_module, "init_module", EPERM},
    {__NR_finit_module, "finit_module", EPERM},
    {__NR_delete_module, "delete_module", EPERM},
    {__NR_swapon, "swapon", EPERM},
    {__NR_swapoff, "swapoff", EPERM},
    {__NR_reboot, "reboot", EPERM},
    {__NR_acct, "acct", EPERM},
    {__NR_quotactl, "quotactl", EPERM},
    {__NR_quotactl_fd, "quotactl_fd", EPERM},
    {__NR_syslog, "syslog", EPERM},
    {__NR_vhangup, "vhangup", EPERM},
#ifdef __NR_lookup_dcookie /* gone from the headers of Linux 6.10+, which no longer have the call */
    {__NR_lookup_dcookie, "lookup_dcookie", EPERM},
#endif
#if defined(__x86_64__)
    {__NR_iopl, "iopl", EPERM},
    {__NR_ioperm, "ioperm", EPERM},
    {__NR_modify_ldt, "modify_ldt", EPERM},
    {__NR_uselib, "uselib", EPERM},
#endif
    /* clone3 keeps its flags in memory, where a filter cannot read them: ENOSYS makes the C library fall back
       to clone(2), whose flags are checked below. */
    {__NR_clone3, "clone3", ENOSYS},
    /* openat2 keeps its flags and mode in memory too (a set-uid mode, below): ENOSYS makes callers fall back to
       openat, as on kernels before 5.6. */
    {__NR_openat2, "openat2", ENOSYS},
};
#define NREFUSED ((int)(sizeof REFUSED / sizeof REFUSED[0]))

/* How the socket filter treats the IP families, from the policy's network setting. */
enum net_mode {
  NET_OFF,   /* --no-net: TCP only (Landlock's port rules then refuse every connect and bind) */
  NET_PORTS, /* --net-bind/--net-connect: TCP (Landlock's ports) and UDP (name lookups) */
  NET_OPEN,  /* no network option: any IP socket the process's (dropped) privileges allow */
};

static enum net_mode net_mode(void) {
  if (no_net) return NET_OFF;
  return nbind || nconnect ? NET_PORTS : NET_OPEN;
}

/*
 * A small assembler for classic BPF: jumps name labels, resolved once the program is complete (BPF jumps go
 * forward only, by at most 255 instructions).
 */
enum label {
  L_NONE = -1,
  L_ALLOW,
  L_EPERM,
  L_EACCES,
  L_ENOSYS,
  L_SOCKET,
  L_SOCKETPAIR,
  L_INET,
  L_NETLINK,
  L_CLONE,
  L_UNSHARE,
  L_IOCTL,
  L_PRLIMIT,
  L_PRCTL,
  L_SEND_FLAGS_2,
  L_SEND_FLAGS_3,
  L_OPEN_FLAGS_1,
  L_OPEN_FLAGS_2,
  L_MODE_1,
  L_MODE_2,
  L_MODE_3,
  L_TCP_PROTO,
  L_UDP_PROTO,
  L_COUNT /* labels from here on are made by new_label(), for the branches of the dispatch tree */
};

#define MAX_INSNS 256
#define MAX_LABELS (L_COUNT + 64)
static struct sock_filter insns[MAX_INSNS];
static int jt_label[MAX_INSNS], jf_label[MAX_INSNS];
static int ninsns, label_at[MAX_LABELS], nlabels;

static int new_label(void) {
  if (nlabels >= MAX_LABELS) die(EXIT_SETUP, "seccomp: the filter needs more than %d labels", MAX_LABELS);
  return nlabels++;
}

static void emit(uint16_t code, uint32_t k, int jt, int jf) {
  if (ninsns >= MAX_INSNS) die(EXIT_SETUP, "seccomp: the filter does not fit in %d instructions", MAX_INSNS);
  insns[ninsns] = (struct sock_filter){.code = code, .k = k};
  jt_label[ninsns] = jt;
  jf_label[ninsns] = jf;
  ninsns++;
}
static void label(int l) { label_at[l] = ninsns; }
static void load_word(uint32_t offset) { emit(BPF_LD | BPF_W | BPF_ABS, offset, L_NONE, L_NONE); }
/* The low 32 bits of argument i: every argument inspected here is an int to the kernel (or, for clone's
   flags, only its low half is used). Both architectures are little-endian. */
static void load_arg(int i) { load_word(offsetof(struct seccomp_data, args[0]) + 8 * i); }
static void jump_if(uint32_t k, int yes) { emit(BPF_JMP | BPF_JEQ | BPF_K, k, yes, L_NONE); }
static void ret(uint32_t v) { emit(BPF_RET | BPF_K, v, L_NONE, L_NONE); }
static void ret_errno(int e) { ret(SECCOMP_RET_ERRNO | ((uint32_t)e & SECCOMP_RET_DATA)); }
static void go(enum label l) { emit(BPF_JMP | BPF_JA, 0, l, L_NONE); }

static void resolve_labels(void) {
  for (int i = 0; i < ninsns; i++) {
    int ja = insns[i].code == (BPF_JMP | BPF_JA);
    for (int which = 0; which < 2; which++) {
      int l = which ? jf_label[i] : jt_label[i];
      if (l == L_NONE) continue;
      int off = label_at[l] - (i + 1);
      if (off < 0 || (!ja && off > 255)) die(EXIT_SETUP, "seccomp: a jump of the filter is out of range");
      if (ja) insns[i].k = (uint32_t)off;
      else if (which) insns[i].jf = (uint8_t)off;
      else insns[i].jt = (uint8_t)off;
    }
  }
}

/* What the dispatch on the system call number does with one number. */
struct dispatch {
  uint32_t nr;
  int to;
};

static int by_nr(const void *a, const void *b) {
  uint32_t x = ((const struct dispatch *)a)->nr, y = ((const struct dispatch *)b)->nr;
  return x < y ? -1 : x > y;
}

/*
 * A balanced tree of comparisons over the sorted numbers, then a few equality tests at each leaf: the kernel
 * runs the filter for every number when it is installed (to cache which calls are always allowed) and on every
 * call it cannot cache, so a dozen instructions instead of a linear table's sixty keep both cheap.
 */
static void dispatch_tree(const struct dispatch *d, int n) {
  if (n <= 4) {
    for (int i = 0; i < n; i++) jump_if(d[i].nr, d[i].to);
    go(L_ALLOW);
    return;
  }
  int mid = n / 2, right = new_label();
  emit(BPF_JMP | BPF_JGE | BPF_K, d[mid].nr, right, L_NONE);
  dispatch_tree(d, mid);
  label(right);
  dispatch_tree(d + mid, n - mid);
}

static void build_filter(void) {
#ifdef NATIVE_ARCH
  enum net_mode mode = net_mode();
  for (int l = 0; l < MAX_LABELS; l++) label_at[l] = -1;
  ninsns = 0;
  nlabels = L_COUNT;

  load_word(offsetof(struct seccomp_data, arch));
  emit(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, L_NONE, L_ENOSYS);
  load_word(offsetof(struct seccomp_data, nr));
#ifdef X32_SYSCALL_BIT
  emit(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, L_ENOSYS, L_NONE);
#endif
#define NBY_ARG 24
  struct dispatch d[NREFUSED + NBY_ARG] = {
      {__NR_socket, L_SOCKET}, {__NR_socketpair, L_SOCKETPAIR}, {__NR_clone, L_CLONE},
      {__NR_unshare, L_UNSHARE}, {__NR_ioctl, L_IOCTL}, {__NR_prlimit64, L_PRLIMIT}, {__NR_prctl, L_PRCTL},
  };
  int nd = 7;
  if (mode != NET_OPEN) {
    d[nd++] = (struct dispatch){__NR_sendto, L_SEND_FLAGS_3};
    d[nd++] = (struct dispatch){__NR_sendmsg, L_SEND_FLAGS_2};
    d[nd++] = (struct dispatch){__NR_sendmmsg, L_SEND_FLAGS_3};
  }
  /* listen(2) on a TCP socket that was never bound binds it to an ephemeral port on every address, without the
     bind hook Landlock's port rules are enforced in: with the network off a tool served connections from the
     machine and the LAN. Where no TCP port may be bound and no Unix socket made, no socket can listen lawfully
     (a socketpair's cannot), so listen is refused; with Unix sockets or bind ports allowed it cannot be told
     apart here, and stays. */
  if (mode != NET_OPEN && !nbind && deny_unix) d[nd++] = (struct dispatch){__NR_listen, L_EACCES};
  /* A set-uid or set-gid mode, by the argument that holds it (and, for open, only when it creates). */
  d[nd++] = (struct dispatch){__NR_fchmod, L_MODE_1};
  d[nd++] = (struct dispatch){__NR_fchmodat, L_MODE_2};
  d[nd++] = (struct dispatch){__NR_fchmodat2, L_MODE_2};
  d[nd++] = (struct dispatch){__NR_mknodat, L_MODE_2};
  d[nd++] = (struct dispatch){__NR_openat, L_OPEN_FLAGS_2};
#ifdef __NR_chmod /* x86-64's older calls; aarch64 has only the *at ones */
  d[nd++] = (struct dispatch){__NR_chmod, L_MODE_1};
  d[nd++] = (struct dispatch){__NR_creat, L_MODE_1};
  d[nd++] = (struct dispatch){__NR_mknod, L_MODE_1};
  d[nd++] = (struct dispatch){__NR_open, L_OPEN_FLAGS_1};
#endif
  for (int r = 0; r < NREFUSED; r++)
    d[nd++] = (struct dispatch){(uint32_t)REFUSED[r].nr, REFUSED[r].err == ENOSYS ? L_ENOSYS : L_EPERM};
  qsort(d, (size_t)nd, sizeof d[0], by_nr);
  dispatch_tree(d, nd);

  /* socket(2): Unix sockets only with --allow-unix (Landlock cannot refuse connect(2) to a pathname socket,
     the Ollie socket among them); the IP families as the network setting allows; netlink's routing protocol
     when there is a network (getaddrinfo asks it about interfaces); no other family at all. */
  label(L_SOCKET);
  load_arg(0);
  jump_if(AF_UNIX, deny_unix ? L_EACCES : L_ALLOW);
  jump_if(AF_INET, L_INET);
  jump_if(AF_INET6, L_INET);
  jump_if(AF_NETLINK, mode == NET_OFF ? L_EACCES : L_NETLINK);
  go(L_EACCES);
  label(L_INET);
  if (mode == NET_OPEN) {
    go(L_ALLOW);
  } else {
    load_arg(1);
    emit(BPF_ALU | BPF_AND | BPF_K, 0xf, L_NONE, L_NONE); /* the type without SOCK_NONBLOCK/SOCK_CLOEXEC */
    jump_if(SOCK_STREAM, L_TCP_PROTO);
    if (mode == NET_PORTS) jump_if(SOCK_DGRAM, L_UDP_PROTO);
    go(L_EACCES);
    /* A stream socket is TCP to Landlock only with protocol 0 or IPPROTO_TCP: MPTCP (262) and SCTP are
       stream sockets too, and Landlock's port rules do not apply to them. */
    label(L_TCP_PROTO);
    load_arg(2);
    jump_if(0, L_ALLOW);
    jump_if(IPPROTO_TCP, L_ALLOW);
    go(L_EACCES);
    if (mode == NET_PORTS) {
      label(L_UDP_PROTO);
      load_arg(2);
      jump_if(0, L_ALLOW);
      jump_if(IPPROTO_UDP, L_ALLOW);
      go(L_EACCES);
    }
  }
  if (mode != NET_OFF) {
    label(L_NETLINK);
    load_arg(2);
    jump_if(NETLINK_ROUTE_PROTO, L_ALLOW);
    go(L_EACCES);
  }

  /* socketpair(2): a connected pair reaches nothing else, so stream and seqpacket pairs stay (many programs
     talk to their children over one). A datagram pair does not: sendto(2) with a path reaches any datagram
     socket on the machine (syslog, the journal), so it goes with the other Unix sockets. */
  label(L_SOCKETPAIR);
  load_arg(0);
  emit(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, L_NONE, L_EACCES);
  if (deny_unix) {
    load_arg(1);
    emit(BPF_ALU | BPF_AND | BPF_K, 0xf, L_NONE, L_NONE);
    jump_if(SOCK_STREAM, L_ALLOW);
    jump_if(SOCK_SEQPACKET, L_ALLOW);
    go(L_EACCES);
  } else {
    go(L_ALLOW);
  }

  /* TCP Fast Open: sendto/sendmsg/sendmmsg with MSG_FASTOPEN connect an unconnected TCP socket inside the
     send, without the connect hook where Landlock enforces its port rules (measured on Linux 6.18, ABI 7: with
     --no-net a tool reached a loopback listener and sent its data). Wherever Landlock is to govern TCP, the flag
     is refused; connect(2), TCP_FASTOPEN_CONNECT included, goes through the hook. */
  if (mode != NET_OPEN) {
    label(L_SEND_FLAGS_2);
    load_arg(2);
    emit(BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, L_EPERM, L_ALLOW);
    label(L_SEND_FLAGS_3);
    load_arg(3);
    emit(BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, L_EPERM, L_ALLOW);
  }

  /* Set-uid and set-gid modes. Landlock does not govern a file's mode, and the tool owns what it creates (as
     root, a file owned by root): a set-uid copy of a shell in the workspace or $TMPDIR, made where the tool may
     write, was root — or the user — to any other local user who ran it (no_new_privs holds for the sandbox
     only). chmod, fchmod, fchmodat(2), mknod(at) and creating opens refuse those bits; other modes stay. */
#define TMPFILE_BIT 020000000 /* O_TMPFILE without the O_DIRECTORY it includes (every opendir sets that) */
  label(L_OPEN_FLAGS_1);
  load_arg(1);
  emit(BPF_JMP | BPF_JSET | BPF_K, O_CREAT | TMPFILE_BIT, L_MODE_2, L_ALLOW);
  label(L_OPEN_FLAGS_2);
  load_arg(2);
  emit(BPF_JMP | BPF_JSET | BPF_K, O_CREAT | TMPFILE_BIT, L_MODE_3, L_ALLOW);
  label(L_MODE_1);
  load_arg(1);
  emit(BPF_JMP | BPF_JSET | BPF_K, S_ISUID | S_ISGID, L_EPERM, L_ALLOW);
  label(L_MODE_2);
  load_arg(2);
  emit(BPF_JMP | BPF_JSET | BPF_K, S_ISUID | S_ISGID, L_EPERM, L_ALLOW);
  label(L_MODE_3);
  load_arg(3);
  emit(BPF_JMP | BPF_JSET | BPF_K, S_ISUID | S_ISGID, L_EPERM, L_ALLOW);

  /* clone(2) and unshare(2) without namespace flags are how every process and thread starts. CLONE_PARENT is
   * refused too: it makes the new process a child of the caller's parent, which for a call's own process is the
   * spawner, outside the tree the spawner counts for the call's process and memory limits (it would be killed
   * as a stray, but the call that made it never charged). No C library, runtime or thread uses it. */
  label(L_CLONE);
  load_arg(0);
  emit(BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS | CLONE_PARENT, L_EPERM, L_ALLOW);
  label(L_UNSHARE);
  load_arg(0);
  emit(BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS | CLONE_NEWTIME_FLAG, L_EPERM, L_ALLOW);

  /* TIOCSTI pushes input into a terminal, to be read by whatever owns it next. TIOCSETD changes a terminal's line
   * discipline, and asking for one the kernel has not loaded loads its module (dev.tty.ldisc_autoload): code a
   * tool never needs, with a history of holes (n_hdlc, n_gsm). */
  label(L_IOCTL);
  load_arg(1);
  jump_if(TIOCSTI, L_EPERM);
  jump_if(TIOCSETD, L_EPERM);
  go(L_ALLOW);

  /* prlimit64(pid, resource, new, old) setting the limits of another process: the kernel checks the uid only
     (Landlock scopes signals and ptrace, not this), and every process of the user is fair game — the spawner
     and its guardian left without descriptors could no longer list, so no longer kill, what a call leaves
     behind, and RLIMIT_CPU of 1 s kills toolsrv or the daemon at once. A process's own limits (pid 0, which is
     what setrlimit and prlimit(0, …) use) and reading another's stay. `new` is a pointer: both halves. */
  label(L_PRLIMIT);
  load_arg(0);
  jump_if(0, L_ALLOW);
  load_word(offsetof(struct seccomp_data, args[2]));
  emit(BPF_JMP | BPF_JEQ | BPF_K, 0, L_NONE, L_EPERM);
  load_word(offsetof(struct seccomp_data, args[2]) + 4);
  emit(BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, L_EPERM);

  /* prctl(PR_SET_CHILD_SUBREAPER, 0): a call's own process is the subreaper of all it starts, which keeps them
     in the tree the spawner counts for the call's process and memory limits. Cleared, its orphans go to the
     spawner, which kills them as strays within 50 ms but cannot charge them to the call: it could make them
     without end. Setting the flag (a process below becoming a subreaper too) stays. */
  label(L_PRCTL);
  load_arg(0);
  emit(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_CHILD_SUBREAPER, L_NONE, L_ALLOW);
  load_word(offsetof(struct seccomp_data, args[1]));
  emit(BPF_JMP | BPF_JEQ | BPF_K, 0, L_NONE, L_ALLOW);
  load_word(offsetof(struct seccomp_data, args[1]) + 4);
  emit(BPF_JMP | BPF_JEQ | BPF_K, 0, L_EPERM, L_ALLOW);

  /* The verdicts, last: BPF jumps only go forward. */
  label(L_ALLOW);
  ret(SECCOMP_RET_ALLOW);
  label(L_EPERM);
  ret_errno(EPERM);
  label(L_EACCES);
  ret_errno(EACCES);
  label(L_ENOSYS);
  ret_errno(ENOSYS);

  for (int l = 0; l < nlabels; l++)
    if (label_at[l] < 0 && l != L_TCP_PROTO && l != L_UDP_PROTO && l != L_NETLINK && l != L_SEND_FLAGS_2 &&
        l != L_SEND_FLAGS_3)
      die(EXIT_SETUP, "seccomp: the filter has no code for label %d", l);
  resolve_labels();
#endif
}

/* Fails closed: no filter, no tool. */
static void install_filter(void) {
#ifdef NATIVE_ARCH
  build_filter();
  struct sock_fprog fp = {.len = (unsigned short)ninsns, .filter = insns};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) < 0)
    die(EXIT_SETUP, "seccomp: installing the system call filter failed: %s", strerror(errno));
#else
  die(EXIT_UNAVAILABLE, "unavailable: the system call filter is not implemented for this architecture");
#endif
}

/* ---- privileges --------------------------------------------------------------------------------------- */

/*
 * A tool runs with no capability at all, whoever starts it. As root that takes more than clearing the sets:
 * an execve by uid 0 would hand the bounding set back as permitted capabilities, so the bounding set is
 * emptied and SECBIT_NOROOT locked (root's uid then means nothing to exec), with SECBIT_NO_SETUID_FIXUP and
 * the ambient-raise lock so that no later change of uid or ambient set brings a capability back. Without
 * CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH root reads only what the file modes grant it, without CAP_MKNOD it makes
 * no device nodes, and without CAP_SYS_PTRACE and CAP_SYS_ADMIN it cannot read other processes' /proc files
 * (with them, a root tool read the daemon's environ in spite of Landlock's ptrace restriction).
 */
#define LOCKED_SECUREBITS                                                                                      \
  (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |             \
   SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

static int capget2(struct __user_cap_data_struct d[2]) {
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  return (int)syscall(SYS_capget, &h, d);
}
static int capset2(struct __user_cap_data_struct d[2]) {
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  return (int)syscall(SYS_capset, &h, d);
}

static int is_root(void) {
  uid_t r, e, s;
  if (getresuid(&r, &e, &s) < 0) return 1;
  return r == 0 || e == 0 || s == 0;
}

static int bounding_set_empty(void) {
  for (int c = 0; c < 64; c++) {
    int v = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
    if (v < 0) break; /* EINVAL: beyond the kernel's last capability */
    if (v) return 0;
  }
  return 1;
}

static void drop_privileges(void) {
  struct __user_cap_data_struct d[2];
  if (capget2(d) < 0) die(EXIT_SETUP, "capget: %s", strerror(errno));
  int root = is_root();
  if (d[0].permitted & (1U << CAP_SETPCAP)) {
    d[0].effective |= 1U << CAP_SETPCAP;
    if (capset2(d) < 0) die(EXIT_SETUP, "capset (raising CAP_SETPCAP to drop the others): %s", strerror(errno));
    if (prctl(PR_SET_SECUREBITS, LOCKED_SECUREBITS, 0, 0, 0) < 0)
      die(EXIT_SETUP, "securebits: %s", strerror(errno));
    for (int c = 0; c < 64; c++) {
      if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0) continue;
      if (errno == EINVAL && c > CAP_SETPCAP) break; /* beyond the kernel's last capability */
      die(EXIT_SETUP, "dropping capability %d from the bounding set: %s", c, strerror(errno));
    }
  } else if (root && !bounding_set_empty()) {
    die(EXIT_SETUP,
        "running as root without CAP_SETPCAP: the bounding set cannot be emptied nor SECBIT_NOROOT set, so a "
        "program the tool executes could get root's capabilities back");
  }
  /* EINVAL: a kernel before 4.3, which has no ambient set to clear. */
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    die(EXIT_SETUP, "clearing the ambient capabilities: %s", strerror(errno));
  memset(d, 0, 2 * sizeof d[0]);
  if (capset2(d) < 0) die(EXIT_SETUP, "capset (dropping every capability): %s", strerror(errno));
  if (capget2(d) < 0) die(EXIT_SETUP, "capget: %s", strerror(errno));
  for (int i = 0; i < 2; i++)
    if (d[i].effective || d[i].permitted || d[i].inheritable)
      die(EXIT_SETUP, "capabilities are still held after dropping them all");
}

/* ---- protected paths: read-only beneath a write rule -------------------------------------------------- */

/*
 * Landlock only adds rights, so a file beneath a writable directory cannot be kept read-only by it. Some such files
 * are run later by the user, outside any sandbox: a repository's .git/hooks and .git/config (a hook, or a
 * core.fsmonitor, the agent planted runs at the user's next `git commit` or `git status`). The tool gets a mount
 * namespace of its own in which each --protect path is bind-mounted read-only onto itself, and each --pin path
 * (their parent, .git) onto itself, read-write: a mount point cannot be renamed or removed (EBUSY), so the
 * repository cannot be swapped for a copy with other hooks. Landlock's rules hold on the inodes, so the mounts
 * change nothing else, and once restricted (and under the system call filter) the tool can neither mount nor
 * unmount. As root the mount namespace is enough; another user first enters a user namespace of its own, mapping
 * only its own ids, whose capabilities drop_privileges() then drops.
 */
static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
    die(EXIT_UNAVAILABLE, "unavailable: cannot keep .git/hooks and .git/config read-only: writing %s: %s", path,
        strerror(errno));
  close(fd);
}

/* Binds `path` onto itself (read-only with `ro`), through a descriptor: what is mounted on is what was opened. */
static void bind_self(const char *path, int ro) {
  /* A link (a dotfiles manager's ~/.config/fish, a project's .git/hooks) is pinned itself before its target is
   * bound: the mount below lands on the target, and the link would stay a name the tool can remove and replace. */
  int link = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat ls;
  if (link >= 0 && fstat(link, &ls) == 0 && S_ISLNK(ls.st_mode)) {
    char at[64];
    snprintf(at, sizeof at, "/proc/self/fd/%d", link);
    if (mount(at, at, NULL, MS_BIND, NULL) < 0) die(EXIT_SETUP, "pin link %s: %s", path, strerror(errno));
  }
  if (link >= 0) close(link);
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return; /* nothing there to protect */
    die(EXIT_SETUP, "protect %s: %s", path, strerror(errno));
  }
  char at[64];
  snprintf(at, sizeof at, "/proc/self/fd/%d", fd);
  if (mount(at, at, NULL, MS_BIND | MS_REC, NULL) < 0) die(EXIT_SETUP, "bind mount %s: %s", path, strerror(errno));
  if (ro) {
    /* A remount in a user namespace must keep the flags the kernel locked on the original mount. */
    struct statvfs st;
    unsigned long keep = 0;
    if (statvfs(path, &st) == 0)
      keep = (st.f_flag & ST_NOSUID ? MS_NOSUID : 0) | (st.f_flag & ST_NODEV ? MS_NODEV : 0) |
             (st.f_flag & ST_NOEXEC ? MS_NOEXEC : 0) | (st.f_flag & ST_NOATIME ? MS_NOATIME : 0) |
             (st.f_flag & ST_NODIRATIME ? MS_NODIRATIME : 0) | (st.f_flag & ST_RELATIME ? MS_RELATIME : 0);
    /* The new mount is the one the descriptor's path now names: open it again to reach it, not the one below. */
    int top = open(path, O_PATH | O_CLOEXEC);
    if (top < 0) die(EXIT_SETUP, "protect %s: %s", path, strerror(errno));
    snprintf(at, sizeof at, "/proc/self/fd/%d", top);
    if (mount(NULL, at, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, NULL) < 0)
      die(EXIT_SETUP, "read-only remount of %s: %s", path, strerror(errno));
    close(top);
  }
  close(fd);
}

/*
 * --private-pts. /dev/pts holds every terminal of the machine, and a tool running as the user may open the user's
 * own: write into the terminal the owner types in (text that looks like a prompt), or read it and take keystrokes
 * (a password typed to sudo) from the shell waiting on them. A devpts instance of the tool's own, mounted over
 * /dev/pts in its mount namespace, holds only the terminals the tool makes (/dev/ptmx opens the instance at its
 * sibling `pts`, so script, tmux and Python's pty work as before); the rules on /dev/pts, added after this, then
 * name it. A terminal the tool was given (a tty tool's, by the spawner) stays its stdin and stdout, but has no name
 * under /dev/pts there. Where no namespace or instance can be had, /dev/pts and /dev/ptmx are not granted at all:
 * the tool runs, without terminals of its own (pts_closed).
 */
static void add_deny(const char *path) {
  GROW(denies, ndenies, denies_cap);
  denies[ndenies++] = strdup(path);
}

/*
 * The machine's devpts mounted somewhere else than /dev/pts: a build chroot's dev/pts (schroot, mock, pbuilder bind
 * it), a container's /dev/console (one terminal of it, bound). Through them, a rule on the directory they are in (a
 * project holding the chroot) reached the owner's terminals as /dev/pts did. Their mount points, read from
 * /proc/self/mountinfo; the ones that could not be covered (closed_pts) are denied, and rules beneath them skipped.
 */
static char **closed_pts;
static int nclosed_pts, closed_pts_cap;

/* Undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134) in place. */
static void unescape_mountinfo(char *s) {
  char *o = s;
  for (; *s; s++) {
    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
      *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
      s += 3;
    } else *o++ = *s;
  }
  *o = 0;
}

/*
 * Every devpts mount but those on /dev/pts (ours on top, the machine's beneath it, out of reach): with `cover`, the
 * tool's own instance is bound over a directory and /dev/null over a single terminal, so the name leads to no
 * terminal of the machine whatever rule reaches it; what cannot be covered, or everything without `cover`, is
 * closed (denied).
 */
/* A mount of /proc/self/mountinfo: where (`at`), and whether the whole filesystem is mounted there (`whole`). */
struct mount_at {
  char *at;
  int whole;
  dev_t dev; /* the filesystem's, as stat gives it for the files in it */
  int order; /* its place in the mount table (all_points) */
};

/*
 * The mounts of filesystem type `fstype` (devpts or devtmpfs). /proc/self/mountinfo is read once, whole, and kept:
 * the mounts made here afterwards (the tool's instance bound over the machine's) are not the machine's.
 */
static struct seen_mount {
  int devpts;
  struct mount_at m;
} *seen_mounts;
static int nseen_mounts = -1, seen_mounts_cap;

/* Every mount point of the table, in its order: a mount made later on one of them, or above, hides what is beneath. */
static char **all_points;
static int nall_points, all_points_cap;

static void read_mounts(void) {
  nseen_mounts = 0;
  FILE *f = fopen("/proc/self/mountinfo", "re");
  char *line = NULL;
  size_t cap = 0;
  while (f && getline(&line, &cap, f) > 0) {
    /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS (spaces escaped) */
    char *sep = strstr(line, " - ");
    if (!sep) continue;
    int devpts = !strncmp(sep + 3, "devpts ", 7), devtmpfs = !strncmp(sep + 3, "devtmpfs ", 9);
    *sep = 0;
    char *save = NULL, *fields[5];
    int n = 0;
    for (char *t = strtok_r(line, " ", &save); t && n < 5; t = strtok_r(NULL, " ", &save)) fields[n++] = t;
    if (n < 5) continue;
    unescape_mountinfo(fields[4]);
    GROW(all_points, nall_points, all_points_cap);
    all_points[nall_points++] = strdup(fields[4]);
    if (!devpts && !devtmpfs) continue;
    unescape_mountinfo(fields[3]);
    GROW(seen_mounts, nseen_mounts, seen_mounts_cap);
    seen_mounts[nseen_mounts].m.order = nall_points - 1;
    seen_mounts[nseen_mounts].devpts = devpts;
    seen_mounts[nseen_mounts].m.at = strdup(fields[4]);
    unsigned ma = 0, mi = 0;
    sscanf(fields[2], "%u:%u", &ma, &mi);
    seen_mounts[nseen_mounts].m.dev = makedev(ma, mi);
    seen_mounts[nseen_mounts++].m.whole = !strcmp(fields[3], "/");
  }
  free(line);
  if (f) fclose(f);
}

/* The mounts of one type (devpts, or devtmpfs): all of them, however many the machine has. */
static int mounts_of(int devpts, struct mount_at **found) {
  if (nseen_mounts < 0) read_mounts();
  int n = 0, cap = 0;
  *found = NULL;
  for (int i = 0; i < nseen_mounts; i++)
    if (seen_mounts[i].devpts == devpts) {
      GROW(*found, n, cap);
      (*found)[n++] = seen_mounts[i].m;
    }
  return n;
}

/*
 * Binds the tool's instance (or /dev/null) over the machine's devpts mounted at `m`; 0 when nothing is there (it is
 * then denied). The mount point is a path the agent may write around (a chroot in the project): renamed, or a
 * directory on it swapped for a symlink between the reading of the mount table and the bind, the bind would land
 * elsewhere (wherever the link leads) and leave the machine's instance uncovered under its new name. So the path
 * is opened without following a symlink, must still be the one the table gave with the devpts' device, and the bind
 * is made on that opened mount; anything else fails the call.
 */
static int cover_terminals(const struct mount_at *m, const struct mount_at *covered, int ncovered) {
  /* Another mount on the same path, met before: the bind made then went on the topmost of them, this one too. */
  for (int j = 0; j < ncovered; j++)
    if (!strcmp(m->at, covered[j].at)) return 1;
  int fd = open(m->at, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP) return 0;
    /* Beneath one covered already (a terminal bound in a dev/pts covered whole): nothing of the machine's there. */
    for (int j = 0; j < ncovered; j++)
      if (covered[j].whole && beneath(m->at, covered[j].at) && strcmp(m->at, covered[j].at)) return 1;
    /* Hidden by a mount made after it on its mount point or above (no rename reaches beneath that): unreachable. */
    for (int j = m->order + 1; j < nall_points; j++)
      if (beneath(m->at, all_points[j])) return 1;
    die(EXIT_SETUP, "the machine's terminals mounted at %s moved while the tool's were set up", m->at);
  }
  char real[PATH_MAX], link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, real, sizeof real - 1);
  struct stat st;
  if (n < 0 || fstat(fd, &st) < 0) die(EXIT_SETUP, "the machine's terminals at %s: %s", m->at, strerror(errno));
  real[n] = 0;
  if (strcmp(real, m->at) || st.st_dev != m->dev)
    die(EXIT_SETUP, "the machine's terminals mounted at %s moved while the tool's were set up (now %s)", m->at, real);
  int ok = mount(m->whole ? "/dev/pts" : "/dev/null", link, NULL, MS_BIND, NULL) == 0;
  close(fd);
  return ok;
}

static void foreign_terminals(int cover) {
  struct mount_at *found;
  int nfound = mounts_of(1, &found);
  for (int i = 0; i < nfound; i++) {
    const char *mp = found[i].at;
    if (!strcmp(mp, "/dev/pts")) continue; /* ours on top; the machine's beneath it, out of reach */
    if (cover && cover_terminals(&found[i], found, i)) continue;
    GROW(closed_pts, nclosed_pts, closed_pts_cap);
    closed_pts[nclosed_pts++] = found[i].at;
    add_deny(mp);
  }
  free(found);
}

/*
 * The machine's other terminals in /dev: its consoles (/dev/console, the virtual consoles /dev/tty1…, their screens
 * /dev/vcs*), serial lines, the old BSD ptys. The policy names none of them, but a rule on /dev or / covers them, and
 * one a user logs in on is the user's (root's for a root tool): denied, cut out of such a rule. Which devices are
 * terminals the kernel says in /proc/tty/drivers (major, minors); the virtual consoles' screens (major 7) are not
 * drivers of their own. /dev/tty (a process's own terminal, none for a tool but a tty tool's) and /dev/ptmx (the
 * instance beside it) stay. A rule naming a device explicitly holds, as for any denied path.
 */
struct dev_range {
  unsigned major, lo, hi;
};

static int terminal_device(dev_t rdev, const struct dev_range *r, int nr) {
  unsigned ma = major(rdev), mi = minor(rdev);
  if (ma == 5 && (mi == 0 || mi == 2)) return 0;
  if (ma == 7 || (ma >= 136 && ma <= 143) || ma == 2 || ma == 3 || ma == 4) return 1;
  for (int i = 0; i < nr; i++)
    if (ma == r[i].major && mi >= r[i].lo && mi <= r[i].hi) return 1;
  return 0;
}

static void deny_terminal_devices_in(const char *dir, const struct dev_range *r, int nr, int depth) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  struct dirent *e;
  char path[PATH_MAX];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || (e->d_type != DT_CHR && e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)) continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
    if (depth == 0 && (!strcmp(e->d_name, "pts") || !strcmp(e->d_name, "shm"))) continue;
    struct stat st;
    if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    if (S_ISDIR(st.st_mode) && depth < 2) deny_terminal_devices_in(path, r, nr, depth + 1);
    else if (S_ISCHR(st.st_mode) && terminal_device(st.st_rdev, r, nr)) add_deny(path);
  }
  closedir(d);
}

/* Whether a rule covers `dir` whole (is it, or above it). */
static int rule_covers(const char *dir) {
  for (int r = 0; r < nrules; r++)
    if (beneath(dir, rules[r].path)) return 1;
  return 0;
}

static void deny_terminal_devices(void) {
  /* /dev, and the machine's /dev bound elsewhere (a chroot's dev, `mount --rbind /dev`): the same devices. */
  struct mount_at *devs;
  int ndevs = mounts_of(0, &devs), scan = rule_covers("/dev");
  for (int i = 0; i < ndevs; i++)
    if (strcmp(devs[i].at, "/dev") && rule_covers(devs[i].at)) scan = 1;
  if (!scan) {
    free(devs);
    return;
  }
  /* As many as the kernel lists (a machine with many USB serial and modem drivers has more than a few dozen). */
  struct dev_range *r = NULL;
  int nr = 0, rcap = 0;
  FILE *f = fopen("/proc/tty/drivers", "re");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    unsigned ma, lo, hi;
    char name[64], node[128];
    int k = sscanf(line, "%63s %127s %u %u-%u", name, node, &ma, &lo, &hi);
    if (k == 4) hi = lo;
    if (k < 4) continue;
    GROW(r, nr, rcap);
    r[nr++] = (struct dev_range){ma, lo, hi};
  }
  if (f) fclose(f);
  if (rule_covers("/dev")) deny_terminal_devices_in("/dev", r, nr, 0);
  for (int i = 0; i < ndevs; i++)
    if (strcmp(devs[i].at, "/dev") && rule_covers(devs[i].at)) deny_terminal_devices_in(devs[i].at, r, nr, 0);
  free(devs);
  free(r);
}

static void close_terminals(void) {
  pts_closed = 1;
  /* Denied, so that a broader rule (/dev, /) is cut around them too; the rules naming them are skipped below. */
  add_deny("/dev/pts");
  add_deny("/dev/ptmx");
  foreign_terminals(0);
}

/* The terminals one call may hold at once in its own devpts: every instance draws on the machine's kernel.pty.max,
 * and a call that took them all would leave none for another call's tty tool (or, but for kernel.pty.reserve,
 * for the user's own terminals). tmux with a pane each uses one per pane. */
#define PTY_MAX "64"

static void private_terminals(void) {
  if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0600,max=" PTY_MAX) < 0)
    close_terminals();
  else foreign_terminals(1);
}

static void protect_paths(void) {
  if (!nprotects && !npins && !private_pts) return;
  uid_t uid = getuid();
  gid_t gid = getgid();
  struct __user_cap_data_struct d[2];
  int admin = capget2(d) == 0 && (d[0].effective & (1U << CAP_SYS_ADMIN));
  if (!nprotects && !npins) {
    /* Only the terminals to keep private: without a namespace, the tool goes without terminals rather than fail. */
    if (unshare(admin ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) < 0) {
      close_terminals();
      return;
    }
  } else if (unshare(admin ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) < 0)
    die(EXIT_UNAVAILABLE,
        "unavailable: cannot keep .git/hooks and .git/config read-only: this kernel refuses a %s namespace (%s); "
        "allow unprivileged user namespaces, or set `isolate: {git_hooks: false, startup_files: false}` in "
        "sandbox.yaml to run without",
        admin ? "mount" : "user", strerror(errno));
  if (!admin) {
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "%u %u 1", (unsigned)uid, (unsigned)uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "%u %u 1", (unsigned)gid, (unsigned)gid);
    write_file("/proc/self/gid_map", map);
  }
  /* Nothing done here may reach the namespace the daemon and the user's programs live in. A namespace in which
   * nothing may be mounted (Ubuntu's AppArmor lets an unprivileged user namespace be made but gives it no
   * capability) keeps only the terminals from the tool, as where there is no namespace at all. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
    if (!nprotects && !npins) {
      close_terminals();
      return;
    }
    die(EXIT_SETUP, "making the mounts private: %s", strerror(errno));
  }
  for (int p = 0; p < npins; p++) bind_self(pins[p], 0);
  for (int p = 0; p < nprotects; p++) bind_self(protects[p], 1);
  if (private_pts) private_terminals();
}

/* Whether a canonical path is a terminal's: /dev/ptmx, /dev/pts or beneath it. */
static int closed_terminal(const char *real) {
  for (int i = 0; i < nclosed_pts; i++)
    if (beneath(real, closed_pts[i])) return 1;
  return 0;
}

static int terminal_path(const char *real) {
  return closed_terminal(real) || !strcmp(real, "/dev/ptmx") || !strcmp(real, "/dev/pts") || !strncmp(real, "/dev/pts/", 9);
}

/* ---- probe ----------------------------------------------------------------------------------------- */

/* One item of a JSON list of names (system calls, capability sets: never a quote or a backslash in them). */
#define JSON_LIST_ITEM(sep, s) printf("%s\"%s\"", (sep), (s))

/* Whether --protect can work here: a child tries the namespaces it would enter. */
static void probe_protect(void) {
  struct __user_cap_data_struct d[2];
  int admin = capget2(d) == 0 && (d[0].effective & (1U << CAP_SYS_ADMIN));
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) _exit(unshare(admin ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : errno & 0x7f);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
    printf("{\"unavailable\":\"could not try the namespaces\"}");
    return;
  }
  if (WEXITSTATUS(status) == 0) printf("{\"how\":\"%s\"}", admin ? "mount namespace" : "user and mount namespace");
  else
    printf("{\"unavailable\":\"this kernel refuses a %s namespace (%s)\"}", admin ? "mount" : "user",
           strerror(WEXITSTATUS(status)));
}

/*
 * What the helper would apply here, as one line of JSON (docs/sandbox.md): Landlock's ABI and the rights it
 * handles, the system call filter, the privileges dropped. "containment" and "limits" list what the helper
 * itself applies to a tool's processes beyond these (none yet: process groups are the spawner's).
 */
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
    JSON_LIST_ITEM(sep, s);                                                                                    \
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
  ITEM(1, "syscall_filter");
#endif
  ITEM(1, "no_capabilities");
  ITEM(1, "no_new_privs");
  printf("],");
#ifdef NATIVE_ARCH
  printf("\"filter\":{\"arch\":\"%s\",\"refused_abis\":\"%s\",\"refuses\":[", NATIVE_ARCH_NAME, COMPAT_NAME);
  for (int r = 0; r < NREFUSED; r++) JSON_LIST_ITEM(r ? "," : "", REFUSED[r].name);
  printf("],\"by_argument\":[\"socket\",\"socketpair\",\"clone\",\"unshare\",\"ioctl\",\"prlimit64\",\"prctl\",\"fchmod\","
         "\"fchmodat\",\"fchmodat2\",\"mknodat\",\"openat\"%s]},",
#ifdef __NR_chmod
         ",\"chmod\",\"creat\",\"mknod\",\"open\""
#else
         ""
#endif
  );
#else
  printf("\"filter\":{\"unavailable\":\"the system call filter is not implemented for this architecture\"},");
#endif
  struct __user_cap_data_struct d[2];
  int held = capget2(d) == 0 && (d[0].effective | d[0].permitted | d[0].inheritable | d[1].effective |
                                 d[1].permitted | d[1].inheritable);
  int setpcap = held && (d[0].permitted & (1U << CAP_SETPCAP));
  printf("\"capabilities\":{\"root\":%s,\"held\":%s,\"drops\":[\"effective\",\"permitted\",\"inheritable\","
         "\"ambient\"%s]",
         is_root() ? "true" : "false", held ? "true" : "false", setpcap ? ",\"bounding\"" : "");
  if (setpcap) printf(",\"securebits\":[\"noroot\",\"no_setuid_fixup\",\"keep_caps\",\"no_cap_ambient_raise\"]");
  if (!setpcap && is_root() && !bounding_set_empty())
    printf(",\"unavailable\":\"running as root without CAP_SETPCAP: the bounding set cannot be emptied nor "
           "SECBIT_NOROOT set\"");
  printf("},\"protect\":");
  probe_protect();
  printf(",\"containment\":[],\"limits\":[]}\n");
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
          "usage: %s [--ro P] [--rox P] [--rw P] [--rwx P] [--deny P] [--protect P] [--pin P] [--private-pts] [--no-net] [--net-bind PORT]\n"
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
      add_deny(real);
      i++;
    } else if (!strcmp(a, "--protect") || !strcmp(a, "--pin")) {
      if (!v || v[0] != '/') die(EXIT_POLICY, "%s needs an absolute path", a);
      if (a[2] == 'p' && a[3] == 'r') {
        check_room("--protect", &nprotects);
        protects[nprotects++] = v;
      } else {
        check_room("--pin", &npins);
        pins[npins++] = v;
      }
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
    } else if (!strcmp(a, "--private-pts")) private_pts = 1;
    else if (!strcmp(a, "--no-net")) no_net = 1;
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

  protect_paths();
  if (private_pts) deny_terminal_devices();

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
    /* The machine's terminals, where the tool could not have a devpts instance of its own: none. */
    if ((pts_closed && terminal_path(real)) || (!pts_closed && closed_terminal(real))) {
      close(fd);
      continue;
    }
    if (rules[r].access & FS_EXECUTE) exec_dirs[nexec_dirs++] = strdup(real);
    grant(real, rules[r].access, 1, fd, DT_UNKNOWN, AT_FDCWD, real);
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

  /* The rules are built (opening their paths may have needed root's rights); from here on, no privilege. */
  drop_privileges();
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die(EXIT_SETUP, "no_new_privs: %s", strerror(errno));
  unsigned flags = audit && abi >= 7 ? RESTRICT_LOG_NEW_EXEC_ON : 0;
  if (syscall(__NR_landlock_restrict_self, ruleset_fd, flags) < 0)
    die(EXIT_SETUP, "landlock_restrict_self: %s", strerror(errno));
  close(ruleset_fd);
  install_filter();

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
