/*-------------------------------------------------------------------------
 *
 * zklock.h
 *	  The limits of zklock: the sizes of its paths, node names, node data
 *	  and error messages, the most request slots, the bits of a
 *	  completion's tag, the path of the published waits; the monotonic
 *	  time every safety decision is made on; and the entry points the
 *	  module's entry (src/zklock.c) calls.  Any file of ours but the pure
 *	  cores (core/) may include it.
 *
 * What the processes share is declared by its own header, each for one
 * kind of reader: the shared-memory request table in common/shmem.h (with
 * the recipes' fields of a slot in common/recipe_fields.h), the settings
 * in common/settings.h, the session file in common/session_file.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_H
#define ZKLOCK_H

#include "postgres.h"

#include "core/names.h"

/* most entries of the shared request table (zklock.max_requests) */
#define ZKLOCK_MAX_REQUESTS_LIMIT	1000000

/*
 * A completion's opaque pointer carries an entry index (of the request
 * table, or of the pending-delete table, which has three entries per
 * request) in its low ZKLOCK_TAG_INDEX_BITS bits and the entry's 32-bit
 * serial above them.
 */
#define ZKLOCK_TAG_INDEX_BITS	24
#define ZKLOCK_TAG_INDEX_MASK	((UINT64CONST(1) << ZKLOCK_TAG_INDEX_BITS) - 1)
StaticAssertDecl(3 * ZKLOCK_MAX_REQUESTS_LIMIT <= ZKLOCK_TAG_INDEX_MASK,
				 "a pending-delete table index must fit the index bits of a tag");
StaticAssertDecl(sizeof(uintptr_t) * 8 >= ZKLOCK_TAG_INDEX_BITS + 32,
				 "a tag (index and serial) must fit a pointer");

/* longest namespace prefix (zklock.namespace) in bytes */
#define ZKLOCK_MAX_NAMESPACE_LEN	256
/* buffer for a full ZooKeeper path: namespace + user path + NUL */
#define ZKLOCK_FULL_PATH_SIZE	(ZKLOCK_MAX_NAMESPACE_LEN + ZKLOCK_MAX_PATH_LEN + 1)
/* buffer for a lock node's own name, e.g. _c_<uuid>-lock-0000000007 */
#define ZKLOCK_NODE_NAME_SIZE	80
/* buffer for the full path of a node: lock path, /leases, node name */
#define ZKLOCK_NODE_PATH_SIZE	(ZKLOCK_FULL_PATH_SIZE + 16 + ZKLOCK_NODE_NAME_SIZE)
/* buffer for the data written into a lock node (holder identity) */
#define ZKLOCK_NODE_DATA_SIZE	256
/*
 * buffer for an error message handed back by the worker: room for a
 * connection failure's reason (ZKLOCK_CONN_FAILURE_LEN) after "zookeeper
 * connection failed: ", so that SQL gets all of it (a refused GSSAPI
 * login's, with Kerberos' words, runs past 256 bytes)
 */
#define ZKLOCK_ERRMSG_SIZE		(ZKLOCK_CONN_FAILURE_LEN + 64)
/* buffer for the DETAIL of an error handed back by the worker */
#define ZKLOCK_ERRDETAIL_SIZE	1024

/*
 * The zklock-owned path below zklock.namespace where waits that lasted
 * deadlock_timeout are published for the detection across clusters
 * (worker/deadlock_records.c); no SQL path may be it or below it.
 */
#define ZKLOCK_WAITS_DIR		"/zklock-waits"

/*
 * the longest reason of a TLS or SASL failure kept
 * (worker/connection/secure.c)
 */
#define ZKLOCK_CONN_FAILURE_LEN 512

/*
 * A point in time on the monotonic clock that decides safety (the lease,
 * heartbeats, the COMMIT floor): microseconds of CLOCK_BOOTTIME, which NTP
 * and operators cannot step.  TimestampTz (the wall clock) is only for
 * display and for the user's own timeouts.
 */
typedef int64 ZklockMonoTime;

/* t plus ms milliseconds, on the monotonic clock */
#define ZKLOCK_MONO_PLUS_MS(t, ms)	((t) + (int64) (ms) * 1000)

/* worker/event_loop.c */
extern PGDLLEXPORT void zklock_worker_main(Datum main_arg);

/* backend/cancel_on_loss.c */
extern void zklock_loss_init(void);

/* backend/drop_guard.c */
extern void zklock_drop_guard_init(void);

#endif							/* ZKLOCK_H */
