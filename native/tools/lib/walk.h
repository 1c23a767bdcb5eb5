/* Globs and directory walks for file_glob and file_grep. */
#ifndef OLLIE_TOOL_WALK_H
#define OLLIE_TOOL_WALK_H

/*
 * Matches a whole relative path against a glob: `*` and `?` within one path segment, `[...]` classes (`!` or
 * `^` negates), `**` as a whole segment for any number of segments (including none). Braces are expanded
 * beforehand by glob_braces. Returns 1 on a match.
 */
int glob_match(const char *pat, const char *path);
/* Expands {a,b} alternatives (nested too) into separate patterns; returns how many, in *out. */
int glob_braces(const char *pat, char ***out);
/* The leading segments of a (brace-expanded) pattern that contain no wildcard, e.g.
 * "src/lib" of the pattern "src/lib/x*.c", or "" when the first segment has one. Malloc'd. */
char *glob_base(const char *pat);

/*
 * Walks the tree under root (not following symlinks to directories), calling fn for every entry with its
 * path relative to root and its full path. fn returns 0 to go on, 1 to skip a directory's contents, -1 to
 * stop. Hidden entries (.name) are skipped unless WALK_HIDDEN; .git and node_modules always. With
 * WALK_GITIGNORE, entries named by a .gitignore are skipped: those of root and of every directory below it,
 * and, when `top` is given (root is top/SUB), those of top and of each directory of SUB, applied to paths
 * from their own directory. An entry is tested itself, not by its ancestors between top and root: a search
 * that starts inside an ignored directory (the caller named it) still sees its files.
 */
#define WALK_HIDDEN 1
#define WALK_GITIGNORE 2
typedef int (*walk_fn)(const char *rel, const char *full, int is_dir, void *ctx);
void walk(const char *top, const char *root, int flags, walk_fn fn, void *ctx);
#endif
