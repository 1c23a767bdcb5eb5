/*
 * peercred.node: the credentials of the process at the other end of a Unix socket (SO_PEERCRED), which Node
 * does not expose. olliesrv decides who a connection on its socket belongs to from them (the uid, and whether
 * the pid is one of the tool processes it started), never from what the client claims.
 *
 * A Node-API module: one build serves Node and Electron alike (the API is ABI-stable across both).
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <node_api.h>
#include <string.h>
#include <sys/socket.h>

static napi_value fail(napi_env env, const char *msg) {
  napi_throw_error(env, NULL, msg);
  return NULL;
}

static int set_int(napi_env env, napi_value obj, const char *key, int64_t value) {
  napi_value v;
  return napi_create_int64(env, value, &v) == napi_ok && napi_set_named_property(env, obj, key, v) == napi_ok;
}

/* peerCred(fd) -> { pid, uid, gid }; throws with the system's reason when the descriptor has no peer. */
static napi_value peer_cred(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return fail(env, "peerCred(fd): fd is missing");
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) return fail(env, "peerCred(fd): fd must be a descriptor number");
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return fail(env, strerror(errno));
  napi_value obj;
  if (napi_create_object(env, &obj) != napi_ok) return NULL;
  if (!set_int(env, obj, "pid", cred.pid) || !set_int(env, obj, "uid", cred.uid) || !set_int(env, obj, "gid", cred.gid)) return NULL;
  return obj;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "peerCred", NAPI_AUTO_LENGTH, peer_cred, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "peerCred", fn) != napi_ok) return NULL;
  return exports;
}
