/*-------------------------------------------------------------------------
 *
 * zklock_worker.c
 *	  The background worker that owns the cluster's ZooKeeper session and
 *	  runs the recipes for every backend.
 *
 * The worker is single-threaded.  It drives the single-threaded ZooKeeper
 * C client (libzookeeper_st) from a WaitEventSet that holds its latch and
 * the client's socket: zookeeper_interest() says which socket and timeout
 * to wait for, zookeeper_process() runs the completions and watchers of
 * the async calls in this same thread.  Only async calls are used, so any
 * number of requests are in flight at once, pipelined on one session.
 *
 * Each request slot of the shared table has a process-local WorkerReq
 * beside it.  Completions and watchers carry the slot index and the slot's
 * serial number (not a pointer), so a reply that arrives after the slot
 * was withdrawn and reused is recognised as stale and ignored (or, for a
 * create, its node is deleted).
 *
 * The mutex is Curator's InterProcessMutex: create
 * P/_c_<uuid>-lock-<seq> ephemeral-sequential, list P's children, hold
 * when first, otherwise getData+watch the predecessor and list again when
 * it fires.  Parents are created as containers only when a create fails
 * with NoNode, so an existing parent costs nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <zookeeper/zookeeper.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "zklock.h"

/* how often a request may find its parent missing before we give up */
#define MAX_NONODE_RETRIES	5
/* how often our own node may vanish under us before we give up */
#define MAX_LOST_RETRIES	10

/* Process-local state of one request slot */
typedef struct WorkerReq
{
	uint32		serial;			/* slot serial this belongs to, 0 = none */
	int			inflight;		/* async calls whose completion is due */
	bool		parked;			/* waits for the connection to come back */
	bool		recover;		/* on resume, look for our node by prefix */
	bool		create_sent;	/* a create of our node may have reached the
								 * server */
	bool		aux_create_sent;	/* same for a lease's P/locks node */
	bool		need_parents;	/* create the parents before the node */
	bool		watching;		/* a watch is armed; its event moves us on */
	bool		revoke_armed;	/* a revocable lock: the getData watch on our
								 * node is registered (or on its way) */
	int			skip_lists;		/* pipelined listings to ignore */
	bool		ready_seen;		/* double barrier: P/ready existed */
	int			nonode_retries;
	int			lost_retries;
	int64		count;			/* revoke: nodes written */
	char		adopt_name[ZKLOCK_NODE_NAME_SIZE];	/* node found by prefix,
													 * being checked */
	char		leave_watch[ZKLOCK_NODE_NAME_SIZE]; /* double barrier leave:
													 * member to watch once
													 * ours is deleted ("":
													 * none, we are done) */
	/* participants: the listing and the data, collected in order */
	char		pdir[ZKLOCK_NODE_PATH_SIZE];
	int			pkind;
	int			pn;
	int			pdone;
	char	  **pnames;
	char	  **pdata;
	int		   *plen;
} WorkerReq;

/*
 * Process-local state of an entry of the shared pending-delete table
 * (zklock_deletes): whether a call for it is on its way and when it may be
 * tried again.  It belongs to the entry's serial; a restarted worker
 * starts with none and so sends every entry again.
 */
typedef struct DeleteLocal
{
	uint32		serial;			/* entry serial this belongs to */
	bool		inflight;		/* a delete or listing is on its way */
	bool		logged;			/* a refusal by the server was logged */
	int			attempts;		/* refusals by the server so far */
	TimestampTz retry_at;		/* not before this time; 0: at once */
} DeleteLocal;

/* pauses between tries of a pending delete (ms) */
#define DELETE_RETRY_MIN_MS		100
#define DELETE_RETRY_BASE_MS	200
#define DELETE_RETRY_MAX_MS		10000

/* Where the lock engine works for a slot: the mutex-like part of a recipe */
typedef struct LockTarget
{
	char		base[ZKLOCK_NODE_PATH_SIZE];	/* parent of the lock nodes */
	char	   *node;			/* our node's name */
	char	   *uuid;			/* our protection id */
	const char *lock_name;		/* "lock-", "__READ__", "__WRIT__" */
	bool	   *create_sent;
} LockTarget;

static zhandle_t *zh = NULL;
static bool zk_connected = false;
static bool need_reconnect = false;
static bool rescan = true;		/* look at every slot on the next pass */
static WorkerReq *reqs = NULL;
static DeleteLocal *dlocal = NULL;	/* beside zklock_deletes */
static int	delete_hint = 0;	/* where to look for a free entry */
static bool deletes_scan = true;	/* send every due entry on the next pass */
static TimestampTz deletes_next_retry = 0;	/* earliest end of a back-off */

/*
 * The servers rejected zklock.auth: when that began (0: they did not), and
 * when the next handle may be opened.  Until a server accepts the
 * credentials again, zk_status() says auth_failed and requests fail.
 */
static TimestampTz auth_failed_at = 0;
static TimestampTz auth_retry_at = 0;
static uint32 handle_gen = 0;	/* bumped for every handle opened */

/* ms between two tries while the servers reject zklock.auth */
#define AUTH_RETRY_MS	Max(zklock_connect_timeout, 1000)
static char *connected_hosts = NULL;

static WaitEventSet *wes = NULL;
static int	wes_fd = -2;
static int	wes_interest = -1;
static int	wes_sock_pos = -1;
static bool wes_rebuild = true;

static const char REVOKE_MESSAGE[] = "__REVOKE__";

/*
 * Heartbeats keep the lease (ZklockShared.lease_until) fresh: a cheap
 * exists("/") every quarter of the negotiated session timeout.  The send
 * time of each one in flight is kept in a small ring; the completion's
 * data is its ticket (a counter), so a late or stale reply finds its own
 * send time or none.
 */
#define HEARTBEAT_RING	64
static TimestampTz hb_sent[HEARTBEAT_RING];
static uint32 hb_ticket[HEARTBEAT_RING];
static uint32 hb_next_ticket = 1;
static TimestampTz hb_last_sent = 0;

static void lk_create(int idx);
static void lk_list(int idx);
static void lease_create(int idx);
static void lease_list(int idx);
static void continue_request(int idx);
static void start_request(int idx);
static void barrier_remove_done(int rc, const void *data);

/*
 * Encode a slot index and serial into the opaque pointer that ZooKeeper
 * hands back to completions and watchers.
 */
static inline const void *
make_tag(int idx, uint32 serial)
{
	return (const void *) (uintptr_t) (((uint64) serial << 24) | (uint64) idx);
}

/*
 * Tag of the request now running in slot idx.
 */
static inline const void *
slot_tag(int idx)
{
	return make_tag(idx, zklock_shared->slots[idx].serial);
}

/*
 * Decode a tag.  Returns the slot index when the tag still names the
 * request running in that slot, -1 when it is stale.
 */
static int
tag_current(const void *tag)
{
	uint64		v = (uint64) (uintptr_t) tag;
	int			idx = (int) (v & 0xFFFFFF);
	uint32		serial = (uint32) (v >> 24);

	if (reqs == NULL || idx >= zklock_shared->nslots)
		return -1;
	if (reqs[idx].serial != serial || zklock_shared->slots[idx].serial != serial)
		return -1;
	return idx;
}

/*
 * Map a ZooKeeper result code to an SQLSTATE for errors handed to a
 * backend.
 */
static int
zk_rc_sqlstate(int rc)
{
	switch (rc)
	{
		case ZNOAUTH:
		case ZAUTHFAILED:
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		case ZCONNECTIONLOSS:
		case ZOPERATIONTIMEOUT:
		case ZSESSIONEXPIRED:
		case ZSESSIONMOVED:
		case ZCLOSING:
		case ZINVALIDSTATE:
			return ERRCODE_CONNECTION_FAILURE;
		case ZBADARGUMENTS:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case ZNOCHILDRENFOREPHEMERALS:
			return ERRCODE_WRONG_OBJECT_TYPE;
		case ZNOTEMPTY:
			return ERRCODE_OBJECT_IN_USE;
		default:
			return ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
	}
}

/*
 * True for the result codes after which the call may or may not have been
 * applied and should be tried again once the connection is back: the
 * connection was lost or timed out; the session moved to another server
 * (which drops this connection, and the client reconnects); the client
 * closed its socket after a send error or an out-of-order reply (the
 * 3.8 client reports that as a runtime inconsistency); the server
 * rejected zklock.auth on this connection and closed it (the session
 * watcher fails the waiting requests then).
 */
static bool
zk_rc_retryable(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
		rc == ZSESSIONMOVED || rc == ZRUNTIMEINCONSISTENCY ||
		rc == ZAUTHFAILED;
}

/*
 * True for the result codes with which the server refused a create: no
 * node was made.
 */
static bool
zk_rc_refused(int rc)
{
	switch (rc)
	{
		case ZNONODE:
		case ZNOAUTH:
		case ZNODEEXISTS:
		case ZINVALIDACL:
		case ZBADARGUMENTS:
		case ZNOCHILDRENFOREPHEMERALS:
			return true;
		default:
			return false;
	}
}

/*
 * True for the result codes that mean the session is ending; the session
 * watcher deals with every request then.
 */
static bool
zk_rc_session_gone(int rc)
{
	return rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE;
}

/*
 * What zk_status says while the worker is not connected: suspended while
 * it has a session to resume, expired from the loss of a session until the
 * next one is made, connecting before the first.  Caller holds the lock.
 */
static ZklockConnState
not_connected_state(void)
{
	if (zklock_shared->have_session)
		return ZKC_SUSPENDED;
	if (zklock_shared->expired_count > 0 || zklock_shared->lease_expired_count > 0)
		return ZKC_EXPIRED;
	return ZKC_CONNECTING;
}

/*
 * Free what a participants request collected so far.
 */
static void
free_participants(WorkerReq *req)
{
	int			i;

	if (req->pnames == NULL)
		return;
	for (i = 0; i < req->pn; i++)
	{
		if (req->pnames[i])
			pfree(req->pnames[i]);
		if (req->pdata[i])
			pfree(req->pdata[i]);
	}
	pfree(req->pnames);
	pfree(req->pdata);
	pfree(req->plen);
	req->pnames = NULL;
	req->pdata = NULL;
	req->plen = NULL;
	req->pn = 0;
}

/*
 * Forget the process-local state of a slot, freeing what it holds.
 */
static void
reset_req(int idx)
{
	WorkerReq  *req = &reqs[idx];

	free_participants(req);
	memset(req, 0, sizeof(*req));
}

static bool record_slot_deletes(int idx, bool can_wait);

/*
 * Forget the nodes of a slot whose deletes are recorded (or that went
 * with their session).  Caller holds the lock.
 */
static void
clear_slot_nodes(ZklockSlot *slot)
{
	slot->node[0] = '\0';
	slot->uuid[0] = '\0';
	slot->aux_node[0] = '\0';
	slot->aux_uuid[0] = '\0';
}

static void slot_fail(int idx, int sqlerrcode, const char *fmt,...) pg_attribute_printf(3, 4);

/*
 * End a request with an error for its backend.  Every node it created or
 * may have created is deleted first, in any phase of any recipe (Curator
 * deletes its node on any exception of its lock loop).  Caller holds the
 * lock.
 */
static void
slot_fail(int idx, int sqlerrcode, const char *fmt,...)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	va_list		ap;

	(void) record_slot_deletes(idx, false);
	clear_slot_nodes(slot);
	va_start(ap, fmt);
	vsnprintf(slot->errmsg, sizeof(slot->errmsg), fmt, ap);
	va_end(ap);
	slot->sqlerrcode = sqlerrcode;
	slot->result = ZKR_ERROR;
	slot->state = ZKS_DONE;
	reset_req(idx);
	zklock_wake_backend(slot);
}

/*
 * End a request that does not leave a lock behind, with a result value.
 * Caller holds the lock.
 */
static void
slot_finish(int idx, ZklockResult result, int64 value)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	slot->result = result;
	slot->result_value = value;
	slot->state = ZKS_DONE;
	reset_req(idx);
	zklock_wake_backend(slot);
}

/* ---------------------------------------------------------------------
 * Guaranteed deletes.  What must be deleted is recorded in the shared
 * pending-delete table (zklock_deletes, see ZklockDelete) in the same
 * critical section that frees or finishes the request slot that owned
 * the node, so a worker that dies at any step leaves it to the next one.
 * Every error but NoNode is tried again for as long as the session lasts,
 * like Curator's guaranteed delete.  The completions take the lock;
 * every other function here expects the caller to hold it.
 * ---------------------------------------------------------------------
 */

static void delete_done(int rc, const void *data);
static void delete_prefix_done(int rc, const struct String_vector *strings,
							   const void *data);

/*
 * The process-local state of entry i, reset when the entry was reused.
 */
static DeleteLocal *
delete_local(int i)
{
	DeleteLocal *dl = &dlocal[i];

	if (dl->serial != zklock_deletes[i].serial)
	{
		memset(dl, 0, sizeof(*dl));
		dl->serial = zklock_deletes[i].serial;
	}
	return dl;
}

/*
 * Decode the tag of a delete's completion: the entry index while the tag
 * still names the entry, -1 when it is stale.
 */
static int
delete_tag_current(const void *tag)
{
	uint64		v = (uint64) (uintptr_t) tag;
	int			i = (int) (v & 0xFFFFFF);
	uint32		serial = (uint32) (v >> 24);

	if (dlocal == NULL || serial == 0 || i >= zklock_shared->ndeletes ||
		zklock_deletes[i].serial != serial)
		return -1;
	return i;
}

/*
 * Free entry i: the node is gone (or went with its session).
 */
static void
delete_free(int i)
{
	ZklockShared *sh = zklock_shared;

	zklock_deletes[i].serial = 0;
	dlocal[i].serial = 0;
	sh->deletes_used--;
	if (sh->deletes_full_logged && sh->deletes_used <= sh->ndeletes / 2)
		sh->deletes_full_logged = false;
}

/*
 * Say that the table is full, once until it has emptied to half.
 */
static void
log_deletes_full(const char *consequence)
{
	ZklockShared *sh = zklock_shared;

	if (sh->deletes_full_logged)
		return;
	sh->deletes_full_logged = true;
	ereport(LOG,
			(errmsg("zklock: the table of pending zookeeper deletes is full"),
			 errdetail("%d of its %d entries (three per zklock.max_requests) hold nodes ZooKeeper has not confirmed deleted; %s.",
					   sh->deletes_used, sh->ndeletes, consequence),
			 errhint("Earlier \"could not delete\" messages name the nodes ZooKeeper refuses to delete; zk_status().deletes_pending counts the entries.")));
}

/*
 * Send entry i (a delete, or the listing of a delete by prefix) unless it
 * is on its way already or pausing after a refusal.
 */
static void
delete_send(int i, TimestampTz now)
{
	ZklockDelete *e = &zklock_deletes[i];
	DeleteLocal *dl = delete_local(i);
	const void *tag = make_tag(i, e->serial);
	int			rc;

	if (dl->inflight || zh == NULL || !zk_connected)
		return;
	if (dl->retry_at != 0 && now < dl->retry_at)
	{
		if (deletes_next_retry == 0 || dl->retry_at < deletes_next_retry)
			deletes_next_retry = dl->retry_at;
		return;
	}
	if (e->by_prefix)
		rc = zoo_aget_children(zh, e->path, 0, delete_prefix_done, tag);
	else
		rc = zoo_adelete(zh, e->path, -1, delete_done, tag);
	if (rc == ZOK)
		dl->inflight = true;
	else
	{
		/* the client took nothing (its connection is going): later */
		dl->retry_at = TimestampTzPlusMilliseconds(now, DELETE_RETRY_MIN_MS);
		deletes_scan = true;
	}
}

/*
 * Add an entry: the node at path (prefix NULL) or every child of path
 * named prefix...; a persistent node's entry survives the session, an
 * ephemeral node's belongs to session gen.  Sent at once when connected,
 * so it reaches the server ahead of anything asked after it.  Returns
 * false when the table is full (the node is then named in the log).
 */
static bool
delete_add(const char *path, const char *prefix, bool persistent, uint64 gen)
{
	ZklockShared *sh = zklock_shared;
	ZklockDelete *e;
	int			n = sh->ndeletes;
	int			i;
	int			j = -1;

	if (sh->deletes_used >= n)
	{
		log_deletes_full("nodes that must be deleted meanwhile are not recorded");
		ereport(LOG,
				(errmsg("zklock: could not record the delete of zookeeper node \"%s\": the table of pending deletes is full",
						path),
				 errdetail(persistent ?
						   "The node stays until it is deleted by hand." :
						   "The node stays until the zookeeper session ends.")));
		return false;
	}
	for (i = 0; i < n; i++)
	{
		j = (delete_hint + i) % n;
		if (zklock_deletes[j].serial == 0)
			break;
	}
	Assert(j >= 0 && zklock_deletes[j].serial == 0);
	delete_hint = j + 1;
	e = &zklock_deletes[j];
	if (++sh->delete_serial == 0)
		sh->delete_serial = 1;
	e->serial = sh->delete_serial;
	e->by_prefix = (prefix != NULL);
	e->persistent = persistent;
	e->session_gen = gen;
	strlcpy(e->prefix, prefix ? prefix : "", sizeof(e->prefix));
	strlcpy(e->path, path, sizeof(e->path));
	sh->deletes_used++;
	delete_send(j, GetCurrentTimestamp());
	return true;
}

/*
 * Delete an ephemeral node of the current session: by exact path, or
 * every child of path that starts with prefix (a node whose create reply
 * was lost).
 */
static void
queue_delete(const char *path, const char *prefix)
{
	(void) delete_add(path, prefix, false, zklock_shared->session_gen);
}

/*
 * The server (or the client) did not confirm entry i: try it again, as
 * soon as connected after connection trouble, with growing pauses after
 * a refusal (logged once per entry).
 */
static void
delete_retry(int i, int rc)
{
	ZklockDelete *e = &zklock_deletes[i];
	DeleteLocal *dl = delete_local(i);
	TimestampTz now = GetCurrentTimestamp();

	dl->inflight = false;
	deletes_scan = true;
	if (zk_rc_retryable(rc) || zk_rc_session_gone(rc))
	{
		dl->retry_at = TimestampTzPlusMilliseconds(now, DELETE_RETRY_MIN_MS);
		return;
	}
	dl->attempts++;
	dl->retry_at = TimestampTzPlusMilliseconds(now,
											   zklock_retry_delay_ms(dl->attempts,
																	 DELETE_RETRY_BASE_MS,
																	 DELETE_RETRY_MAX_MS));
	if (!dl->logged)
	{
		dl->logged = true;
		if (e->by_prefix)
			ereport(LOG,
					(errmsg("zklock: could not list zookeeper node \"%s\" to delete its children named \"%s\": %s",
							e->path, e->prefix, zerror(rc)),
					 errdetail("The delete is tried again, with growing pauses, for as long as the session lasts.")));
		else
			ereport(LOG,
					(errmsg("zklock: could not delete zookeeper node \"%s\": %s",
							e->path, zerror(rc)),
					 errdetail("The delete is tried again, with growing pauses, for as long as the session lasts.")));
	}
}

/*
 * Completion of a guaranteed delete: done on success or NoNode, tried
 * again on anything else.
 */
static void
delete_done(int rc, const void *data)
{
	int			i;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	i = delete_tag_current(data);
	if (i >= 0)
	{
		if (rc == ZOK || rc == ZNONODE)
			delete_free(i);
		else
			delete_retry(i, rc);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the child listing of a delete by prefix: the entry
 * becomes the delete of the first child that carries the prefix (a node
 * whose create reply was lost), with an entry of its own for any other;
 * none, or no parent: done.
 */
static void
delete_prefix_done(int rc, const struct String_vector *strings, const void *data)
{
	int			i;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	i = delete_tag_current(data);
	if (i >= 0 && rc == ZOK)
	{
		ZklockDelete *e = &zklock_deletes[i];
		DeleteLocal *dl = delete_local(i);
		char		parent[ZKLOCK_NODE_PATH_SIZE];
		char		prefix[ZKLOCK_PROTECTED_PREFIX_LEN + 1];
		size_t		plen;
		int			first = -1;
		int			k;

		strlcpy(parent, e->path, sizeof(parent));
		strlcpy(prefix, e->prefix, sizeof(prefix));
		plen = strlen(prefix);
		for (k = 0; k < strings->count; k++)
		{
			char		child[ZKLOCK_NODE_PATH_SIZE];

			if (strncmp(strings->data[k], prefix, plen) != 0)
				continue;
			if (first < 0)
			{
				first = k;
				continue;
			}
			snprintf(child, sizeof(child), "%s/%s", parent, strings->data[k]);
			(void) delete_add(child, NULL, e->persistent, e->session_gen);
		}
		if (first < 0)
			delete_free(i);
		else
		{
			snprintf(e->path, sizeof(e->path), "%s/%s", parent, strings->data[first]);
			e->by_prefix = false;
			e->prefix[0] = '\0';
			dl->inflight = false;
			dl->retry_at = 0;
			delete_send(i, GetCurrentTimestamp());
		}
	}
	else if (i >= 0 && rc == ZNONODE)
		delete_free(i);
	else if (i >= 0)
		delete_retry(i, rc);
	LWLockRelease(zklock_shared->lock);
}

/*
 * Send every entry that is due: after a reconnect, at the start of a
 * worker (which knows nothing of its predecessor's calls), after the pause
 * of a refused delete.  An entry of an ephemeral node of an earlier
 * session is dropped: that session's end removed the node.
 */
static void
send_deletes(void)
{
	ZklockShared *sh = zklock_shared;
	TimestampTz now = GetCurrentTimestamp();
	int			seen = 0;
	int			i;

	deletes_scan = false;
	deletes_next_retry = 0;
	for (i = 0; i < sh->ndeletes && seen < sh->deletes_used; i++)
	{
		ZklockDelete *e = &zklock_deletes[i];

		if (e->serial == 0)
			continue;
		if (!e->persistent && e->session_gen != sh->session_gen)
		{
			delete_free(i);
			continue;
		}
		seen++;
		delete_send(i, now);
	}
}

/*
 * Is a pass over the pending deletes due?
 */
static bool
deletes_due(TimestampTz now)
{
	return zk_connected && zklock_shared->deletes_used > 0 &&
		(deletes_scan || (deletes_next_retry != 0 && now >= deletes_next_retry));
}

/*
 * The session ended: the server removed its ephemeral nodes, so their
 * deletes are done.  The deletes of persistent nodes (P/ready) stay.
 */
static void
drop_session_deletes(void)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = 0; i < sh->ndeletes && sh->deletes_used > 0; i++)
	{
		if (zklock_deletes[i].serial != 0 && !zklock_deletes[i].persistent)
			delete_free(i);
	}
}

/*
 * Full path of a node of a slot: leases live under P/leases, everything
 * else directly under P.
 */
static void
node_path(ZklockSlot *slot, const char *name, char *buf, size_t len)
{
	if (slot->op == ZKOP_LEASE)
		snprintf(buf, len, "%s/leases/%s", slot->path, name);
	else
		snprintf(buf, len, "%s/%s", slot->path, name);
}

/*
 * ACL for every node zklock creates, parents included: ZooKeeper checks a
 * delete or create against the parent's ACL, so a creator-only lock node
 * under an open parent could still be deleted by anyone.  Curator peers
 * that share such a path authenticate with the same digest credentials.
 */
static struct ACL_vector *
node_acl(void)
{
	return zklock_acl == ZKLOCK_ACL_CREATOR ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
}

/*
 * Completion of a container create: nothing to do, the create queued right
 * behind it reports what matters.
 */
static void
container_done(int rc, const char *value, const void *data)
{
}

/*
 * Create every ancestor of path as a container node (and path itself when
 * include_self), the way Curator's creatingParentContainersIfNeeded does.
 * The calls are pipelined: the create queued right behind them finds its
 * parents in place, since one session's requests are applied in order.
 */
static void
create_containers(const char *path, bool include_self)
{
	char		parent[ZKLOCK_NODE_PATH_SIZE];
	char	   *p;

	strlcpy(parent, path, sizeof(parent));
	for (p = parent + 1;; p++)
	{
		if (*p == '/' || *p == '\0')
		{
			char		saved = *p;

			if (saved == '\0' && !include_self)
				break;
			*p = '\0';
			(void) zoo_acreate(zh, parent, "", 0, node_acl(),
							   ZOO_CONTAINER, container_done, NULL);
			*p = saved;
			if (saved == '\0')
				break;
		}
	}
}


/*
 * A fresh protection id.
 */
static bool
new_uuid(char *out)
{
	unsigned char bytes[16];

	if (!pg_strong_random(bytes, sizeof(bytes)))
		return false;
	zklock_format_uuid(bytes, out);
	return true;
}

/*
 * Record the deletes of every node the request in slot idx created or may
 * have created (zklock_cleanup_plan decides, from the slot alone), before
 * the slot is freed or finished.  Nodes of an earlier session went with
 * it.  A caller that can wait (a withdrawal, whose slot keeps the intent
 * meanwhile) gets false when the table lacks room and must come back; a
 * caller that cannot wait takes what room is left.  Caller holds the
 * lock.
 */
static bool
record_slot_deletes(int idx, bool can_wait)
{
	ZklockShared *sh = zklock_shared;
	ZklockSlot *slot = &sh->slots[idx];
	ZklockCleanupInput in;
	ZklockCleanupStep steps[ZKLOCK_MAX_CLEANUP_STEPS];
	int			n;
	int			k;

	if (!sh->have_session || slot->session_gen != sh->session_gen)
		return true;
	in.lease = (slot->op == ZKOP_LEASE);
	in.protected_names = (slot->op != ZKOP_DBARRIER_ENTER &&
						  slot->op != ZKOP_DBARRIER_LEAVE);
	in.node = slot->node;
	in.uuid = slot->uuid;
	in.node_deleted = slot->node_deleted;
	in.aux_node = slot->aux_node;
	in.aux_uuid = slot->aux_uuid;
	n = zklock_cleanup_plan(&in, steps);
	if (can_wait &&
		!zklock_delete_may_add(sh->deletes_used, sh->ndeletes, n, true, sh->nslots))
	{
		log_deletes_full("releases and withdrawn waits keep their request slot until there is room");
		return false;
	}
	for (k = 0; k < n; k++)
	{
		char		parent[ZKLOCK_NODE_PATH_SIZE];
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		switch (steps[k].parent)
		{
			case ZKLOCK_CLEANUP_IN_LEASES:
				snprintf(parent, sizeof(parent), "%s/leases", slot->path);
				break;
			case ZKLOCK_CLEANUP_IN_LOCKS:
				snprintf(parent, sizeof(parent), "%s/locks", slot->path);
				break;
			default:
				strlcpy(parent, slot->path, sizeof(parent));
				break;
		}
		if (steps[k].by_prefix)
			queue_delete(parent, steps[k].prefix);
		else
		{
			snprintf(buf, sizeof(buf), "%s/%s", parent, steps[k].name);
			queue_delete(buf, NULL);
		}
	}
	return true;
}

/*
 * Withdraw a cancelled or released request: record the deletes of its
 * nodes (by name, or by prefix when a create's reply never came) and free
 * the slot.  Calls still in flight find the slot's serial changed.  When
 * the pending-delete table has no room the slot stays as it is (the
 * intent lives in it) and the next full pass comes back to it.  Caller
 * holds the lock.
 */
static void
withdraw(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (!record_slot_deletes(idx, true))
	{
		rescan = true;
		return;
	}
	reset_req(idx);
	slot->state = ZKS_FREE;
	clear_slot_nodes(slot);
}

/*
 * Hand the lock (lease, membership) to the backend.  Caller holds the
 * lock.
 */
static void
grant(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	reqs[idx].watching = false;
	slot->state = ZKS_HELD;
	slot->since = GetCurrentTimestamp();
	zklock_wake_backend(slot);
}

/*
 * Stop working on a request until the connection is back.  With recover,
 * the resumed request first looks for the node it may have created.
 */
static void
park(int idx, bool recover)
{
	reqs[idx].parked = true;
	reqs[idx].watching = false;
	rescan = true;
	if (recover)
		reqs[idx].recover = true;
}

/*
 * After any completion: if the backend gave up meanwhile, withdraw now
 * (as run_requests would: replies still in flight find the slot's serial
 * changed).  Returns true when the request is no longer active (the
 * caller must stop).
 */
static bool
settle_cancel(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->state == ZKS_ACTIVE)
		return false;
	if (slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE)
		withdraw(idx);
	return true;
}

/*
 * Common start of a request's completion: take the lock, find the request
 * the reply belongs to, count the reply in, and stop if the backend gave
 * up meanwhile.  Returns the slot index when the request carries on, -1
 * otherwise; the caller releases the lock either way.
 */
static int
completion_begin(const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx < 0)
		return -1;
	reqs[idx].inflight--;
	if (settle_cancel(idx))
		return -1;
	return idx;
}

/*
 * A create found a parent missing: have the parents created (as
 * containers) before the next try, or fail the request once a parent has
 * vanished MAX_NONODE_RETRIES times.  Returns true when the caller should
 * send its create again.
 */
static bool
retry_with_parents(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];

	if (++req->nonode_retries > MAX_NONODE_RETRIES)
	{
		slot_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
				  "could not create the parents of zookeeper path \"%s\"",
				  slot->path + slot->user_path_off);
		return false;
	}
	req->need_parents = true;
	return true;
}

/*
 * Common handling of a failed call of a request: park on connection
 * trouble, leave session ends to the session watcher, fail otherwise.
 */
static void
call_failed(int idx, int rc, const char *what)
{
	if (zk_rc_retryable(rc))
		park(idx, true);
	else if (!zk_rc_session_gone(rc))
		slot_fail(idx, zk_rc_sqlstate(rc), "could not %s \"%s\": %s", what,
				  zklock_shared->slots[idx].path + zklock_shared->slots[idx].user_path_off,
				  zerror(rc));
}

/*
 * Watcher of every recipe: the node we wait on changed; look again.
 */
static void
step_watcher(zhandle_t *zzh, int type, int state, const char *path, void *ctx)
{
	int			idx;

	if (type == ZOO_SESSION_EVENT)
		return;					/* the session watcher handles those */

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(ctx);
	if (idx >= 0 && reqs[idx].watching && reqs[idx].inflight == 0 &&
		zklock_shared->slots[idx].state == ZKS_ACTIVE)
	{
		reqs[idx].watching = false;
		continue_request(idx);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Ask for the children of path for a request (with the request's watch
 * when watch), or park the request when that cannot be sent now.  With
 * recover, the resumed request looks for its node by prefix first.
 * Caller holds the lock.
 */
static void
send_listing(int idx, const char *path, strings_completion_t done, bool watch,
			 bool recover)
{
	int			rc;

	if (!zk_connected)
	{
		park(idx, recover);
		return;
	}
	if (watch)
		rc = zoo_awget_children(zh, path, step_watcher, (void *) slot_tag(idx),
								done, slot_tag(idx));
	else
		rc = zoo_aget_children(zh, path, 0, done, slot_tag(idx));
	if (rc != ZOK)
		park(idx, recover);
	else
		reqs[idx].inflight++;
}

/*
 * exists() with the request's watch on path; parks the request when that
 * cannot be sent now.  Returns true when the call is on its way.  Caller
 * holds the lock.
 */
static bool
send_exists_watch(int idx, const char *path, stat_completion_t done, bool recover)
{
	if (!zk_connected ||
		zoo_awexists(zh, path, step_watcher, (void *) slot_tag(idx),
					 done, slot_tag(idx)) != ZOK)
	{
		park(idx, recover);
		return false;
	}
	reqs[idx].inflight++;
	return true;
}

/* ---------------------------------------------------------------------
 * Revocation: a revocable node is watched with getData; its data
 * becoming "__REVOKE__" asks the holder to let go.
 * ---------------------------------------------------------------------
 */

static void revoke_watch(int idx);

/*
 * Completion of getData on our own revocable node.
 */
static void
revoke_data_done(int rc, const char *value, int value_len,
				 const struct Stat *stat, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx >= 0 && rc != ZOK)
	{
		/*
		 * No watch was registered.  The node gone means the lock is gone;
		 * otherwise arm again on the next full pass once connected.
		 */
		reqs[idx].revoke_armed = false;
		if (rc != ZNONODE && zk_rc_retryable(rc))
			rescan = true;
		else if (rc != ZNONODE)
			ereport(LOG,
					(errmsg("zklock: cannot watch lock node of \"%s\" for revocation: %s",
							zklock_shared->slots[idx].path, zerror(rc))));
	}
	if (idx >= 0 && rc == ZOK && value != NULL &&
		value_len == (int) strlen(REVOKE_MESSAGE) &&
		memcmp(value, REVOKE_MESSAGE, value_len) == 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];

		if (!slot->revoke_requested)
		{
			slot->revoke_requested = true;
			zklock_wake_backend(slot);
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Watcher on our own revocable node: its data changed, read it again.
 */
static void
revoke_watcher(zhandle_t *zzh, int type, int state, const char *path, void *ctx)
{
	int			idx;

	if (type != ZOO_CHANGED_EVENT)
		return;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(ctx);
	if (idx >= 0)
	{
		ZklockSlotState st = zklock_shared->slots[idx].state;

		if (st == ZKS_ACTIVE || st == ZKS_HELD)
			revoke_watch(idx);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Arm the revocation watch on our node.  Caller holds the lock.
 */
static void
revoke_watch(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	node_path(slot, slot->node, buf, sizeof(buf));
	reqs[idx].revoke_armed =
		zoo_awget(zh, buf, revoke_watcher, (void *) slot_tag(idx),
				  revoke_data_done, slot_tag(idx)) == ZOK;
}

/* ---------------------------------------------------------------------
 * The lock engine: Curator's LockInternals for the mutex, both sides of
 * the read/write lock and the P/locks mutex of a lease.
 * ---------------------------------------------------------------------
 */

/*
 * Where the lock engine works for a slot.
 */
static void
lock_target(int idx, LockTarget *t)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->op == ZKOP_LEASE)
	{
		snprintf(t->base, sizeof(t->base), "%s/locks", slot->path);
		t->node = slot->aux_node;
		t->uuid = slot->aux_uuid;
		t->lock_name = ZKLOCK_LOCK_NAME;
		t->create_sent = &reqs[idx].aux_create_sent;
	}
	else
	{
		strlcpy(t->base, slot->path, sizeof(t->base));
		t->node = slot->node;
		t->uuid = slot->uuid;
		t->lock_name = slot->op == ZKOP_READ ? ZKLOCK_READ_LOCK_NAME :
			slot->op == ZKOP_WRITE ? ZKLOCK_WRITE_LOCK_NAME : ZKLOCK_LOCK_NAME;
		t->create_sent = &reqs[idx].create_sent;
	}
}

/*
 * The lock engine got the lock: a lease goes on to its second step,
 * everything else is granted.
 */
static void
lk_granted(int idx)
{
	if (zklock_shared->slots[idx].op == ZKOP_LEASE)
		lease_create(idx);
	else
		grant(idx);
}

/*
 * A try found the lock taken: delete what we made, report not granted.
 */
static void
give_up_try(int idx)
{
	(void) record_slot_deletes(idx, false);
	clear_slot_nodes(&zklock_shared->slots[idx]);
	slot_finish(idx, ZKR_NOT_GRANTED, 0);
}

/*
 * Completion of the create of a lock node.
 */
static void
lk_create_done(int rc, const char *value, const struct Stat *stat, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx < 0)
	{
		/* the request is gone: a node created for it must not linger */
		if (rc == ZOK && value != NULL)
			queue_delete(value, NULL);
	}
	else
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &reqs[idx];
		LockTarget	t;

		lock_target(idx, &t);
		req->inflight--;
		if (rc == ZNODEEXISTS && slot->downgrade_seq[0] != '\0')
		{
			/* our own earlier create whose reply was lost */
			*t.create_sent = false;
			if (!settle_cancel(idx))
				grant(idx);
		}
		else if (rc == ZOK)
		{
			const char *base = strrchr(value, '/');

			strlcpy(t.node, base ? base + 1 : value, ZKLOCK_NODE_NAME_SIZE);
			*t.create_sent = false;
			req->nonode_retries = 0;
			if (slot->op != ZKOP_LEASE)
				slot->czxid = stat ? stat->czxid : 0;
			if (slot->revocable && slot->op != ZKOP_LEASE &&
				slot->state == ZKS_ACTIVE)
				revoke_watch(idx);
			if (!settle_cancel(idx) && slot->downgrade_seq[0] != '\0')
				grant(idx);
			/* otherwise the pipelined listing decides */
		}
		else
		{
			*t.create_sent = (rc != ZNONODE && zk_rc_retryable(rc));
			if (zk_rc_refused(rc) && slot->downgrade_seq[0] == '\0')
			{
				/*
				 * No node carries this id (a create with it whose outcome
				 * was unknown was looked for before this one was sent): a
				 * retry takes a fresh one, and a failure has nothing to
				 * look for.
				 */
				t.uuid[0] = '\0';
			}
			if (slot->downgrade_seq[0] == '\0')
				req->skip_lists++;	/* its listing fails the same way */
			if (settle_cancel(idx))
				;
			else if (rc == ZNONODE && slot->downgrade_seq[0] == '\0')
			{
				if (retry_with_parents(idx))
					lk_create(idx);
			}
			else
				call_failed(idx, rc, "create a lock node for");
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Send the create of our lock node (preceded by container creates of the
 * parents when the last attempt found one missing) and, right behind it,
 * the listing of the lock's children: the session applies them in order,
 * so the listing already contains our node and the acquire costs one
 * round trip.  Caller holds the lock.
 */
static void
lk_create(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	LockTarget	t;
	char		name[ZKLOCK_NODE_PATH_SIZE];
	const char *data = slot->revocable ? "" : slot->data;
	int			mode = ZOO_EPHEMERAL_SEQUENTIAL;
	int			rc;

	if (!zk_connected)
	{
		park(idx, false);
		return;
	}
	lock_target(idx, &t);
	if (t.uuid[0] == '\0' && !new_uuid(t.uuid))
	{
		slot_fail(idx, ERRCODE_INTERNAL_ERROR, "could not generate a random lock id");
		return;
	}
	if (req->need_parents)
	{
		create_containers(t.base, true);
		req->need_parents = false;
	}

	snprintf(name, sizeof(name), "%s/", t.base);
	zklock_protected_name(t.uuid, t.lock_name, name + strlen(name),
						  sizeof(name) - strlen(name));
	if (slot->downgrade_seq[0] != '\0')
	{
		/* a write holder's read lock sorts at the writer's place */
		strlcat(name, slot->downgrade_seq, sizeof(name));
		strlcpy(slot->node, strrchr(name, '/') + 1, sizeof(slot->node));
		mode = ZOO_EPHEMERAL;
	}
	rc = zoo_acreate2(zh, name, data, strlen(data), node_acl(), mode,
					  lk_create_done, slot_tag(idx));
	if (rc != ZOK)
	{
		park(idx, false);
		return;
	}
	slot->session_gen = zklock_shared->session_gen;
	req->inflight++;
	*t.create_sent = true;
	if (slot->downgrade_seq[0] == '\0')
		lk_list(idx);
}

/*
 * Start a fresh attempt of the lock engine: forget the old node.
 */
static void
lk_start_fresh(int idx)
{
	LockTarget	t;

	lock_target(idx, &t);
	t.node[0] = '\0';
	t.uuid[0] = '\0';
	lk_create(idx);
}

/*
 * Completion of getData+watch on the predecessor.
 */
static void
lk_watch_done(int rc, const char *value, int value_len, const struct Stat *stat,
			  const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			reqs[idx].watching = true;
		else if (rc == ZNONODE)
			lk_list(idx);		/* predecessor already gone */
		else
			call_failed(idx, rc, "watch the zookeeper lock");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the stat of a node found by its protection prefix after a
 * lost create reply.  It is adopted only when the current session owns it
 * (an ephemeral node of an earlier session is deleted, never adopted, as
 * CURATOR-498 requires); adopting it also gives us its czxid, the fencing
 * token.  Then the request carries on with a fresh listing.
 */
static void
adopt_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &reqs[idx];
		const clientid_t *cid = zh ? zoo_client_id(zh) : NULL;
		bool		lease_phase = (slot->op == ZKOP_LEASE && slot->phase == ZKP_LEASE);
		LockTarget	t;

		lock_target(idx, &t);
		if (rc == ZOK && stat != NULL && cid != NULL &&
				 stat->ephemeralOwner == cid->client_id)
		{
			if (lease_phase)
			{
				strlcpy(slot->node, req->adopt_name, sizeof(slot->node));
				req->create_sent = false;
				slot->czxid = stat->czxid;
				lease_list(idx);
			}
			else
			{
				strlcpy(t.node, req->adopt_name, ZKLOCK_NODE_NAME_SIZE);
				*t.create_sent = false;
				if (slot->op != ZKOP_LEASE)
					slot->czxid = stat->czxid;
				if (slot->revocable && slot->op != ZKOP_LEASE)
					revoke_watch(idx);
				lk_list(idx);
			}
		}
		else if (rc == ZOK || rc == ZNONODE)
		{
			/* not ours after all (or gone): delete it if it is there, start over */
			char		buf[ZKLOCK_NODE_PATH_SIZE];

			if (rc == ZOK)
			{
				if (lease_phase)
					snprintf(buf, sizeof(buf), "%s/leases/%s", slot->path, req->adopt_name);
				else
					snprintf(buf, sizeof(buf), "%s/%s", t.base, req->adopt_name);
				queue_delete(buf, NULL);
			}
			if (lease_phase)
			{
				slot->node[0] = '\0';
				slot->uuid[0] = '\0';
				lease_create(idx);
			}
			else
				lk_start_fresh(idx);
		}
		else
			call_failed(idx, rc, "check the recovered node of");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Stat a node found by its protection prefix before adopting it.  Caller
 * holds the lock.
 */
static void
adopt_check(int idx, const char *base, const char *name)
{
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	strlcpy(reqs[idx].adopt_name, name, sizeof(reqs[idx].adopt_name));
	snprintf(buf, sizeof(buf), "%s/%s", base, name);
	if (zoo_aexists(zh, buf, 0, adopt_stat_done, slot_tag(idx)) != ZOK)
		park(idx, true);
	else
		reqs[idx].inflight++;
}

/*
 * Decide from the lock's children: hold, wait behind the predecessor (or
 * the lowest writer, for a reader), or recreate a lost node.  Caller holds
 * the lock.
 */
static void
lk_decide(int idx, char **children, int n)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	LockTarget	t;
	ZklockLockDecision d;

	lock_target(idx, &t);
	if (t.node[0] == '\0')
	{
		/* resumed after a lost create reply: find our node by its prefix */
		char		prefix[ZKLOCK_NODE_NAME_SIZE];
		int			found;

		zklock_protected_prefix(t.uuid, prefix);
		found = zklock_find_protected(children, n, prefix);
		if (found < 0)
		{
			lk_create(idx);
			return;
		}
		/* check whose it is and learn its czxid before adopting it */
		adopt_check(idx, t.base, children[found]);
		return;
	}

	if (slot->op == ZKOP_READ || slot->op == ZKOP_WRITE)
		zklock_rw_sort_children(children, n);
	else
		zklock_sort_children(children, n, ZKLOCK_LOCK_NAME);
	if (slot->op == ZKOP_READ)
		d = zklock_read_decide(children, n, t.node);
	else
		d = zklock_lock_decide(children, n, t.node, 1);

	if (d.lost)
	{
		if (++req->lost_retries > MAX_LOST_RETRIES)
			slot_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
					  "zookeeper lock node under \"%s\" keeps disappearing",
					  slot->path + slot->user_path_off);
		else
			lk_start_fresh(idx);
	}
	else if (d.holds)
		lk_granted(idx);
	else if (slot->try_only)
		give_up_try(idx);
	else
	{
		char		wpath[ZKLOCK_NODE_PATH_SIZE];
		int			rc;

		snprintf(wpath, sizeof(wpath), "%s/%s", t.base, children[d.watch_index]);
		rc = zoo_awget(zh, wpath, step_watcher, (void *) slot_tag(idx),
					   lk_watch_done, slot_tag(idx));
		if (rc != ZOK)
			park(idx, false);
		else
			req->inflight++;
	}
}

/*
 * Completion of the child listing of a lock.
 */
static void
lk_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx >= 0)
	{
		WorkerReq  *req = &reqs[idx];

		req->inflight--;
		if (req->skip_lists > 0)
		{
			/* listing pipelined behind a create that failed */
			req->skip_lists--;
			(void) settle_cancel(idx);
		}
		else if (settle_cancel(idx))
			;
		else if (rc == ZOK)
		{
			char	  **children;
			int			n = strings->count;

			/* sort a copy of the pointers; the client frees the strings */
			children = palloc(sizeof(char *) * Max(n, 1));
			memcpy(children, strings->data, sizeof(char *) * n);
			lk_decide(idx, children, n);
			pfree(children);
		}
		else if (rc == ZNONODE)
		{
			/* the parent is gone, and our node with it */
			req->need_parents = true;
			lk_start_fresh(idx);
		}
		else
			call_failed(idx, rc, "list the zookeeper lock");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Ask for the children of the lock.  Caller holds the lock.
 */
static void
lk_list(int idx)
{
	LockTarget	t;

	lock_target(idx, &t);
	send_listing(idx, t.base, lk_children_done, false, false);
}

/* ---------------------------------------------------------------------
 * Lease (InterProcessSemaphoreV2): with the P/locks mutex held, create
 * P/leases/_c_<uuid>-lease-<seq>, wait until at most max_leases leases
 * exist, then release P/locks.
 * ---------------------------------------------------------------------
 */

/*
 * Completion of the create of a lease node.
 */
static void
lease_create_done(int rc, const char *value, const struct Stat *stat, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx < 0)
	{
		if (rc == ZOK && value != NULL)
			queue_delete(value, NULL);
	}
	else
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &reqs[idx];

		req->inflight--;
		if (rc == ZOK)
		{
			const char *base = strrchr(value, '/');

			strlcpy(slot->node, base ? base + 1 : value, sizeof(slot->node));
			slot->czxid = stat ? stat->czxid : 0;
			req->create_sent = false;
			req->nonode_retries = 0;
			(void) settle_cancel(idx);
		}
		else
		{
			req->create_sent = zk_rc_retryable(rc);
			if (zk_rc_refused(rc))
				slot->uuid[0] = '\0';	/* no lease node has this id */
			req->skip_lists++;
			if (settle_cancel(idx))
				;
			else if (rc == ZNONODE)
			{
				if (retry_with_parents(idx))
					lease_create(idx);
			}
			else
				call_failed(idx, rc, "create a lease node for");
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Create our lease node, with the pipelined watched listing of the leases
 * behind it.  Caller holds the lock.
 */
static void
lease_create(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	char		name[ZKLOCK_NODE_PATH_SIZE];
	int			rc;

	slot->phase = ZKP_LEASE;
	if (!zk_connected)
	{
		park(idx, false);
		return;
	}
	if (slot->uuid[0] == '\0' && !new_uuid(slot->uuid))
	{
		slot_fail(idx, ERRCODE_INTERNAL_ERROR, "could not generate a random lease id");
		return;
	}
	snprintf(name, sizeof(name), "%s/leases", slot->path);
	if (req->need_parents)
	{
		create_containers(name, true);
		req->need_parents = false;
	}
	strlcat(name, "/", sizeof(name));
	zklock_protected_name(slot->uuid, ZKLOCK_LEASE_NAME, name + strlen(name),
						  sizeof(name) - strlen(name));
	rc = zoo_acreate2(zh, name, slot->data, strlen(slot->data),
					  node_acl(), ZOO_EPHEMERAL_SEQUENTIAL,
					  lease_create_done, slot_tag(idx));
	if (rc != ZOK)
	{
		park(idx, false);
		return;
	}
	slot->session_gen = zklock_shared->session_gen;
	req->inflight++;
	req->create_sent = true;
	lease_list(idx);
}

/*
 * Completion of the watched listing of P/leases.
 */
static void
lease_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &reqs[idx];

		req->inflight--;
		if (req->skip_lists > 0)
		{
			req->skip_lists--;
			(void) settle_cancel(idx);
		}
		else if (settle_cancel(idx))
			;
		else if (rc == ZOK)
		{
			int			found = -1;

			if (slot->node[0] == '\0')
			{
				char		prefix[ZKLOCK_NODE_NAME_SIZE];

				zklock_protected_prefix(slot->uuid, prefix);
				found = zklock_find_protected(strings->data, strings->count, prefix);
				if (found >= 0)
				{
					char		base[ZKLOCK_NODE_PATH_SIZE];

					snprintf(base, sizeof(base), "%s/leases", slot->path);
					adopt_check(idx, base, strings->data[found]);
					LWLockRelease(zklock_shared->lock);
					return;
				}
			}
			else
				found = zklock_find_child(strings->data, strings->count, slot->node);

			if (found < 0)
			{
				/* our lease vanished (or never came): make a new one */
				if (++req->lost_retries > MAX_LOST_RETRIES)
					slot_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
							  "zookeeper lease node under \"%s\" keeps disappearing",
							  slot->path + slot->user_path_off);
				else
				{
					slot->node[0] = '\0';
					slot->uuid[0] = '\0';
					lease_create(idx);
				}
			}
			else if (strings->count <= slot->max_leases)
			{
				/* granted: let the next acquirer have P/locks */
				char		buf[ZKLOCK_NODE_PATH_SIZE];

				snprintf(buf, sizeof(buf), "%s/locks/%s", slot->path, slot->aux_node);
				queue_delete(buf, NULL);
				slot->aux_node[0] = '\0';
				slot->aux_uuid[0] = '\0';
				grant(idx);
			}
			else if (slot->try_only)
				give_up_try(idx);
			else
				req->watching = true;
		}
		else if (rc == ZNONODE)
		{
			/* P/leases went away with our node: start the lease again */
			req->need_parents = true;
			slot->node[0] = '\0';
			slot->uuid[0] = '\0';
			lease_create(idx);
		}
		else
			call_failed(idx, rc, "list the leases of");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * List P/leases with a watch.  Caller holds the lock.
 */
static void
lease_list(int idx)
{
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	snprintf(buf, sizeof(buf), "%s/leases", zklock_shared->slots[idx].path);
	send_listing(idx, buf, lease_children_done, true, false);
}

/* ---------------------------------------------------------------------
 * Barrier (DistributedBarrier): the barrier is up while node P exists.
 * ---------------------------------------------------------------------
 */

/*
 * Completion of the create of a barrier node.
 */
static void
barrier_set_done(int rc, const char *value, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			slot_finish(idx, ZKR_OK, 1);
		else if (rc == ZNODEEXISTS)
			slot_finish(idx, ZKR_OK, 0);
		else if (rc == ZNONODE)
		{
			if (retry_with_parents(idx))
				start_request(idx);
		}
		else
			call_failed(idx, rc, "set the barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the exists that comes before removing a barrier: an
 * ephemeral node belongs to a client session (a lock, a lease, a member)
 * and is never a barrier; anything else is deleted at the version seen,
 * so a node replaced in between is looked at again.
 */
static void
barrier_remove_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];

		if (rc == ZNONODE)
			slot_finish(idx, ZKR_OK, 0);
		else if (rc != ZOK)
			call_failed(idx, rc, "look at the barrier");
		else if (stat->ephemeralOwner != 0)
			slot_fail(idx, ERRCODE_WRONG_OBJECT_TYPE,
					  "zookeeper node \"%s\" is ephemeral and not a barrier",
					  slot->path + slot->user_path_off);
		else
		{
			rc = zoo_adelete(zh, slot->path, stat->version, barrier_remove_done,
							 slot_tag(idx));
			if (rc != ZOK)
				park(idx, false);	/* not connected: start over later */
			else
				reqs[idx].inflight++;
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the delete of a barrier node.
 */
static void
barrier_remove_done(int rc, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			slot_finish(idx, ZKR_OK, 1);
		else if (rc == ZNONODE)
			slot_finish(idx, ZKR_OK, 0);
		else if (rc == ZBADVERSION)
			start_request(idx); /* changed since we looked: look again */
		else if (rc == ZNOTEMPTY)
			slot_fail(idx, ERRCODE_OBJECT_IN_USE,
					  "zookeeper node \"%s\" has children and is not a barrier",
					  zklock_shared->slots[idx].path + zklock_shared->slots[idx].user_path_off);
		else
			call_failed(idx, rc, "remove the barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of a commit confirmation (zklock.commit_confirm): the held
 * node must exist and be an ephemeral node of the session we have now.
 * The answer itself also proves the session alive: it extends nothing
 * here, the backend checks the lease after it.
 */
static void
confirm_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		const clientid_t *cid = zh ? zoo_client_id(zh) : NULL;

		if (rc == ZOK)
			slot_finish(idx, ZKR_OK,
						(cid != NULL && stat->ephemeralOwner == cid->client_id) ? 1 : 0);
		else if (rc == ZNONODE)
			slot_finish(idx, ZKR_OK, 0);
		else
			call_failed(idx, rc, "confirm the lock");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of exists+watch on a barrier node.
 */
static void
barrier_wait_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZNONODE)
			slot_finish(idx, ZKR_OK, 1);
		else if (rc == ZOK && zklock_shared->slots[idx].try_only)
			slot_finish(idx, ZKR_OK, 0);	/* a look only: still up */
		else if (rc == ZOK)
			reqs[idx].watching = true;
		else
			call_failed(idx, rc, "wait on the barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/* ---------------------------------------------------------------------
 * Double barrier (DistributedDoubleBarrier): members P/<uuid>, P/ready.
 * ---------------------------------------------------------------------
 */

static void denter_list(int idx);
static void leave_list(int idx);

/*
 * Completion of exists+watch on P/ready while entering.
 */
static void
denter_ready_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		WorkerReq  *req = &reqs[idx];
		ZklockSlot *slot = &zklock_shared->slots[idx];

		if (rc == ZOK)
		{
			req->ready_seen = true;
			if (req->inflight == 0 && !req->create_sent)
				grant(idx);		/* member node made, barrier ready */
		}
		else if (rc == ZNONODE)
		{
			req->ready_seen = false;
			/* while waiting for P/ready its absence changes nothing */
			if (!req->watching && req->inflight == 0 && !req->create_sent &&
				slot->node[0] != '\0')
				denter_list(idx);
		}
		else
			call_failed(idx, rc, "watch the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Look at P/ready, with a watch that fires when it is created.  Caller
 * holds the lock.
 */
static bool
denter_watch_ready(int idx)
{
	char		ready[ZKLOCK_NODE_PATH_SIZE];

	snprintf(ready, sizeof(ready), "%s/%s", zklock_shared->slots[idx].path,
			 ZKLOCK_READY_NODE);
	return send_exists_watch(idx, ready, denter_ready_done, true);
}

/*
 * Completion of the create of our member node.
 */
static void
denter_create_done(int rc, const char *value, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx >= 0)
	{
		WorkerReq  *req = &reqs[idx];

		req->inflight--;
		if (rc == ZOK || rc == ZNODEEXISTS)
			req->create_sent = false;
		else if (zk_rc_refused(rc))
		{
			/* no member node was made: a retry takes a fresh id */
			ZklockSlot *slot = &zklock_shared->slots[idx];

			req->create_sent = false;
			slot->node[0] = '\0';
			slot->uuid[0] = '\0';
		}
		if (settle_cancel(idx))
			;
		else if (rc == ZOK || rc == ZNODEEXISTS)
		{
			if (req->inflight == 0)
			{
				if (req->ready_seen)
					grant(idx);
				else
					denter_list(idx);
			}
		}
		else if (rc == ZNONODE)
		{
			if (retry_with_parents(idx))
				start_request(idx);
		}
		else
			call_failed(idx, rc, "enter the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the create of P/ready: the barrier is open.
 */
static void
denter_ready_created(int rc, const char *value, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK || rc == ZNODEEXISTS)
			grant(idx);
		else
			call_failed(idx, rc, "open the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the listing of P while entering: open the barrier when
 * enough members are in, otherwise wait for P/ready.
 */
static void
denter_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &reqs[idx];

		if (rc == ZOK)
		{
			if (strings->count >= slot->member_qty)
			{
				char		ready[ZKLOCK_NODE_PATH_SIZE];
				int			zrc;

				snprintf(ready, sizeof(ready), "%s/%s", slot->path, ZKLOCK_READY_NODE);
				zrc = zoo_acreate(zh, ready, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0,
								  denter_ready_created, slot_tag(idx));
				if (zrc != ZOK)
					park(idx, true);
				else
					req->inflight++;
			}
			else if (slot->try_only)
				give_up_try(idx);	/* a look only: too few members */
			else if (denter_watch_ready(idx))
			{
				/* wait for P/ready (its watch re-armed, in case it fired) */
				req->watching = true;
			}
		}
		else
			call_failed(idx, rc, "list the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * List P to count the members.  Caller holds the lock.
 */
static void
denter_list(int idx)
{
	send_listing(idx, zklock_shared->slots[idx].path, denter_children_done,
				 false, true);
}

/*
 * Start entering: exists+watch on P/ready, then create our member node,
 * pipelined.  Caller holds the lock.
 */
static void
denter_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];
	int			rc;

	if (slot->uuid[0] == '\0')
	{
		if (!new_uuid(slot->uuid))
		{
			slot_fail(idx, ERRCODE_INTERNAL_ERROR, "could not generate a random member id");
			return;
		}
		strlcpy(slot->node, slot->uuid, sizeof(slot->node));
	}
	if (req->need_parents)
	{
		create_containers(slot->path, true);
		req->need_parents = false;
	}
	if (!denter_watch_ready(idx))
		return;
	node_path(slot, slot->node, buf, sizeof(buf));
	rc = zoo_acreate(zh, buf, slot->data, strlen(slot->data), node_acl(),
					 ZOO_EPHEMERAL, denter_create_done, slot_tag(idx));
	if (rc != ZOK)
	{
		park(idx, true);
		return;
	}
	slot->session_gen = zklock_shared->session_gen;
	req->create_sent = true;
	req->inflight++;
}

/*
 * Completion of exists+watch on the member we wait for while leaving.
 */
static void
leave_watch_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			reqs[idx].watching = true;
		else if (rc == ZNONODE)
			leave_list(idx);
		else
			call_failed(idx, rc, "leave the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the delete of P/ready at the end of a leave: only now is
 * the leave done (NoNode: another member removed it first).
 */
static void
leave_ready_deleted(int rc, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK || rc == ZNONODE)
		{
			zklock_shared->slots[idx].node[0] = '\0';
			slot_finish(idx, ZKR_OK, 1);
		}
		else
			call_failed(idx, rc, "remove the ready node of the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * All members are gone: remove P/ready, and report the leave done once
 * the server applied that delete.  The delete is also recorded in the
 * pending-delete table first (a persistent node: it outlives the
 * session), so a leave given up or failed meanwhile still removes it and
 * the next round cannot pass with too few members.  Caller holds the
 * lock.
 */
static void
leave_finish(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	snprintf(buf, sizeof(buf), "%s/%s", slot->path, ZKLOCK_READY_NODE);
	if (slot->phase != ZKP_READY)
	{
		slot->phase = ZKP_READY;
		(void) delete_add(buf, NULL, true, zklock_shared->session_gen);
	}
	if (!zk_connected ||
		zoo_adelete(zh, buf, -1, leave_ready_deleted, slot_tag(idx)) != ZOK)
		park(idx, false);
	else
		reqs[idx].inflight++;
}

/*
 * Completion of the delete of our member node while leaving.  Then, as in
 * Curator: with nobody else left we are done; otherwise we wait for the
 * lowest member to go (a try gives up instead: ours is gone, the others
 * are not).
 */
static void
leave_member_deleted(int rc, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &reqs[idx];

		if (rc == ZOK || rc == ZNONODE)
		{
			char		buf[ZKLOCK_NODE_PATH_SIZE];

			slot->node_deleted = true;
			if (req->leave_watch[0] == '\0')
				leave_finish(idx);
			else if (slot->try_only)
				give_up_try(idx);
			else
			{
				snprintf(buf, sizeof(buf), "%s/%s", slot->path, req->leave_watch);
				(void) send_exists_watch(idx, buf, leave_watch_done, false);
			}
		}
		else
			call_failed(idx, rc, "leave the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the listing of P while leaving: Curator's leave protocol,
 * one step at a time.  Our member node is deleted by the request itself,
 * and the watch on the lowest member is set once that delete is confirmed
 * (Curator sets the watch, then deletes); a leave that is only a try
 * (zero timeout) gives up, deleting ours, where it would wait.
 */
static void
leave_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];

		if (rc == ZOK || rc == ZNONODE)
		{
			char	  **children;
			int			n = rc == ZOK ? strings->count : 0;
			const char *watch = NULL;
			ZklockLeaveAction action;
			char		buf[ZKLOCK_NODE_PATH_SIZE];

			children = palloc(sizeof(char *) * Max(n, 1));
			if (n > 0)
				memcpy(children, strings->data, sizeof(char *) * n);
			action = zklock_double_barrier_leave_decide(children, n,
														slot->node_deleted ? NULL : slot->node,
														slot->own_delete_sent,
														&watch);
			switch (action)
			{
				case ZKLOCK_LEAVE_DONE:
					leave_finish(idx);
					break;
				case ZKLOCK_LEAVE_ERROR_MISSING:
					slot_fail(idx, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
							  "double barrier member node of \"%s\" is missing",
							  slot->path + slot->user_path_off);
					break;
				case ZKLOCK_LEAVE_DELETE_OURS_DONE:
				case ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST:
					strlcpy(reqs[idx].leave_watch,
							action == ZKLOCK_LEAVE_DELETE_OURS_DONE ? "" : watch,
							sizeof(reqs[idx].leave_watch));
					node_path(slot, slot->node, buf, sizeof(buf));
					slot->own_delete_sent = true;
					if (zoo_adelete(zh, buf, -1, leave_member_deleted,
									slot_tag(idx)) != ZOK)
						park(idx, false);
					else
						reqs[idx].inflight++;
					break;
				case ZKLOCK_LEAVE_WATCH_HIGHEST:
				case ZKLOCK_LEAVE_WATCH_LOWEST:
					if (slot->try_only)
					{
						give_up_try(idx);
						break;
					}
					snprintf(buf, sizeof(buf), "%s/%s", slot->path, watch);
					(void) send_exists_watch(idx, buf, leave_watch_done, false);
					break;
			}
			pfree(children);
		}
		else
			call_failed(idx, rc, "list the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * List P while leaving.  Caller holds the lock.
 */
static void
leave_list(int idx)
{
	send_listing(idx, zklock_shared->slots[idx].path, leave_children_done,
				 false, false);
}

/* ---------------------------------------------------------------------
 * Revoke: write __REVOKE__ into every holder's node.
 * ---------------------------------------------------------------------
 */

/*
 * Completion of one setData of a revocation.
 */
static void
revoke_set_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx >= 0)
	{
		WorkerReq  *req = &reqs[idx];

		req->inflight--;
		if (rc == ZOK)
			req->count++;
		if (settle_cancel(idx))
			;
		else if (req->inflight == 0)
			slot_finish(idx, ZKR_OK, req->count);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the listing of the lock to revoke: find the holders of
 * the mutex or read/write lock and write into their nodes.
 */
static void
revoke_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &reqs[idx];

		if (rc == ZNONODE)
			slot_finish(idx, ZKR_OK, 0);
		else if (rc == ZOK)
		{
			char	  **children;
			int			n = 0;
			int			i;
			int			nholders = 0;
			int		   *holders;
			int			nh;
			bool		rw = false;

			/* only lock nodes take part: mutex or read/write */
			children = palloc(sizeof(char *) * Max(strings->count, 1));
			for (i = 0; i < strings->count; i++)
			{
				const char *c = strings->data[i];

				if (strstr(c, ZKLOCK_READ_LOCK_NAME) || strstr(c, ZKLOCK_WRITE_LOCK_NAME))
				{
					rw = true;
					children[n++] = strings->data[i];
				}
				else if (strstr(c, ZKLOCK_LOCK_NAME))
					children[n++] = strings->data[i];
			}
			if (rw)
				zklock_rw_sort_children(children, n);
			else
				zklock_sort_children(children, n, ZKLOCK_LOCK_NAME);
			holders = palloc(sizeof(int) * Max(n, 1));
			nh = zklock_lock_holders(children, n, rw, holders);
			for (i = 0; i < nh; i++)
			{
				char		buf[ZKLOCK_NODE_PATH_SIZE];

				snprintf(buf, sizeof(buf), "%s/%s", slot->path, children[holders[i]]);
				if (zoo_aset(zh, buf, REVOKE_MESSAGE, strlen(REVOKE_MESSAGE), -1,
							 revoke_set_done, slot_tag(idx)) == ZOK)
				{
					req->inflight++;
					nholders++;
				}
			}
			pfree(holders);
			pfree(children);
			if (nholders == 0)
				slot_finish(idx, ZKR_OK, 0);
		}
		else
			call_failed(idx, rc, "list the lock to revoke");
	}
	LWLockRelease(zklock_shared->lock);
}

/* ---------------------------------------------------------------------
 * Participants: every node of the recipe at P with its data, handed back
 * through a DSM segment the backend made.
 * ---------------------------------------------------------------------
 */

/*
 * Write the collected participants into the backend's DSM segment; if it
 * is too small, say how much is needed instead.  Caller holds the lock.
 */
static void
participants_deliver(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	Size		need = sizeof(int32) * 2;
	dsm_segment *seg;
	char	   *p;
	int			i;

	for (i = 0; i < req->pn; i++)
		need += sizeof(int32) * 2 + MAXALIGN(strlen(req->pnames[i]) + 1) +
			MAXALIGN(Max(req->plen[i], 0) + 1);
	if (need > slot->result_size)
	{
		slot->result_size = (uint32) need;
		slot_finish(idx, ZKR_OK, -1);
		return;
	}
	seg = dsm_attach((dsm_handle) slot->result_dsm);
	if (seg == NULL)
	{
		slot_finish(idx, ZKR_OK, -2);
		return;
	}
	p = dsm_segment_address(seg);
	((int32 *) p)[0] = req->pn;
	((int32 *) p)[1] = req->pkind;
	p += sizeof(int32) * 2;
	for (i = 0; i < req->pn; i++)
	{
		int32		nlen = strlen(req->pnames[i]);
		int32		dlen = req->plen[i];

		memcpy(p, &nlen, sizeof(int32));
		memcpy(p + sizeof(int32), &dlen, sizeof(int32));
		p += sizeof(int32) * 2;
		memcpy(p, req->pnames[i], nlen + 1);
		p += MAXALIGN(nlen + 1);
		if (dlen > 0)
			memcpy(p, req->pdata[i], dlen);
		p[Max(dlen, 0)] = '\0';
		p += MAXALIGN(Max(dlen, 0) + 1);
	}
	dsm_detach(seg);
	slot_finish(idx, ZKR_OK, req->pn);
}

/*
 * The context of one participant's getData: the request's tag and which
 * entry the reply fills (allocated per call, freed by its completion,
 * which the client calls exactly once, also when the handle closes).
 */
typedef struct ParticipantCall
{
	const void *tag;
	int			k;
} ParticipantCall;

/*
 * Completion of getData of one participant: fill entry k with its data.
 */
static void
participants_data_done(int rc, const char *value, int value_len,
					   const struct Stat *stat, const void *data)
{
	ParticipantCall call = *(const ParticipantCall *) data;
	int			idx;

	pfree((void *) data);
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(call.tag);
	if (idx >= 0)
	{
		WorkerReq  *req = &reqs[idx];
		int			k = call.k;

		req->inflight--;
		req->pdone++;
		if (k >= 0 && k < req->pn)
		{
			if (rc == ZOK && value != NULL && value_len >= 0)
			{
				req->pdata[k] = MemoryContextAlloc(TopMemoryContext, value_len + 1);
				memcpy(req->pdata[k], value, value_len);
				req->pdata[k][value_len] = '\0';
				req->plen[k] = value_len;
			}
			else
				req->plen[k] = -1;	/* gone meanwhile, unreadable, no data */
		}
		if (settle_cancel(idx))
			;
		else if (zk_rc_retryable(rc) || req->parked)
		{
			/* the connection dropped: list again once it is back */
			if (!req->parked)
				park(idx, false);
		}
		else if (req->inflight == 0)
			participants_deliver(idx);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of a participants listing: for a semaphore descend into
 * P/leases, otherwise fetch every child's data.
 */
static void
participants_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &reqs[idx];

		if (rc == ZNONODE)
			participants_deliver(idx);
		else if (rc != ZOK)
			call_failed(idx, rc, "list the participants of");
		else if (req->pkind == ZKLOCK_PARTICIPANTS_LOCK &&
				 zklock_find_child(strings->data, strings->count, "leases") >= 0)
		{
			int			zrc;

			req->pkind = ZKLOCK_PARTICIPANTS_LEASES;
			snprintf(req->pdir, sizeof(req->pdir), "%s/leases", slot->path);
			zrc = zoo_aget_children(zh, req->pdir, 0, participants_children_done,
									slot_tag(idx));
			if (zrc != ZOK)
				park(idx, false);
			else
				req->inflight++;
		}
		else
		{
			int			i;

			free_participants(req);	/* of a listing before a reconnect */
			req->pn = strings->count;
			req->pdone = 0;
			req->pnames = MemoryContextAllocZero(TopMemoryContext, sizeof(char *) * Max(req->pn, 1));
			req->pdata = MemoryContextAllocZero(TopMemoryContext, sizeof(char *) * Max(req->pn, 1));
			req->plen = MemoryContextAllocZero(TopMemoryContext, sizeof(int) * Max(req->pn, 1));
			for (i = 0; i < req->pn; i++)
			{
				char		buf[ZKLOCK_NODE_PATH_SIZE];

				ParticipantCall *call;

				req->pnames[i] = MemoryContextStrdup(TopMemoryContext, strings->data[i]);
				req->plen[i] = -1;
				snprintf(buf, sizeof(buf), "%s/%s", req->pdir, strings->data[i]);
				call = MemoryContextAlloc(TopMemoryContext, sizeof(ParticipantCall));
				call->tag = slot_tag(idx);
				call->k = i;
				if (zoo_aget(zh, buf, 0, participants_data_done, call) == ZOK)
					req->inflight++;
				else
				{
					pfree(call);
					req->pdone++;
				}
			}
			if (req->inflight == 0)
				participants_deliver(idx);
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/* ---------------------------------------------------------------------
 * Request dispatch
 * ---------------------------------------------------------------------
 */

/*
 * Begin (or begin again, after a lost connection) the work of a request.
 * Caller holds the lock.
 */
static void
start_request(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	int			rc = ZOK;

	if (!zk_connected)
	{
		park(idx, false);
		return;
	}
	switch (slot->op)
	{
		case ZKOP_MUTEX:
		case ZKOP_READ:
		case ZKOP_WRITE:
			lk_create(idx);
			return;
		case ZKOP_LEASE:
			if (slot->phase == ZKP_LEASE)
				lease_create(idx);
			else
				lk_create(idx);
			return;
		case ZKOP_BARRIER_SET:
			if (req->need_parents)
			{
				create_containers(slot->path, false);
				req->need_parents = false;
			}
			rc = zoo_acreate(zh, slot->path, slot->data, strlen(slot->data),
							 node_acl(), 0, barrier_set_done, slot_tag(idx));
			break;
		case ZKOP_BARRIER_REMOVE:
			rc = zoo_aexists(zh, slot->path, 0, barrier_remove_stat_done, slot_tag(idx));
			break;
		case ZKOP_BARRIER_WAIT:
			/* a look only (zero timeout) leaves no watch behind */
			if (slot->try_only)
				rc = zoo_aexists(zh, slot->path, 0, barrier_wait_done, slot_tag(idx));
			else
				rc = zoo_awexists(zh, slot->path, step_watcher, (void *) slot_tag(idx),
								  barrier_wait_done, slot_tag(idx));
			break;
		case ZKOP_DBARRIER_ENTER:
			denter_start(idx);
			return;
		case ZKOP_DBARRIER_LEAVE:
			leave_list(idx);
			return;
		case ZKOP_REVOKE:
			rc = zoo_aget_children(zh, slot->path, 0, revoke_children_done, slot_tag(idx));
			break;
		case ZKOP_CONFIRM:
			{
				char		buf[ZKLOCK_NODE_PATH_SIZE];

				snprintf(buf, sizeof(buf), "%s/%s", slot->path, slot->data);
				rc = zoo_aexists(zh, buf, 0, confirm_stat_done, slot_tag(idx));
			}
			break;
		case ZKOP_PARTICIPANTS:
			req->pkind = ZKLOCK_PARTICIPANTS_LOCK;
			strlcpy(req->pdir, slot->path, sizeof(req->pdir));
			rc = zoo_aget_children(zh, slot->path, 0, participants_children_done,
								   slot_tag(idx));
			break;
	}
	if (rc != ZOK)
		park(idx, false);
	else
		req->inflight++;
}

/*
 * A watch fired for a request: take its next look.  Caller holds the lock.
 */
static void
continue_request(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	switch (slot->op)
	{
		case ZKOP_MUTEX:
		case ZKOP_READ:
		case ZKOP_WRITE:
			lk_list(idx);
			break;
		case ZKOP_LEASE:
			if (slot->phase == ZKP_LEASE)
				lease_list(idx);
			else
				lk_list(idx);
			break;
		case ZKOP_DBARRIER_ENTER:
			(void) denter_watch_ready(idx);
			break;
		case ZKOP_DBARRIER_LEAVE:
			leave_list(idx);
			break;
		default:
			start_request(idx);
			break;
	}
}

/*
 * Carry on with a parked request now that the connection is back.
 * Caller holds the lock.
 */
static void
resume(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	bool		recover = req->recover;

	req->parked = false;
	req->recover = false;
	req->skip_lists = 0;
	switch (slot->op)
	{
		case ZKOP_MUTEX:
		case ZKOP_READ:
		case ZKOP_WRITE:
			if (slot->downgrade_seq[0] != '\0')
				lk_create(idx); /* same name: NodeExists cannot happen, a
								 * lost create is found by name */
			else if (slot->node[0] != '\0' || (recover && slot->uuid[0] != '\0'))
				lk_list(idx);
			else
				lk_create(idx);
			break;
		case ZKOP_LEASE:
			if (slot->phase == ZKP_LEASE)
			{
				if (slot->node[0] != '\0' || (recover && slot->uuid[0] != '\0'))
					lease_list(idx);
				else
					lease_create(idx);
			}
			else if (slot->aux_node[0] != '\0' || (recover && slot->aux_uuid[0] != '\0'))
				lk_list(idx);
			else
				lk_create(idx);
			break;
		case ZKOP_DBARRIER_ENTER:
			if (slot->node[0] != '\0')
			{
				/* re-create (NodeExists is fine) and look at P/ready again */
				req->ready_seen = false;
				denter_start(idx);
			}
			else
				start_request(idx);
			break;
		case ZKOP_DBARRIER_LEAVE:
			if (slot->phase == ZKP_READY)
				leave_finish(idx);	/* only P/ready's delete was left */
			else
				leave_list(idx);
			break;
		default:
			start_request(idx);
			break;
	}
}

/*
 * Fail request idx because the servers reject zklock.auth (it deletes
 * what it made, as any failed request).  Caller holds the lock.
 */
static void
fail_auth_rejected(int idx)
{
	reqs[idx].serial = zklock_shared->slots[idx].serial;
	slot_fail(idx, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
			  "zookeeper rejected the credentials of zklock.auth");
}

/*
 * Take a new request on: fresh local state, then start its recipe.
 * Caller holds the lock.
 */
static void
pickup(int i)
{
	ZklockSlot *slot = &zklock_shared->slots[i];
	WorkerReq  *req = &reqs[i];

	reset_req(i);
	req->serial = slot->serial;
	slot->state = ZKS_ACTIVE;
	if (slot->op != ZKOP_DBARRIER_LEAVE)
	{
		clear_slot_nodes(slot);
		slot->phase = ZKP_LOCK;
	}
	if (auth_failed_at != 0)
		fail_auth_rejected(i);
	else
		start_request(i);
}

/*
 * Work through what backends posted, in posting order (so a release
 * reaches ZooKeeper before the same backend's next acquire).  After a
 * reconnect, a parked request or a full ring: look at every slot,
 * withdrawals first, then new requests, then requests waiting for the
 * connection.
 *
 * Withdrawn slots are freed at once, even with calls in flight: their
 * replies find the slot's serial changed; a create that succeeds after
 * all deletes its node, and the delete queued here (by name, or by
 * protection prefix) is applied after the create anyway.
 */
static void
run_requests(void)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	if (!sh->post_overflow && !rescan)
	{
		while (sh->post_head != sh->post_tail)
		{
			ZklockSlot *slot;

			i = zklock_post_ring[sh->post_head];
			sh->post_head = (sh->post_head + 1) % sh->post_size;
			if (i < 0 || i >= sh->nslots)
				continue;
			slot = &sh->slots[i];
			if (slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE)
				withdraw(i);
			else if (slot->state == ZKS_NEW)
				pickup(i);
		}
		if (deletes_due(GetCurrentTimestamp()))
			send_deletes();
		LWLockRelease(sh->lock);
		return;
	}

	sh->post_overflow = false;
	sh->post_head = sh->post_tail;
	rescan = false;
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		if (slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE)
			withdraw(i);
	}
	if (deletes_due(GetCurrentTimestamp()))
		send_deletes();

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];
		WorkerReq  *req = &reqs[i];

		if (slot->state == ZKS_NEW)
			pickup(i);
		else if (slot->state == ZKS_ACTIVE && req->serial != slot->serial)
		{
			/*
			 * Left by an earlier worker of this cluster: take it over.  A
			 * create of it may have been sent (the lease's P/locks node
			 * has an id of its own): look for the node by its prefix
			 * first, or a second node would queue behind the first.
			 */
			reset_req(i);
			req->serial = slot->serial;
			park(i, slot->uuid[0] != '\0' || slot->aux_uuid[0] != '\0');
			if (zk_connected)
				resume(i);
		}
		else if (slot->state == ZKS_ACTIVE && req->parked && zk_connected)
			resume(i);
		else if (slot->state == ZKS_HELD && slot->revocable && zk_connected &&
				 !(req->serial == slot->serial && req->revoke_armed))
		{
			/*
			 * A revocable lock without its watch: the getData failed, or
			 * an earlier worker held it.  Watch (and read) it again.
			 */
			if (req->serial != slot->serial)
			{
				reset_req(i);
				req->serial = slot->serial;
			}
			revoke_watch(i);
		}
	}
	LWLockRelease(sh->lock);
}

/*
 * The session is gone (expired, or a different one was handed out): every
 * lock it held is lost, every wait fails, nothing of it is left to
 * delete (the server removed its ephemeral nodes; a pending delete of a
 * persistent node stays).  Caller holds the lock.
 */
static void
sweep_lost_session(const char *why)
{
	ZklockShared *sh = zklock_shared;
	int			i;
	int			lost = 0;

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		switch (slot->state)
		{
			case ZKS_HELD:
				slot->state = ZKS_LOST;
				lost++;
				break;
			case ZKS_ACTIVE:
				if (slot->node[0] != '\0' || slot->uuid[0] != '\0' ||
					slot->aux_uuid[0] != '\0' || slot->op == ZKOP_DBARRIER_LEAVE)
				{
					reqs[i].serial = slot->serial;
					slot_fail(i, ERRCODE_CONNECTION_FAILURE,
							  "zookeeper session %s while waiting for lock \"%s\"",
							  why, slot->path + slot->user_path_off);
				}
				else
					park(i, false);
				break;
			case ZKS_CANCEL:
			case ZKS_RELEASE:
				reset_req(i);
				slot->state = ZKS_FREE;
				break;
			default:
				break;
		}
		if (slot->state != ZKS_ACTIVE)
			reset_req(i);
	}
	drop_session_deletes();
	if (lost > 0)
	{
		sh->lost_epoch++;
		sh->locks_lost_count += lost;
		ereport(LOG,
				(errmsg("zklock: %d lock(s) lost because the zookeeper session %s",
						lost, why)));
	}
}

/*
 * How long a lease lasts after the send time of an answered request: the
 * negotiated session timeout minus zklock.lease_margin, the margin being
 * at most half the timeout.
 */
static int
lease_length_ms(void)
{
	int			timeout = zklock_shared->negotiated_timeout;

	return timeout - Min(zklock_lease_margin, timeout / 2);
}

/*
 * The server answered a request sent at sent, in the current session:
 * the session is alive until sent + lease length at least.
 */
static void
lease_extend(TimestampTz sent)
{
	TimestampTz until = TimestampTzPlusMilliseconds(sent, lease_length_ms());

	if (until > (TimestampTz) pg_atomic_read_u64(&zklock_shared->lease_until))
		pg_atomic_write_u64(&zklock_shared->lease_until, (uint64) until);
}

/*
 * A server accepted zklock.auth after a rejection: the connection counts
 * as made from now on.  Caller holds the lock.
 */
static void
auth_accepted(void)
{
	ZklockShared *sh = zklock_shared;
	const char *server = zh ? zoo_get_current_server(zh) : NULL;

	if (auth_failed_at == 0)
		return;
	auth_failed_at = 0;
	auth_retry_at = 0;
	ereport(LOG,
			(errmsg("zklock: zookeeper server %s accepted the credentials of zklock.auth, session 0x%llx",
					server ? server : "?",
					(unsigned long long) sh->session_id)));
	if (zk_connected)
	{
		sh->conn_state = ZKC_CONNECTED;
		sh->connected_count++;
	}
	else
		sh->conn_state = not_connected_state();
	sh->state_since = GetCurrentTimestamp();
	rescan = true;
}

/*
 * Completion of a heartbeat.  Any answer from the server in our session
 * counts, even an error about the node; connection loss or a closing
 * handle is no answer.  While the servers reject zklock.auth, an answer
 * also proves the credentials passed: they went ahead of the heartbeat on
 * its connection, and a server that rejects them closes it.
 */
static void
heartbeat_done(int rc, const struct Stat *stat, const void *data)
{
	uint32		ticket = (uint32) (uintptr_t) data;
	int			pos = ticket % HEARTBEAT_RING;

	if (hb_ticket[pos] != ticket)
		return;					/* too old: its send time was overwritten */
	hb_ticket[pos] = 0;
	if (rc == ZOK || rc == ZNONODE || rc == ZNOAUTH)
	{
		lease_extend(hb_sent[pos]);
		if (auth_failed_at != 0)
		{
			LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
			auth_accepted();
			LWLockRelease(zklock_shared->lock);
		}
	}
}

/*
 * Send a heartbeat when a quarter of the session timeout passed since the
 * last one (at once after connecting: hb_last_sent is reset then).
 */
static void
heartbeat(TimestampTz now)
{
	int			interval = Max(zklock_shared->negotiated_timeout / 4, 20);
	uint32		ticket;
	int			pos;

	if (!zk_connected || zh == NULL)
		return;
	if (hb_last_sent != 0 &&
		now < TimestampTzPlusMilliseconds(hb_last_sent, interval))
		return;
	ticket = hb_next_ticket++;
	if (ticket == 0)
		ticket = hb_next_ticket++;	/* 0 marks a free ring entry */
	pos = ticket % HEARTBEAT_RING;
	if (zoo_aexists(zh, "/", 0, heartbeat_done, (const void *) (uintptr_t) ticket) == ZOK)
	{
		hb_ticket[pos] = ticket;
		hb_sent[pos] = now;
		hb_last_sent = now;
	}
}

/*
 * Milliseconds until the worker must look at the lease again: the next
 * heartbeat or the end of the lease, whichever comes first (at most
 * max_ms).
 */
static long
lease_wakeup_ms(TimestampTz now, long max_ms)
{
	TimestampTz until;
	long		ms = max_ms;

	if (zk_connected)
	{
		TimestampTz next = TimestampTzPlusMilliseconds(hb_last_sent,
													   Max(zklock_shared->negotiated_timeout / 4, 20));

		ms = Min(ms, (long) ((next - now) / 1000) + 1);
	}
	(void) zklock_lease_valid(now, &until);
	if (until != 0)
		ms = Min(ms, (long) ((until - now) / 1000) + 1);
	return Max(ms, 1);
}

/*
 * The lease ran out without an answer: ZooKeeper may expire the session
 * (or has expired it) and give our locks to others, so every lock is lost
 * now, every wait fails, and the session is treated as expired: the
 * handle is closed (which ends the session at once when the server can
 * still be reached) and a new session is made.  Runs before anything
 * else the worker does once it notices, so a worker that was stalled
 * grants nothing on stale replies.
 */
static void
check_lease(TimestampTz now)
{
	ZklockShared *sh = zklock_shared;
	TimestampTz until;

	if (zklock_lease_valid(now, &until) || until == 0)
		return;

	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	pg_atomic_write_u64(&sh->lease_until, 0);
	sh->lease_expired_count++;
	ereport(LOG,
			(errmsg("zklock: the zookeeper session's lease ran out %ld ms ago without an answer from the server; treating the session as expired",
					(long) ((now - until) / 1000)),
			 errdetail("No request sent in the last %d ms was answered (session timeout %d ms, zklock.lease_margin %d ms).",
					   lease_length_ms(), sh->negotiated_timeout, zklock_lease_margin)));
	zk_connected = false;
	sweep_lost_session("lease ran out");
	if (sh->have_session)
		sh->expired_count++;
	sh->have_session = false;
	zklock_session_forget();
	sh->conn_state = auth_failed_at != 0 ? ZKC_AUTH_FAILED : ZKC_EXPIRED;
	sh->state_since = now;
	need_reconnect = true;
	LWLockRelease(sh->lock);
}

/*
 * A server rejected zklock.auth and closed the connection; the handle is
 * dead.  This is not the end of the session: it lives on the server, its
 * locks stay held while the lease lasts, and the next handle resumes it.
 * Said once in the log (until the credentials pass again); every waiting
 * request fails with 28000, and so does every new one until then; a new
 * handle is opened every zklock.connect_timeout, or at once after a
 * configuration reload.  Caller holds the lock.
 */
static void
auth_rejected(zhandle_t *zzh)
{
	ZklockShared *sh = zklock_shared;
	TimestampTz now = GetCurrentTimestamp();
	const char *server = zoo_get_current_server(zzh);
	int			i;

	zk_connected = false;
	need_reconnect = true;
	auth_retry_at = TimestampTzPlusMilliseconds(now, AUTH_RETRY_MS);
	if (auth_failed_at == 0)
	{
		auth_failed_at = now;
		ereport(LOG,
				(errmsg("zklock: zookeeper server %s rejected the credentials of zklock.auth",
						server ? server : "?"),
				 errdetail("Requests fail with SQLSTATE 28000 until a server accepts them; the worker tries again every %d ms (zklock.connect_timeout, at least 1 s) and at every configuration reload.",
						   AUTH_RETRY_MS),
				 errhint("Check zklock.auth (digest \"user:password\") and the authentication providers of the ZooKeeper servers.")));
	}
	else
		ereport(DEBUG1,
				(errmsg("zklock: zookeeper server %s still rejects the credentials of zklock.auth",
						server ? server : "?")));
	if (sh->conn_state != ZKC_AUTH_FAILED)
	{
		sh->conn_state = ZKC_AUTH_FAILED;
		sh->state_since = now;
	}
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlotState st = sh->slots[i].state;

		if (st == ZKS_NEW || st == ZKS_ACTIVE)
			fail_auth_rejected(i);
	}
}

/*
 * Completion of zoo_add_auth on the handle of generation data.  It comes
 * with the first answer of a server to the credentials (or with the loss
 * of the first connection, after which later answers call nothing, so the
 * heartbeat also tells: see heartbeat_done).
 */
static void
auth_done(int rc, const void *data)
{
	if (rc != ZOK || (uint32) (uintptr_t) data != handle_gen || auth_failed_at == 0)
		return;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	auth_accepted();
	LWLockRelease(zklock_shared->lock);
}

/*
 * Global watcher: connection and session state changes.
 */
static void
session_watcher(zhandle_t *zzh, int type, int state, const char *path, void *ctx)
{
	ZklockShared *sh = zklock_shared;

	if (type != ZOO_SESSION_EVENT)
		return;

	wes_rebuild = true;
	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	if (state == ZOO_CONNECTED_STATE)
	{
		const clientid_t *cid = zoo_client_id(zzh);
		const char *server = zoo_get_current_server(zzh);
		TimestampTz now = GetCurrentTimestamp();

		/* while the servers reject zklock.auth, retries log quietly */
		int			elevel = auth_failed_at != 0 ? DEBUG1 : LOG;

		if (!sh->have_session || sh->session_id != cid->client_id)
		{
			if (sh->have_session)
				sweep_lost_session("was replaced");
			/* what was known about an earlier session says nothing now */
			pg_atomic_write_u64(&sh->lease_until, 0);
			sh->session_gen++;
			sh->session_id = cid->client_id;
			memcpy(sh->session_passwd, cid->passwd, sizeof(sh->session_passwd));
			sh->have_session = true;
			zklock_session_save(cid->client_id, cid->passwd);
			ereport(elevel,
					(errmsg("zklock: connected to zookeeper %s, new session 0x%llx",
							server ? server : "?",
							(unsigned long long) cid->client_id)));
		}
		else
			ereport(elevel,
					(errmsg("zklock: connected to zookeeper %s, session 0x%llx resumed",
							server ? server : "?",
							(unsigned long long) cid->client_id)));
		sh->negotiated_timeout = zoo_recv_timeout(zzh);
		strlcpy(sh->server, server ? server : "", sizeof(sh->server));
		hb_last_sent = 0;		/* heartbeat before any request */
		if (auth_failed_at == 0)
		{
			sh->conn_state = ZKC_CONNECTED;
			sh->connected_count++;
			sh->state_since = now;
		}
		/* else the first answer tells whether the credentials pass now */
		zk_connected = true;
		rescan = true;
		deletes_scan = true;

		/*
		 * The first request of the connection: the lease starts with its
		 * answer, which arrives before the answer of any request sent after
		 * it, so a grant on a new connection is never ahead of its proof.
		 */
		heartbeat(now);
	}
	else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE)
	{
		if (zk_connected)
			ereport(LOG, (errmsg("zklock: connection to zookeeper lost, session may still be alive")));
		if (zk_connected)
			sh->suspended_count++;
		zk_connected = false;
		if (auth_failed_at == 0)
		{
			sh->conn_state = not_connected_state();
			sh->state_since = GetCurrentTimestamp();
		}
	}
	else if (state == ZOO_EXPIRED_SESSION_STATE)
	{
		ereport(LOG, (errmsg("zklock: zookeeper session expired")));
		zk_connected = false;
		pg_atomic_write_u64(&sh->lease_until, 0);
		sweep_lost_session("expired");
		sh->have_session = false;
		zklock_session_forget();
		sh->conn_state = auth_failed_at != 0 ? ZKC_AUTH_FAILED : ZKC_EXPIRED;
		sh->expired_count++;
		sh->state_since = GetCurrentTimestamp();
		need_reconnect = true;
	}
	else if (state == ZOO_AUTH_FAILED_STATE)
		auth_rejected(zzh);
	LWLockRelease(sh->lock);
}

/*
 * Open a ZooKeeper handle, resuming the session in shared memory when
 * there is one (the worker was restarted, the cluster was not).
 */
static void
open_handle(void)
{
	ZklockShared *sh = zklock_shared;
	clientid_t	cid;
	bool		resume_session;

	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	resume_session = sh->have_session;
	if (resume_session)
	{
		cid.client_id = sh->session_id;
		memcpy(cid.passwd, sh->session_passwd, sizeof(cid.passwd));
	}
	if (auth_failed_at == 0)
	{
		sh->conn_state = not_connected_state();
		sh->state_since = GetCurrentTimestamp();
	}
	else
	{
		/* one try per zklock.connect_timeout while the servers reject us */
		auth_retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													AUTH_RETRY_MS);
	}
	handle_gen++;
	LWLockRelease(sh->lock);

	zk_connected = false;
	zh = zookeeper_init(zklock_hosts, session_watcher, zklock_session_timeout,
						resume_session ? &cid : NULL, NULL, 0);
	if (zh == NULL)
		ereport(LOG,
				(errmsg("zklock: could not create a zookeeper handle for \"%s\": %m",
						zklock_hosts)));
	else if (zklock_auth != NULL && zklock_auth[0] != '\0')
	{
		int			rc = zoo_add_auth(zh, "digest", zklock_auth, strlen(zklock_auth),
									  auth_done, (const void *) (uintptr_t) handle_gen);

		if (rc != ZOK)
			ereport(LOG,
					(errmsg("zklock: could not add zookeeper credentials: %s", zerror(rc))));
	}
	if (connected_hosts)
		pfree(connected_hosts);
	connected_hosts = MemoryContextStrdup(TopMemoryContext, zklock_hosts);
	wes_rebuild = true;
}

/*
 * Cut short a connection attempt that gets no answer.  The client gives
 * the server two thirds of the session timeout to answer its handshake,
 * and a server that is starting or stopping may take the connection and
 * never answer: a suspended session's lease would run out meanwhile,
 * although the servers were back in time.  An attempt without an answer
 * after a sixth of the session timeout (at least a second) is shut down,
 * and the client tries again at once.  fd is the client's socket (-1 when
 * it has none).
 */
static void
cut_stuck_attempt(int fd, TimestampTz now)
{
	static int	attempt_fd = -1;
	static TimestampTz attempt_start = 0;
	int			state = zoo_state(zh);
	int			timeout = zklock_shared->negotiated_timeout > 0 ?
		zklock_shared->negotiated_timeout : zklock_session_timeout;

	if (fd < 0 ||
		(state != ZOO_CONNECTING_STATE && state != ZOO_ASSOCIATING_STATE))
	{
		attempt_fd = -1;
		return;
	}
	if (fd != attempt_fd)
	{
		attempt_fd = fd;
		attempt_start = now;
		return;
	}
	if (TimestampDifferenceExceeds(attempt_start, now, Max(1000, timeout / 6)))
	{
		elog(DEBUG1, "zklock: no answer to a connection attempt within %d ms: trying again",
			 Max(1000, timeout / 6));
		(void) shutdown(fd, SHUT_RDWR);
		attempt_fd = -1;
	}
}

/*
 * Build the wait set anew for the client's current socket and interest.
 */
static void
rebuild_wait_set(int fd, int interest)
{
	if (wes != NULL)
		FreeWaitEventSet(wes);
	wes = ZKLOCK_CREATE_WAIT_EVENT_SET(3);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	if (fd >= 0 && interest != 0)
	{
		int			events = 0;

		if (interest & ZOOKEEPER_READ)
			events |= WL_SOCKET_READABLE;
		if (interest & ZOOKEEPER_WRITE)
			events |= WL_SOCKET_WRITEABLE;
		wes_sock_pos = AddWaitEventToSet(wes, events, fd, NULL, NULL);
	}
	else
		wes_sock_pos = -1;
	wes_fd = fd;
	wes_interest = interest;
	wes_rebuild = false;
}

/*
 * Leave shared memory tidy when the worker exits.  The ZooKeeper session
 * is not closed: a restarted worker resumes it, so held locks survive.
 */
static void
worker_exit(int code, Datum arg)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->worker_pid = 0;
	zklock_shared->worker_latch = NULL;
	zklock_shared->conn_state = ZKC_NONE;
	zklock_shared->state_since = GetCurrentTimestamp();
	LWLockRelease(zklock_shared->lock);
}

/*
 * Apply a changed configuration.  The session timeout applies at the next
 * session.  A new connect string restarts the worker: the new worker opens
 * its handle on the new hosts and resumes the session, exactly as after any
 * worker restart, so the per-request state and the watches it relies on are
 * made anew together.  (Handing the string to the live handle with
 * zoo_set_servers is not enough: the 3.8 C client keeps a handle that is
 * between connections on the old address.)
 */
static void
reload_config(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	/* the servers' side may have been fixed: try the credentials again now */
	if (auth_failed_at != 0)
		auth_retry_at = 0;
	if (connected_hosts != NULL && strcmp(connected_hosts, zklock_hosts) != 0)
	{
		ereport(LOG,
				(errmsg("zklock: zklock.hosts changed to \"%s\": the worker restarts to use it",
						zklock_hosts),
				 errdetail("The zookeeper session is kept and resumed on the new hosts.")));
		proc_exit(1);
	}
}

/*
 * Let the client send and receive, and run completions and watchers.  The
 * client takes one reply from the socket per call, so keep calling while
 * the socket has more to read: one wake-up then serves every reply that
 * has arrived, instead of one reply per trip around the main loop.
 */
static void
process_zookeeper(int zkevents)
{
	int			rounds = 0;

	for (;;)
	{
		int			rc = zookeeper_process(zh, zkevents);
		struct pollfd pfd;

		if (rc != ZOK && rc != ZNOTHING)
		{
			wes_rebuild = true;
			break;
		}
		if (!(zkevents & ZOOKEEPER_READ) || zh == NULL || ++rounds >= 1000 ||
			wes_rebuild || wes_fd < 0)
			break;
		pfd.fd = wes_fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN))
			break;
		zkevents = ZOOKEEPER_READ;
	}
}

/*
 * Cork the client's socket while the worker works and uncork it before it
 * waits: every request issued in one trip around the loop (a create and
 * its listing, several backends' requests) leaves in as few TCP segments
 * as possible, so the server reads them in one go instead of waking up
 * for each.
 */
static void
set_cork(bool on)
{
	static int	corked_fd = -1;
	int			v = on ? 1 : 0;

	if (on)
	{
		if (wes_fd < 0 || !zk_connected)
			return;
		if (setsockopt(wes_fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v)) == 0)
			corked_fd = wes_fd;
	}
	else if (corked_fd >= 0)
	{
		(void) setsockopt(corked_fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v));
		corked_fd = -1;
	}
}

/*
 * Entry point of the worker.
 */
void
zklock_worker_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database, but visible in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	reqs = MemoryContextAllocZero(TopMemoryContext,
								  sizeof(WorkerReq) * zklock_shared->nslots);
	dlocal = MemoryContextAllocZero(TopMemoryContext,
									sizeof(DeleteLocal) * zklock_shared->ndeletes);

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->worker_pid = MyProcPid;
	zklock_shared->worker_latch = MyLatch;
	if (zklock_shared->deletes_used > 0)
		ereport(LOG,
				(errmsg_plural("zklock: %d zookeeper node delete left by the previous worker is still pending",
							   "zklock: %d zookeeper node deletes left by the previous worker are still pending",
							   zklock_shared->deletes_used,
							   zklock_shared->deletes_used)));
	LWLockRelease(zklock_shared->lock);
	before_shmem_exit(worker_exit, (Datum) 0);

	/* the client's own logging would go to our stderr: keep it quiet */
	zoo_set_debug_level(0);

	/*
	 * Fresh shared memory but a session file of this server run: the
	 * cluster crash-restarted.  Whoever held locks in that session is gone,
	 * so close it now rather than let its nodes linger for the session
	 * timeout.  A file of another server run (a copied data directory)
	 * names a session that is not ours to close: it is only removed.
	 */
	if (!zklock_shared->have_session)
	{
		int64		old_id;
		char		old_passwd[16];
		bool		foreign;

		if (zklock_session_load(&old_id, old_passwd, &foreign))
		{
			bool		gone = zklock_session_close(old_id, old_passwd, 5000);

			ereport(LOG,
					(errmsg("zklock: %s the zookeeper session 0x%llx of this server's previous worker",
							gone ? "closed" : "could not close",
							(unsigned long long) old_id)));
			zklock_session_forget();
		}
		else if (foreign)
		{
			ereport(LOG,
					(errmsg("zklock: ignoring a zookeeper session file written by another server run"),
					 errdetail("The data directory was copied from another server or the server was restarted after a crash of the postmaster; the session is not closed.")));
			zklock_session_forget();
		}
	}

	for (;;)
	{
		long		timeout_ms = 1000;
		WaitEvent	events[3];
		int			nevents;
		int			zkevents = 0;
		int			i;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			reload_config();

		check_lease(GetCurrentTimestamp());
		if (need_reconnect && zh != NULL)
		{
			zookeeper_close(zh);
			zh = NULL;
			need_reconnect = false;
		}
		if (zh == NULL &&
			(auth_failed_at == 0 || GetCurrentTimestamp() >= auth_retry_at))
			open_handle();

		/* a heartbeat due goes out ahead of the requests of this round */
		heartbeat(GetCurrentTimestamp());
		run_requests();

		if (zh != NULL)
		{
			int			fd = -1;
			int			interest = 0;
			struct timeval tv = {0};
			int			rc;

			rc = zookeeper_interest(zh, &fd, &interest, &tv);
			if (rc != ZOK)
				wes_rebuild = true;
			else
				cut_stuck_attempt(fd, GetCurrentTimestamp());
			if (rc == ZINVALIDSTATE)
				need_reconnect = true;
			timeout_ms = tv.tv_sec * 1000L + (tv.tv_usec + 999) / 1000;
			if (timeout_ms <= 0 || timeout_ms > 1000)
				timeout_ms = (timeout_ms <= 0 && fd >= 0) ? 1 : 1000;
			if (fd != wes_fd || wes_rebuild ||
				(interest != wes_interest && (interest == 0 || wes_interest == 0)))
				rebuild_wait_set(fd, interest);
			else if (interest != wes_interest)
			{
				int			events = 0;

				if (interest & ZOOKEEPER_READ)
					events |= WL_SOCKET_READABLE;
				if (interest & ZOOKEEPER_WRITE)
					events |= WL_SOCKET_WRITEABLE;
				ModifyWaitEvent(wes, wes_sock_pos, events, NULL);
				wes_interest = interest;
			}
		}
		else if (wes == NULL || wes_rebuild)
			rebuild_wait_set(-1, 0);

		/* wake up for the next heartbeat (sent above) or the lease's end */
		{
			TimestampTz now = GetCurrentTimestamp();

			timeout_ms = lease_wakeup_ms(now, timeout_ms);
			if (deletes_next_retry != 0)
				timeout_ms = Min(timeout_ms,
								 Max((long) ((deletes_next_retry - now) / 1000) + 1, 1));
			if (zh == NULL && auth_failed_at != 0)
				timeout_ms = Min(timeout_ms,
								 Max((long) ((auth_retry_at - now) / 1000) + 1, 1));
		}

		set_cork(false);
		nevents = WaitEventSetWait(wes, timeout_ms, events, lengthof(events),
								   zklock_wait_event(ZKLOCK_WAIT_WORKER));
		set_cork(true);

		/* first of all after a wait (or a stall): is the lease still good? */
		check_lease(GetCurrentTimestamp());
		if (need_reconnect)
			continue;
		for (i = 0; i < nevents; i++)
		{
			if (events[i].events & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (events[i].events & WL_SOCKET_READABLE)
				zkevents |= ZOOKEEPER_READ;
			if (events[i].events & WL_SOCKET_WRITEABLE)
				zkevents |= ZOOKEEPER_WRITE;
		}

		if (zh != NULL)
			process_zookeeper(zkevents);
	}
}
