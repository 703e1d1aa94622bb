/*-------------------------------------------------------------------------
 *
 * core/names.h
 *		Curator's node names and ZooKeeper's paths, as pure functions
 *		(core/names.c): path validation, protection ids and protected
 *		names, what kind of recipe node a name is, ghost nodes.  No
 *		PostgreSQL or ZooKeeper calls; unit-tested (test/unit).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_NAMES_H
#define ZKLOCK_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#define ZKLOCK_MAX_PATH_LEN 480		/* max bytes of a user path */
#define ZKLOCK_UUID_LEN 36

/* Curator's node names (doc/wire.md) */
#define ZKLOCK_LOCK_NAME "lock-"
#define ZKLOCK_SEQ_DIGITS 10		/* the sequence the server appends */
#define ZKLOCK_LEASE_NAME "lease-"
#define ZKLOCK_READ_LOCK_NAME "__READ__"
#define ZKLOCK_WRITE_LOCK_NAME "__WRIT__"
/* the data Curator's Revoker writes into a holder's node */
#define ZKLOCK_REVOKE_MESSAGE "__REVOKE__"
#define ZKLOCK_READY_NODE "ready"
/* InterProcessSemaphoreV2's children of P: the leases, and its own lock */
#define ZKLOCK_LEASES_DIR "leases"
#define ZKLOCK_LOCKS_DIR "locks"
#define ZKLOCK_PROTECTED_PREFIX "_c_"
/* "_c_" + uuid + "-" */
#define ZKLOCK_PROTECTED_PREFIX_LEN (3 + ZKLOCK_UUID_LEN + 1)

typedef enum ZklockPathError
{
	ZKLOCK_PATH_OK = 0,
	ZKLOCK_PATH_EMPTY,			/* "" */
	ZKLOCK_PATH_NO_LEADING_SLASH,	/* "a/b" */
	ZKLOCK_PATH_ROOT,			/* "/" alone: a lock needs a node below the
								 * root */
	ZKLOCK_PATH_TRAILING_SLASH, /* "/a/" */
	ZKLOCK_PATH_EMPTY_COMPONENT,	/* "/a//b" */
	ZKLOCK_PATH_DOT_COMPONENT,	/* "/a/./b", "/a/..", "/." */
	ZKLOCK_PATH_BAD_CHARACTER,	/* a character ZooKeeper refuses */
	ZKLOCK_PATH_BAD_ENCODING,	/* not valid UTF-8 */
	ZKLOCK_PATH_TOO_LONG,		/* > maxlen bytes */
	ZKLOCK_PATH_RESERVED		/* first component is "zookeeper" */
} ZklockPathError;

/*
 * Validate a path the way ZooKeeper's PathUtils.validatePath does, plus the
 * rules above.  path need not be NUL-terminated; len bytes.  On error
 * *bad_offset (if not NULL) is the byte offset of the offending character or
 * component; on success it is left alone.
 */
extern ZklockPathError zklock_validate_path(const char *path, size_t len,
											size_t maxlen, size_t *bad_offset);
extern const char *zklock_path_error_message(ZklockPathError err);
/* is path (len bytes) dir itself or below it? */
extern bool zklock_path_is_under(const char *path, size_t len, const char *dir);

/* Java UUID.randomUUID().toString() of 16 random bytes; out has 37 bytes */
extern void zklock_format_uuid(const unsigned char bytes[16], char *out);
extern bool zklock_is_uuid(const char *s);

/* "_c_" + uuid + "-" (40 chars) into out (>= 41 bytes) */
extern void zklock_protected_prefix(const char *uuid, char *out);

/*
 * What kind of recipe node a node name is ("lock", "lease", "read lock",
 * "write lock", "protected node", "double barrier member"), or NULL when
 * it is none: barrier calls refuse to touch such nodes.
 */
extern const char *zklock_recipe_node_kind(const char *name);

/*
 * Curator's own test of a lock's child (String.contains): a read lock
 * node, a write lock node, a node of a lock named lock_name.
 */
extern bool zklock_is_read_node(const char *name);
/* "path/sub/name" (sub or name NULL: left out) into buf; snprintf's result */
extern int	zklock_recipe_path(char *buf, size_t len, const char *path,
							   const char *sub, const char *name);
extern bool zklock_is_write_node(const char *name);
extern bool zklock_is_lock_node(const char *name, const char *lock_name);
/* "_c_<uuid>-<lock_name>"; returns chars needed (snprintf semantics) */
extern int	zklock_protected_name(const char *uuid, const char *lock_name,
								  char *out, size_t outlen);
extern int	zklock_find_protected(char *const *children, int n,
								  const char *prefix);

/*
 * A live request of this client, for zklock_find_ghosts: its protection id
 * and the name of its node under the listed parent, NULL or "" while not
 * known (a create with the id may still be in flight or in doubt).
 */
typedef struct ZklockLiveId
{
	const char *uuid;
	const char *node;
} ZklockLiveId;

/* children that carry a live id's prefix but are not its node; sorts live */
extern int	zklock_find_ghosts(char *const *children, int n, ZklockLiveId *live,
							   int nlive, int *ghosts);

#endif							/* ZKLOCK_NAMES_H */
