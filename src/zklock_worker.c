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

#include <zookeeper/zookeeper.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
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
	bool		create_sent;	/* a create may have reached the server */
	bool		need_parents;	/* create the parents before the node */
	bool		watching;		/* a watch on the predecessor is armed */
	int			nonode_retries;
	int			lost_retries;
} WorkerReq;

/* A node to delete, retried until it is gone or the session ends */
typedef struct PendingDelete
{
	uint64		id;
	bool		inflight;
	bool		by_prefix;		/* path is a parent; delete children with
								 * prefix */
	char		prefix[ZKLOCK_NODE_NAME_SIZE];
	char		path[ZKLOCK_FULL_PATH_SIZE + ZKLOCK_NODE_NAME_SIZE];
	struct PendingDelete *next;
} PendingDelete;

static zhandle_t *zh = NULL;
static bool zk_connected = false;
static bool need_reconnect = false;
static WorkerReq *reqs = NULL;
static PendingDelete *pending_deletes = NULL;
static uint64 next_delete_id = 1;
static char *connected_hosts = NULL;

static WaitEventSet *wes = NULL;
static int	wes_fd = -2;
static int	wes_interest = -1;
static bool wes_rebuild = true;

static void list_children(int idx);
static void issue_create(int idx);

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
		default:
			return ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
	}
}

/*
 * True for the result codes after which the call may or may not have been
 * applied and should be tried again once the connection is back.
 */
static bool
zk_rc_retryable(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

/*
 * End a request with an error for its backend.  Caller holds the lock.
 */
static void
slot_fail(int idx, int sqlerrcode, const char *fmt,...)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(slot->errmsg, sizeof(slot->errmsg), fmt, ap);
	va_end(ap);
	slot->sqlerrcode = sqlerrcode;
	slot->result = ZKR_ERROR;
	slot->state = ZKS_DONE;
	reqs[idx].serial = 0;
	zklock_wake_backend(slot);
}

/*
 * Put a node on the list of nodes to delete.  The list is worked through
 * in order whenever the session is connected.
 */
static void
queue_delete(const char *path, const char *prefix)
{
	PendingDelete *pd;
	PendingDelete **tail;

	pd = MemoryContextAllocZero(TopMemoryContext, sizeof(PendingDelete));
	pd->id = next_delete_id++;
	strlcpy(pd->path, path, sizeof(pd->path));
	if (prefix)
	{
		pd->by_prefix = true;
		strlcpy(pd->prefix, prefix, sizeof(pd->prefix));
	}
	for (tail = &pending_deletes; *tail != NULL; tail = &(*tail)->next)
		;
	*tail = pd;
}

/*
 * Remove a pending delete by id, if still listed.
 */
static PendingDelete *
find_delete(uint64 id, bool unlink)
{
	PendingDelete **prev;

	for (prev = &pending_deletes; *prev != NULL; prev = &(*prev)->next)
	{
		PendingDelete *pd = *prev;

		if (pd->id == id)
		{
			if (unlink)
				*prev = pd->next;
			return pd;
		}
	}
	return NULL;
}

/*
 * Drop every pending delete: the session that owned the nodes is gone.
 */
static void
clear_deletes(void)
{
	while (pending_deletes != NULL)
	{
		PendingDelete *pd = pending_deletes;

		pending_deletes = pd->next;
		pfree(pd);
	}
}

/*
 * Completion of a guaranteed delete: done on success or NoNode, retried
 * later on connection trouble.
 */
static void
delete_done(int rc, const void *data)
{
	uint64		id = (uint64) (uintptr_t) data;
	PendingDelete *pd = find_delete(id, false);

	if (pd == NULL)
		return;
	if (rc == ZOK || rc == ZNONODE || !zk_rc_retryable(rc))
	{
		if (rc != ZOK && rc != ZNONODE)
			elog(WARNING, "zklock: could not delete ZooKeeper node \"%s\": %s",
				 pd->path, zerror(rc));
		find_delete(id, true);
		pfree(pd);
	}
	else
		pd->inflight = false;
}

/*
 * Completion of the child listing of a delete-by-prefix: delete each child
 * that carries the prefix (a node whose create reply was lost).
 */
static void
delete_prefix_done(int rc, const struct String_vector *strings, const void *data)
{
	uint64		id = (uint64) (uintptr_t) data;
	PendingDelete *pd = find_delete(id, false);
	int			i;

	if (pd == NULL)
		return;
	if (rc == ZOK)
	{
		for (i = 0; i < strings->count; i++)
		{
			if (strncmp(strings->data[i], pd->prefix, strlen(pd->prefix)) == 0)
			{
				char		child[ZKLOCK_FULL_PATH_SIZE + ZKLOCK_NODE_NAME_SIZE];

				snprintf(child, sizeof(child), "%s/%s", pd->path, strings->data[i]);
				queue_delete(child, NULL);
			}
		}
	}
	if (rc == ZOK || rc == ZNONODE || !zk_rc_retryable(rc))
	{
		find_delete(id, true);
		pfree(pd);
	}
	else
		pd->inflight = false;
}

/*
 * Send every pending delete that is not already on its way.
 */
static void
send_deletes(void)
{
	PendingDelete *pd;

	for (pd = pending_deletes; pd != NULL; pd = pd->next)
	{
		int			rc;

		if (pd->inflight)
			continue;
		if (pd->by_prefix)
			rc = zoo_aget_children(zh, pd->path, 0, delete_prefix_done,
								   (const void *) (uintptr_t) pd->id);
		else
			rc = zoo_adelete(zh, pd->path, -1, delete_done,
							 (const void *) (uintptr_t) pd->id);
		if (rc != ZOK)
			break;				/* connection trouble: retry later */
		pd->inflight = true;
	}
}

/*
 * Full path of a slot's own node into buf.
 */
static void
slot_node_path(ZklockSlot *slot, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", slot->path, slot->node);
}

/*
 * Withdraw a cancelled or released request: delete its node (or look for
 * it by prefix when its create reply never came) and free the slot.
 * Caller holds the lock and has checked nothing is in flight.
 */
static void
withdraw(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	bool		same_session = (slot->session_gen == zklock_shared->session_gen);
	bool		adopted = (req->serial != slot->serial);

	if (same_session && slot->node[0] != '\0')
	{
		char		buf[ZKLOCK_FULL_PATH_SIZE + ZKLOCK_NODE_NAME_SIZE];

		slot_node_path(slot, buf, sizeof(buf));
		queue_delete(buf, NULL);
	}
	else if (same_session && slot->uuid[0] != '\0' &&
			 (req->create_sent || adopted))
	{
		char		prefix[ZKLOCK_NODE_NAME_SIZE];

		zklock_protected_prefix(slot->uuid, prefix);
		queue_delete(slot->path, prefix);
	}
	memset(req, 0, sizeof(*req));
	slot->state = ZKS_FREE;
	slot->node[0] = '\0';
	slot->uuid[0] = '\0';
}

/*
 * Hand the lock to the backend.  Caller holds the lock.
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
	if (recover)
		reqs[idx].recover = true;
}

/*
 * After any completion: if the backend gave up meanwhile and nothing else
 * is in flight, withdraw now.  Returns true when the request is no longer
 * active (the caller must stop).
 */
static bool
settle_cancel(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->state == ZKS_ACTIVE)
		return false;
	if (reqs[idx].inflight == 0 &&
		(slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE))
		withdraw(idx);
	return true;
}

/*
 * Completion of the container creates of the parents: nothing to do, the
 * node create queued right behind them reports what matters.
 */
static void
parent_done(int rc, const char *value, const void *data)
{
}

/*
 * Completion of the create of our lock node.
 */
static void
create_done(int rc, const char *value, const struct Stat *stat, const void *data)
{
	int			idx;
	ZklockSlot *slot;
	WorkerReq  *req;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx < 0)
	{
		/* the request is gone: a node created for it must not linger */
		if (rc == ZOK && value != NULL)
			queue_delete(value, NULL);
		LWLockRelease(zklock_shared->lock);
		return;
	}
	slot = &zklock_shared->slots[idx];
	req = &reqs[idx];
	req->inflight--;

	if (rc == ZOK)
	{
		const char *base = strrchr(value, '/');

		strlcpy(slot->node, base ? base + 1 : value, sizeof(slot->node));
		slot->czxid = stat ? stat->czxid : 0;
		req->create_sent = false;
		req->nonode_retries = 0;
		if (!settle_cancel(idx))
			list_children(idx);
	}
	else if (settle_cancel(idx))
	{
		/* withdrawn; a lost create is looked for by prefix */
	}
	else if (rc == ZNONODE)
	{
		req->create_sent = false;
		if (++req->nonode_retries > MAX_NONODE_RETRIES)
			slot_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
					  "could not create the parents of zookeeper lock \"%s\"",
					  slot->path);
		else
		{
			req->need_parents = true;
			issue_create(idx);
		}
	}
	else if (zk_rc_retryable(rc))
		park(idx, true);
	else if (rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE)
	{
		/* the session sweep deals with it */
	}
	else
		slot_fail(idx, zk_rc_sqlstate(rc),
				  "could not create zookeeper lock node under \"%s\": %s",
				  slot->path, zerror(rc));
	LWLockRelease(zklock_shared->lock);
}

/*
 * Send the create of our lock node, preceded by container creates of all
 * parents when the last attempt found a parent missing.  Caller holds the
 * lock.
 */
static void
issue_create(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	char		name[ZKLOCK_FULL_PATH_SIZE + ZKLOCK_NODE_NAME_SIZE];
	int			rc;

	if (!zk_connected)
	{
		park(idx, false);
		return;
	}

	if (slot->uuid[0] == '\0')
	{
		unsigned char bytes[16];

		if (!pg_strong_random(bytes, sizeof(bytes)))
		{
			slot_fail(idx, ERRCODE_INTERNAL_ERROR, "could not generate a random lock id");
			return;
		}
		zklock_format_uuid(bytes, slot->uuid);
	}

	if (req->need_parents)
	{
		char		parent[ZKLOCK_FULL_PATH_SIZE];
		char	   *p;

		/* each ancestor of the node, the lock path itself included */
		strlcpy(parent, slot->path, sizeof(parent));
		for (p = parent + 1;; p++)
		{
			if (*p == '/' || *p == '\0')
			{
				char		saved = *p;

				*p = '\0';
				(void) zoo_acreate(zh, parent, "", 0, &ZOO_OPEN_ACL_UNSAFE,
								   ZOO_CONTAINER, parent_done, NULL);
				*p = saved;
				if (saved == '\0')
					break;
			}
		}
		req->need_parents = false;
	}

	snprintf(name, sizeof(name), "%s/", slot->path);
	zklock_protected_name(slot->uuid, "lock-", name + strlen(name),
						  sizeof(name) - strlen(name));
	rc = zoo_acreate2(zh, name, slot->data, strlen(slot->data),
					  &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
					  create_done, make_tag(idx, slot->serial));
	if (rc != ZOK)
	{
		park(idx, false);
		return;
	}
	slot->session_gen = zklock_shared->session_gen;
	req->inflight++;
	req->create_sent = true;
}

/*
 * Start a fresh attempt: forget any old node and create a new one.
 */
static void
start_fresh(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	slot->node[0] = '\0';
	slot->uuid[0] = '\0';
	issue_create(idx);
}

/*
 * Completion of getData+watch on the predecessor.
 */
static void
watch_done(int rc, const char *value, int value_len, const struct Stat *stat,
		   const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx >= 0)
	{
		reqs[idx].inflight--;
		if (settle_cancel(idx))
			;
		else if (rc == ZOK)
			reqs[idx].watching = true;
		else if (rc == ZNONODE)
			list_children(idx); /* predecessor already gone */
		else if (zk_rc_retryable(rc))
			park(idx, false);
		else if (rc != ZSESSIONEXPIRED && rc != ZCLOSING && rc != ZINVALIDSTATE)
			slot_fail(idx, zk_rc_sqlstate(rc),
					  "could not watch zookeeper lock \"%s\": %s",
					  zklock_shared->slots[idx].path, zerror(rc));
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Watcher on the predecessor's node: it changed or went away, look again.
 */
static void
node_watcher(zhandle_t *zzh, int type, int state, const char *path, void *ctx)
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
		list_children(idx);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Decide from the lock's children: hold, wait behind the predecessor, or
 * recreate a lost node.  Caller holds the lock.
 */
static void
decide(int idx, char **children, int n)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];
	ZklockLockDecision d;

	if (slot->node[0] == '\0')
	{
		/* resumed after a lost create reply: find our node by its prefix */
		char		prefix[ZKLOCK_NODE_NAME_SIZE];
		int			found;

		zklock_protected_prefix(slot->uuid, prefix);
		found = zklock_find_protected(children, n, prefix);
		if (found < 0)
		{
			issue_create(idx);
			return;
		}
		strlcpy(slot->node, children[found], sizeof(slot->node));
		req->create_sent = false;
	}

	zklock_sort_children(children, n, "lock-");
	d = zklock_lock_decide(children, n, slot->node, 1);
	if (d.lost)
	{
		if (++req->lost_retries > MAX_LOST_RETRIES)
			slot_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
					  "zookeeper lock node under \"%s\" keeps disappearing",
					  slot->path);
		else
			start_fresh(idx);
	}
	else if (d.holds)
		grant(idx);
	else if (slot->try_only)
	{
		char		buf[ZKLOCK_FULL_PATH_SIZE + ZKLOCK_NODE_NAME_SIZE];

		slot_node_path(slot, buf, sizeof(buf));
		queue_delete(buf, NULL);
		slot->node[0] = '\0';
		slot->result = ZKR_NOT_GRANTED;
		slot->state = ZKS_DONE;
		req->serial = 0;
		zklock_wake_backend(slot);
	}
	else
	{
		char		wpath[ZKLOCK_FULL_PATH_SIZE + ZKLOCK_NODE_NAME_SIZE];
		int			rc;

		snprintf(wpath, sizeof(wpath), "%s/%s", slot->path, children[d.watch_index]);
		rc = zoo_awget(zh, wpath, node_watcher, (void *) make_tag(idx, slot->serial),
					   watch_done, make_tag(idx, slot->serial));
		if (rc != ZOK)
			park(idx, false);
		else
			req->inflight++;
	}
}

/*
 * Completion of the child listing of a lock path.
 */
static void
children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = tag_current(data);
	if (idx >= 0)
	{
		WorkerReq  *req = &reqs[idx];

		req->inflight--;
		if (settle_cancel(idx))
			;
		else if (rc == ZOK)
		{
			char	  **children;
			int			n = strings->count;

			/* sort a copy of the pointers; the client frees the strings */
			children = palloc(sizeof(char *) * Max(n, 1));
			memcpy(children, strings->data, sizeof(char *) * n);
			decide(idx, children, n);
			pfree(children);
		}
		else if (rc == ZNONODE)
		{
			/* the parent is gone, and our node with it */
			req->need_parents = true;
			start_fresh(idx);
		}
		else if (zk_rc_retryable(rc))
			park(idx, false);
		else if (rc != ZSESSIONEXPIRED && rc != ZCLOSING && rc != ZINVALIDSTATE)
			slot_fail(idx, zk_rc_sqlstate(rc),
					  "could not list zookeeper lock \"%s\": %s",
					  zklock_shared->slots[idx].path, zerror(rc));
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Ask for the children of the lock path.  Caller holds the lock.
 */
static void
list_children(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	int			rc;

	if (!zk_connected)
	{
		park(idx, false);
		return;
	}
	rc = zoo_aget_children(zh, slot->path, 0, children_done,
						   make_tag(idx, slot->serial));
	if (rc != ZOK)
		park(idx, false);
	else
		reqs[idx].inflight++;
}

/*
 * Carry on with a parked request now that the connection is back.
 */
static void
resume(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &reqs[idx];

	req->parked = false;
	if (slot->node[0] != '\0' || (req->recover && slot->uuid[0] != '\0'))
		list_children(idx);
	else
		issue_create(idx);
	req->recover = false;
}

/*
 * Work through the request table: withdrawals first (so that a release
 * reaches ZooKeeper before the same backend's next acquire), then new
 * requests, then requests waiting for the connection.
 */
static void
run_requests(void)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		if ((slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE) &&
			(reqs[i].serial != slot->serial || reqs[i].inflight == 0))
			withdraw(i);
	}
	if (zk_connected && pending_deletes != NULL)
		send_deletes();

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];
		WorkerReq  *req = &reqs[i];

		if (slot->state == ZKS_NEW)
		{
			memset(req, 0, sizeof(*req));
			req->serial = slot->serial;
			slot->state = ZKS_ACTIVE;
			slot->node[0] = '\0';
			slot->uuid[0] = '\0';
			if (zk_connected)
				issue_create(i);
			else
				park(i, false);
		}
		else if (slot->state == ZKS_ACTIVE && req->serial != slot->serial)
		{
			/* left by an earlier worker of this cluster: take it over */
			memset(req, 0, sizeof(*req));
			req->serial = slot->serial;
			park(i, slot->uuid[0] != '\0');
			if (zk_connected)
				resume(i);
		}
		else if (slot->state == ZKS_ACTIVE && req->parked && zk_connected)
			resume(i);
	}
	LWLockRelease(sh->lock);
}

/*
 * The session is gone (expired, or a different one was handed out): every
 * lock it held is lost, every wait fails, nothing of it is left to
 * delete.  Caller holds the lock.
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
				if (slot->node[0] != '\0' || slot->uuid[0] != '\0')
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
				memset(&reqs[i], 0, sizeof(WorkerReq));
				slot->state = ZKS_FREE;
				break;
			default:
				break;
		}
		if (slot->state != ZKS_ACTIVE)
			memset(&reqs[i], 0, sizeof(WorkerReq));
	}
	clear_deletes();
	if (lost > 0)
		ereport(LOG,
				(errmsg("zklock: %d lock(s) lost because the zookeeper session %s",
						lost, why)));
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

		if (!sh->have_session || sh->session_id != cid->client_id)
		{
			if (sh->have_session)
				sweep_lost_session("was replaced");
			sh->session_gen++;
			sh->session_id = cid->client_id;
			memcpy(sh->session_passwd, cid->passwd, sizeof(sh->session_passwd));
			sh->have_session = true;
			ereport(LOG,
					(errmsg("zklock: connected to zookeeper %s, new session 0x%llx",
							server ? server : "?",
							(unsigned long long) cid->client_id)));
		}
		else
			ereport(LOG,
					(errmsg("zklock: connected to zookeeper %s, session 0x%llx resumed",
							server ? server : "?",
							(unsigned long long) cid->client_id)));
		sh->negotiated_timeout = zoo_recv_timeout(zzh);
		strlcpy(sh->server, server ? server : "", sizeof(sh->server));
		sh->conn_state = ZKC_CONNECTED;
		sh->state_since = GetCurrentTimestamp();
		zk_connected = true;
	}
	else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE)
	{
		if (zk_connected)
			ereport(LOG, (errmsg("zklock: connection to zookeeper lost, session may still be alive")));
		zk_connected = false;
		sh->conn_state = sh->have_session ? ZKC_SUSPENDED : ZKC_CONNECTING;
		sh->state_since = GetCurrentTimestamp();
	}
	else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE)
	{
		const char *why = state == ZOO_EXPIRED_SESSION_STATE ? "expired" : "failed authentication";

		ereport(LOG, (errmsg("zklock: zookeeper session %s", why)));
		zk_connected = false;
		sweep_lost_session(why);
		sh->have_session = false;
		sh->conn_state = ZKC_EXPIRED;
		sh->state_since = GetCurrentTimestamp();
		need_reconnect = true;
	}
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
	sh->conn_state = resume_session ? ZKC_SUSPENDED : ZKC_CONNECTING;
	sh->state_since = GetCurrentTimestamp();
	LWLockRelease(sh->lock);

	zk_connected = false;
	zh = zookeeper_init(zklock_hosts, session_watcher, zklock_session_timeout,
						resume_session ? &cid : NULL, NULL, 0);
	if (zh == NULL)
		ereport(LOG,
				(errmsg("zklock: could not create a zookeeper handle for \"%s\": %m",
						zklock_hosts)));
	if (connected_hosts)
		pfree(connected_hosts);
	connected_hosts = MemoryContextStrdup(TopMemoryContext, zklock_hosts);
	wes_rebuild = true;
}

/*
 * Build the wait set anew for the client's current socket and interest.
 */
static void
rebuild_wait_set(int fd, int interest)
{
	if (wes != NULL)
		FreeWaitEventSet(wes);
	wes = CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	if (fd >= 0 && interest != 0)
	{
		int			events = 0;

		if (interest & ZOOKEEPER_READ)
			events |= WL_SOCKET_READABLE;
		if (interest & ZOOKEEPER_WRITE)
			events |= WL_SOCKET_WRITEABLE;
		AddWaitEventToSet(wes, events, fd, NULL, NULL);
	}
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
 * Apply a changed configuration: a new connect string goes to the live
 * handle; the session timeout applies at the next session.
 */
static void
reload_config(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	if (zh != NULL && connected_hosts != NULL &&
		strcmp(connected_hosts, zklock_hosts) != 0)
	{
		int			rc = zoo_set_servers(zh, zklock_hosts);

		if (rc != ZOK)
			ereport(LOG,
					(errmsg("zklock: could not switch to zookeeper hosts \"%s\": %s",
							zklock_hosts, zerror(rc))));
		else
		{
			pfree(connected_hosts);
			connected_hosts = MemoryContextStrdup(TopMemoryContext, zklock_hosts);
		}
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

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->worker_pid = MyProcPid;
	zklock_shared->worker_latch = MyLatch;
	LWLockRelease(zklock_shared->lock);
	before_shmem_exit(worker_exit, (Datum) 0);

	/* the client's own logging would go to our stderr: keep it quiet */
	zoo_set_debug_level(0);

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

		if (need_reconnect && zh != NULL)
		{
			zookeeper_close(zh);
			zh = NULL;
			need_reconnect = false;
		}
		if (zh == NULL)
			open_handle();

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
			if (rc == ZINVALIDSTATE)
				need_reconnect = true;
			timeout_ms = tv.tv_sec * 1000L + (tv.tv_usec + 999) / 1000;
			if (timeout_ms <= 0 || timeout_ms > 1000)
				timeout_ms = (timeout_ms <= 0 && fd >= 0) ? 1 : 1000;
			if (fd != wes_fd || interest != wes_interest || wes_rebuild)
				rebuild_wait_set(fd, interest);
		}
		else if (wes == NULL || wes_rebuild)
			rebuild_wait_set(-1, 0);

		nevents = WaitEventSetWait(wes, timeout_ms, events, lengthof(events),
								   PG_WAIT_EXTENSION);
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
		{
			int			rc = zookeeper_process(zh, zkevents);

			if (rc != ZOK && rc != ZNOTHING)
				wes_rebuild = true;
		}
	}
}
