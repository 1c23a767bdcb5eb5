/*
 * Shared by the core tools written in C: reading the JSON arguments from stdin, and reporting errors.
 * A tool gets one JSON object on stdin; only its top-level members are looked up, so the parser keeps
 * each member's raw text and decodes strings, numbers and booleans on demand.
 */
#ifndef OLLIE_TOOL_COMMON_H
#define OLLIE_TOOL_COMMON_H
#include <stddef.h>

struct args;

/* Reads stdin and parses it as a JSON object; exits with a message when it is not one. */
struct args *args_read(void);
/* The decoded string member `key`, or NULL when absent or null. Exits when it is not a string. */
const char *arg_str(struct args *a, const char *key, size_t *len);
/* The member `key` as strings (a string, or a list of strings): each NUL-terminated, the last followed by an
 * empty string. NULL when absent or null. Exits when it is something else. */
const char *arg_strs(struct args *a, const char *key);
/* The number member `key` (an integer), `def` when absent or null. Exits when it is not a number. */
long long arg_int(struct args *a, const char *key, long long def);
/* The boolean member `key`, `def` when absent or null. */
int arg_bool(struct args *a, const char *key, int def);

/* Prints "TOOL: message" on stdout (what the model reads) and exits 1. */
void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
extern const char *tool_name;

/* Reads a whole file descriptor; exits on error. */
char *read_all(int fd, size_t *len);
#endif
