#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *tool_name = "tool";

void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  printf("%s: ", tool_name);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  exit(1);
}

char *read_all(int fd, size_t *len) {
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap + 1);
  if (!buf) fail("out of memory");
  for (;;) {
    if (n == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
      if (!buf) fail("out of memory");
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("read: %s", strerror(errno));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

#define MAX_MEMBERS 64
struct member {
  char *key;
  const char *val; /* raw JSON text of the value */
  char *decoded;   /* the decoded string, once asked for */
  size_t decoded_len;
};
struct args {
  struct member m[MAX_MEMBERS];
  int n;
};

static const char *start, *p, *end;

static void ws(void) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
}

static void bad(const char *what) __attribute__((noreturn));
static void bad(const char *what) { fail("arguments are not valid JSON: %s at byte %ld", what, (long)(p - start)); }

static void put_utf8(char **o, unsigned cp) {
  char *q = *o;
  if (cp < 0x80) *q++ = (char)cp;
  else if (cp < 0x800) *q++ = (char)(0xc0 | cp >> 6), *q++ = (char)(0x80 | (cp & 0x3f));
  else if (cp < 0x10000)
    *q++ = (char)(0xe0 | cp >> 12), *q++ = (char)(0x80 | ((cp >> 6) & 0x3f)), *q++ = (char)(0x80 | (cp & 0x3f));
  else
    *q++ = (char)(0xf0 | cp >> 18), *q++ = (char)(0x80 | ((cp >> 12) & 0x3f)),
    *q++ = (char)(0x80 | ((cp >> 6) & 0x3f)), *q++ = (char)(0x80 | (cp & 0x3f));
  *o = q;
}

static int hex4(const char *s, unsigned *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    *v <<= 4;
    if (c >= '0' && c <= '9') *v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') *v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') *v |= (unsigned)(c - 'A' + 10);
    else return 0;
  }
  return 1;
}

/* Decodes the string starting at p (on the opening quote); advances p past it. Output is NUL-terminated. */
static char *string(size_t *len) {
  p++;
  const char *s = p;
  while (p < end && *p != '"') p += *p == '\\' ? 2 : 1;
  if (p >= end) bad("unterminated string");
  char *out = malloc((size_t)(p - s) + 1), *o = out;
  if (!out) fail("out of memory");
  for (const char *q = s; q < p; q++) {
    if (*q != '\\') {
      *o++ = *q;
      continue;
    }
    q++;
    switch (*q) {
    case 'n': *o++ = '\n'; break;
    case 't': *o++ = '\t'; break;
    case 'r': *o++ = '\r'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'u': {
      unsigned cp, lo;
      if (q + 4 >= p || !hex4(q + 1, &cp)) bad("bad \\u escape");
      q += 4;
      if (cp >= 0xd800 && cp < 0xdc00 && q + 6 < p && q[1] == '\\' && q[2] == 'u' && hex4(q + 3, &lo) &&
          lo >= 0xdc00 && lo < 0xe000) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        q += 6;
      }
      put_utf8(&o, cp);
      break;
    }
    default: *o++ = *q; /* \" \\ \/ */
    }
  }
  *o = 0;
  p++;
  if (len) *len = (size_t)(o - out);
  return out;
}

static void skip_value(void) {
  ws();
  if (p >= end) bad("value expected");
  if (*p == '"') {
    free(string(NULL));
  } else if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p++;
    ws();
    if (p < end && *p == close) {
      p++;
      return;
    }
    for (;;) {
      if (close == '}') {
        ws();
        if (p >= end || *p != '"') bad("key expected");
        free(string(NULL));
        ws();
        if (p >= end || *p != ':') bad("':' expected");
        p++;
      }
      skip_value();
      ws();
      if (p < end && *p == ',') {
        p++;
        continue;
      }
      if (p < end && *p == close) {
        p++;
        return;
      }
      bad("',' or end expected");
    }
  } else {
    const char *s = p;
    while (p < end && !strchr(",}] \t\r\n", *p)) p++;
    if (p == s) bad("value expected");
  }
}

struct args *args_read(void) {
  size_t len;
  char *text = read_all(0, &len);
  struct args *a = calloc(1, sizeof *a);
  if (!a) fail("out of memory");
  start = p = text;
  end = text + len;
  ws();
  if (p >= end || *p != '{') fail("the arguments must be a JSON object");
  p++;
  ws();
  if (p < end && *p == '}') return a;
  for (;;) {
    ws();
    if (p >= end || *p != '"') bad("key expected");
    char *key = string(NULL);
    ws();
    if (p >= end || *p != ':') bad("':' expected");
    p++;
    ws();
    if (a->n < MAX_MEMBERS) a->m[a->n++] = (struct member){key, p, NULL, 0};
    skip_value();
    ws();
    if (p < end && *p == ',') {
      p++;
      continue;
    }
    if (p < end && *p == '}') break;
    bad("',' or '}' expected");
  }
  return a;
}

static struct member *find(struct args *a, const char *key) {
  for (int i = a->n - 1; i >= 0; i--)
    if (!strcmp(a->m[i].key, key)) return strncmp(a->m[i].val, "null", 4) ? &a->m[i] : NULL;
  return NULL;
}

const char *arg_str(struct args *a, const char *key, size_t *len) {
  struct member *m = find(a, key);
  if (!m) return NULL;
  if (*m->val != '"') fail("argument %s must be a string", key);
  if (!m->decoded) {
    p = m->val;
    m->decoded = string(&m->decoded_len);
  }
  if (len) *len = m->decoded_len;
  return m->decoded;
}

long long arg_int(struct args *a, const char *key, long long def) {
  struct member *m = find(a, key);
  if (!m) return def;
  char *e;
  errno = 0;
  double v = strtod(m->val, &e);
  if (e == m->val || errno) fail("argument %s must be a number", key);
  return (long long)v;
}

int arg_bool(struct args *a, const char *key, int def) {
  struct member *m = find(a, key);
  if (!m) return def;
  if (!strncmp(m->val, "true", 4)) return 1;
  if (!strncmp(m->val, "false", 5)) return 0;
  fail("argument %s must be true or false", key);
}

const char *arg_strs(struct args *a, const char *key) {
  struct member *m = find(a, key);
  if (!m) return NULL;
  size_t cap = 256, n = 0;
  char *out = malloc(cap);
  if (!out) fail("out of memory");
  p = m->val;
  int list = *p == '[';
  if (list) {
    p++;
    ws();
  }
  while (p < end && *p == '"') {
    size_t len;
    char *s = string(&len);
    while (n + len + 2 > cap) out = realloc(out, cap *= 2);
    memcpy(out + n, s, len + 1);
    n += len + 1;
    free(s);
    if (!list) break;
    ws();
    if (p < end && *p == ',') {
      p++;
      ws();
    }
  }
  if (list ? p >= end || *p != ']' : n == 0) fail("argument %s must be a string or a list of strings", key);
  out[n] = 0;
  return out;
}
