/*-------------------------------------------------------------------------
 *
 * worker/deadlock_records.c
 *	  Deadlock detection across clusters (issue 33, item 2), its records:
 *	  the wait record a waiter publishes in ZooKeeper once it has waited
 *	  deadlock_timeout, its delete when the wait ends, and the sweep of the
 *	  records an earlier worker of the session left.  The check that
 *	  follows the records for a cycle is worker/deadlock_check.c; the
 *	  detection inside one cluster is backend/deadlock.c, the pure rules
 *	  of both core/deadlock_rules.c.
 *
 * Interface, with zklock_shared->lock held:
 *
 *	zklock_dlx_rec_asked(idx)   (worker/worker.h, called by
 *		worker/dispatch.c) the waiting backend of slot idx set
 *		ZKLOCK_DLX_ bits in its slot (backend/channel.c's wait loop: PUBLISH
 *		at its first deadlock_timeout tick when the search inside the
 *		cluster found nothing, CHECK at every later one): take them.
 *	zklock_dlx_rec_pass()   every pass: delete the records of waits that
 *		ended; says whether a waiter asked for a check.
 *	zklock_dlx_recs, zklock_dlx_recs_used, zklock_dlx_rec_waiting,
 *	zklock_dlx_rec_dir, zklock_dlx_rec_path, zklock_dlx_rec_forget,
 *	zklock_dlx_rec_call   the records as the check reads them, and what
 *		it needs of them.
 *
 *	The last two groups are worker/deadlock_records.h's, for
 *	worker/deadlock_check.c only (its pass is the one worker/dispatch.c
 *	runs).
 *
 * The records.  One ephemeral node per published wait, below
 * zklock.namespace + ZKLOCK_WAITS_DIR (a path no SQL call may use,
 * backend/args.c), made with zklock.acl as every zklock node, its parents
 * as containers.  Its name, <session id hex>-<worker pid>-<slot>-<serial>-<n>
 * (n counts this process's records), is never used twice, so a record
 * made again is another node.  A restarted worker goes on with its
 * predecessor's session (zklock_shared keeps it), so its first pass lists
 * the records and deletes those of its session made by another process
 * (sweep_earlier): nothing outlives the wait it was made for.  Its data,
 * text, one "key value" per line:
 *
 *	zklock-wait 1
 *	cluster <cluster_name, or host:port>
 *	pid <the waiting backend>
 *	kind <"", "read ", "write ", "semaphore_mutex ", ...>  (for the DETAIL)
 *	lock <the user's path>
 *	node <the full path of its waiting node>
 *	ahead <full path>   each node ahead of it that blocks it, held or
 *	                    waiting (a mutex or writer: every node ahead, a
 *	                    reader: the write nodes ahead, a lease at its
 *	                    P/locks step: the P/locks nodes ahead, a lease of
 *	                    one lease at its lease step: every other lease),
 *	                    from one getChildren when it is published
 *	hold <full path>    each lock node or lease its backend holds (HELD
 *	                    slots of a kind with a deadlock mode), and the
 *	                    P/locks node a lease at its lease step holds
 *
 * A waiting backend cannot take or release anything, so what a record says
 * can only become too much, never too little: nodes ahead go (never come),
 * holds go only by a loss.  Waits shorter than deadlock_timeout write
 * nothing; a record goes when its wait ends (grant, give-up, victim, loss:
 * the next pass queues its delete in the pending-delete table) and with
 * the session.  Publishing costs one getChildren of the lock and one
 * create (NoNode: the containers and the create again, once), and one
 * getData of the node it waits behind when that node is not one of this
 * worker's, for zk_locks' waits_for (learn_holder: "pid N" for a local
 * holder, "pid N of cluster X" from zklock's identity, else the node's
 * data: a Curator client's participant id).  Curator clients publish no
 * waits, so a cycle through one is never seen.  A lease of a semaphore
 * of more than one lease publishes at its P/locks step only: at its lease
 * step it waits for no one in particular (wait_queue).  A lease that goes
 * on from its P/locks step to its lease step waits for other nodes: the
 * pass deletes its record, and its next tick publishes it again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "core/deadlock_rules.h"
#include "core/names.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "worker/worker.h"
#include "worker/deadlock_records.h"
#include "worker/locks/locks.h"

/* largest record written */
#define DLX_RECORD_MAX	32768

DlxRec	   *zklock_dlx_recs = NULL;
int			zklock_dlx_recs_used = 0;	/* records not DLX_NONE */
static uint32 record_count = 0;
static bool swept = false;		/* an earlier worker's records were looked for */

/*
 * The records' parent: zklock.namespace + ZKLOCK_WAITS_DIR.
 */
void
zklock_dlx_rec_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", zklock_namespace ? zklock_namespace : "",
			 ZKLOCK_WAITS_DIR);
}

/*
 * The full path of the record named name.
 */
void
zklock_dlx_rec_path(const char *name, char *buf, size_t len)
{
	zklock_dlx_rec_dir(buf, len);
	strlcat(buf, "/", len);
	strlcat(buf, name, len);
}

/*
 * Worker memory for the records, on first use.
 */
static void
init_recs(void)
{
	if (zklock_dlx_recs == NULL)
		zklock_dlx_recs = MemoryContextAllocZero(TopMemoryContext,
									  sizeof(DlxRec) * zklock_shared->nslots);
}

/*
 * Forget the record of slot idx (its node is gone or being deleted).
 */
void
zklock_dlx_rec_forget(int idx)
{
	DlxRec	   *r = &zklock_dlx_recs[idx];

	if (r->state != DLX_NONE)
		zklock_dlx_recs_used--;
	if (r->data)
		pfree(r->data);
	memset(r, 0, sizeof(*r));
}

/*
 * Does slot idx still wait with serial, in the current session?  Caller
 * holds the lock.
 */
bool
zklock_dlx_rec_waiting(int idx, uint32 serial)
{
	ZklockSlot *s = &zklock_shared->slots[idx];

	return s->state == ZKS_ACTIVE && s->serial == serial &&
		!zklock_give_back_pending(s);
}

/*
 * The deadlock mode of slot s: its kind's, a semaphore of one lease
 * counting as a semaphore mutex (backend/deadlock.c reads it the same way).
 */
static ZklockDeadlockMode
slot_mode(const ZklockSlot *s)
{
	ZklockDeadlockMode m = zklock_kind_info(s->kind)->deadlock;

	if (m == ZKDL_LEASE && s->args.lease.max_leases == 1)
		m = ZKDL_LEASE_ONE;
	return m;
}

/*
 * Do holds of slot s block published waits (its node may be one a record
 * names: the lock engine's kinds and the semaphore's leases)?
 */
static bool
slot_in_records(const ZklockSlot *s)
{
	return slot_mode(s) != ZKDL_NONE;
}

/*
 * Where the wait of slot idx stands, for its record: the queue it waits
 * in and its node there.  A lock engine request (a lock, or a lease at
 * its P/locks step) waits behind the nodes ahead in the lock engine's
 * queue; a lease of one lease at its lease step waits for every lease of
 * P/leases.  False when the wait is no AND wait (a lease of a larger
 * semaphore at its lease step) and publishes nothing.  Caller holds the
 * lock.
 */
typedef struct DlxQueue
{
	char		base[ZKLOCK_NODE_PATH_SIZE];	/* the nodes' parent */
	const char *node;			/* our node's name there */
	const char *lock_name;		/* how its nodes sort */
	bool		rw;				/* read/write nodes */
	bool		read;			/* a reader: only write nodes block */
	bool		leases;			/* every other node blocks, in any order */
} DlxQueue;

static bool
wait_queue(int idx, DlxQueue *q)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	ZklockDeadlockMode m = slot_mode(slot);
	LockTarget	t;

	memset(q, 0, sizeof(*q));
	if ((m == ZKDL_LEASE_ONE || m == ZKDL_LEASE) && slot->phase == ZKP_LEASE)
	{
		if (m != ZKDL_LEASE_ONE)
			return false;
		zklock_recipe_path(q->base, sizeof(q->base), slot->path,
						   ZKLOCK_LEASES_DIR, NULL);
		q->node = slot->nodes[ZKN_MAIN].name;
		q->lock_name = ZKLOCK_LEASE_NAME;
		q->leases = true;
		return true;
	}
	zklock_lk_target(idx, &t);
	strlcpy(q->base, t.base, sizeof(q->base));
	q->node = t.node;
	q->lock_name = t.lock_name;
	q->rw = t.rw;
	q->read = t.read;
	return true;
}

/*
 * Does the node named child, ahead of ours in q (or beside it, for
 * leases), keep our wait out?
 */
static bool
queue_blocks(const DlxQueue *q, const char *child)
{
	return q->leases || !q->read || zklock_is_write_node(child);
}

/*
 * May slot idx publish its wait now: a kind with a deadlock mode, in an
 * AND wait?  Caller holds the lock.
 */
static bool
slot_publishes(int idx)
{
	DlxQueue	q;

	return slot_mode(&zklock_shared->slots[idx]) != ZKDL_NONE &&
		wait_queue(idx, &q);
}

/*
 * A call's context, in worker memory.
 */
DlxCall *
zklock_dlx_rec_call(int idx, uint32 serial)
{
	DlxCall    *c = MemoryContextAlloc(TopMemoryContext, sizeof(DlxCall));

	c->idx = idx;
	c->serial = serial;
	c->session_gen = zklock_shared->session_gen;
	return c;
}

/*
 * Is the call c still about the record of its slot, as it is now?
 */
static bool
call_current(const DlxCall *c, DlxState state)
{
	return zklock_dlx_recs != NULL && zklock_dlx_recs[c->idx].state == state &&
		zklock_dlx_recs[c->idx].serial == c->serial &&
		zklock_dlx_recs[c->idx].session_gen == c->session_gen &&
		c->session_gen == zklock_shared->session_gen;
}

static void create_done(int rc, const char *value, const void *data);

/*
 * Send the create of the record of slot idx (its data is ready).  Caller
 * holds the lock.
 */
static void
send_create(int idx)
{
	DlxRec	   *r = &zklock_dlx_recs[idx];
	char		path[ZKLOCK_FULL_PATH_SIZE + 80];
	int			rc;

	zklock_dlx_rec_path(r->name, path, sizeof(path));
	rc = zoo_acreate(zklock_zh, path, r->data, r->len, zklock_zkio_node_acl(),
					 ZOO_EPHEMERAL, create_done,
					 zklock_dlx_rec_call(idx, r->serial));
	if (rc != ZOK)
		zklock_dlx_rec_forget(idx);
}

/*
 * Completion of a record's create: it is live, or (NoNode: the container
 * went away with its last child) made again once with its parents.
 */
static void
create_done(int rc, const char *value, const void *data)
{
	DlxCall    *c = (DlxCall *) data;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (call_current(c, DLX_CREATING))
	{
		DlxRec	   *r = &zklock_dlx_recs[c->idx];

		if (rc == ZOK)
		{
			r->state = DLX_LIVE;	/* a wait that ended: the pass deletes it */
			ereport(DEBUG1,
					(errmsg("zklock: wait record %s published", r->name)));
		}
		else if (rc == ZNONODE && !r->retried && zklock_connected)
		{
			char		dir[ZKLOCK_FULL_PATH_SIZE + 16];

			r->retried = true;
			zklock_dlx_rec_dir(dir, sizeof(dir));
			zklock_zkio_create_containers(dir, true);
			send_create(c->idx);
		}
		else
		{
			ereport(DEBUG1,
					(errmsg("zklock: wait record not published: %s", zerror(rc))));
			if (zklock_rc_retryable(rc))
			{
				char		path[ZKLOCK_FULL_PATH_SIZE + 96];

				/* it may have been applied: it goes (a name never reused) */
				zklock_dlx_rec_path(r->name, path, sizeof(path));
				(void) zklock_deletes_add(path, NULL, false, r->session_gen, 0, 0);
			}
			zklock_dlx_rec_forget(c->idx);
		}
	}
	else if (rc == ZOK && c->session_gen == zklock_shared->session_gen)
		(void) zklock_deletes_add(value, NULL, false, c->session_gen, 0, 0);
	LWLockRelease(zklock_shared->lock);
	pfree(c);
}

/*
 * This worker's name for its cluster in records: cluster_name, or
 * host:port.
 */
static void
cluster_id(char *buf, size_t len)
{
	char		host[256];

	if (cluster_name && cluster_name[0] != '\0')
	{
		strlcpy(buf, cluster_name, len);
		return;
	}
	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "localhost", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(buf, len, "%s:%d", host, PostPortNumber);
}

/*
 * The record of slot idx from the children of its queue's parent: who it
 * is, what it waits behind, what its backend holds.  false when its node
 * is not among them.  Caller holds the lock.
 */
static bool
build_record(int idx, const DlxQueue *q, char **children, int n,
			 StringInfo buf)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	const ZklockKindInfo *k = zklock_kind_info(slot->kind);
	char		id[300];
	int			own = -1;
	int			i;

	if (q->leases)
		;						/* every other lease blocks: no order */
	else if (q->rw)
		zklock_rw_sort_children(children, n);
	else
		zklock_sort_children(children, n, q->lock_name);
	for (i = 0; i < n && own < 0; i++)
		if (strcmp(children[i], q->node) == 0)
			own = i;
	if (own < 0)
		return false;

	cluster_id(id, sizeof(id));
	appendStringInfo(buf, "%s\ncluster %s\npid %d\nkind %s%s\nlock %s\nnode %s/%s\n",
					 DLX_MAGIC, id, slot->pid,
					 k->deadlock == ZKDL_MUTEX ? "" : k->recipe,
					 k->deadlock == ZKDL_MUTEX ? "" : " ",
					 slot->path + slot->user_path_off, q->base, q->node);
	for (i = 0; i < (q->leases ? n : own); i++)
		if (i != own && queue_blocks(q, children[i]))
			appendStringInfo(buf, "ahead %s/%s\n", q->base, children[i]);
	/* a lease's P/locks node, held while it waits for the leases */
	if (q->leases && slot->nodes[ZKN_LEASE_LOCK].name[0] != '\0')
	{
		char		path[ZKLOCK_NODE_PATH_SIZE];

		zklock_recipe_path(path, sizeof(path), slot->path, ZKLOCK_LOCKS_DIR,
						   slot->nodes[ZKN_LEASE_LOCK].name);
		appendStringInfo(buf, "hold %s\n", path);
	}
	for (i = 0; i < zklock_shared->nslots; i++)
	{
		ZklockSlot *h = &zklock_shared->slots[i];
		char		path[ZKLOCK_NODE_PATH_SIZE];

		if (h->pid != slot->pid || h->state != ZKS_HELD ||
			zklock_give_back_pending(h) || !slot_in_records(h) ||
			h->nodes[ZKN_MAIN].name[0] == '\0')
			continue;
		zklock_zkio_node_path(h, h->nodes[ZKN_MAIN].name, path, sizeof(path));
		if (buf->len + strlen(path) + 8 > DLX_RECORD_MAX)
			break;				/* a hold left out only misses a cycle */
		appendStringInfo(buf, "hold %s\n", path);
	}
	return buf->len <= DLX_RECORD_MAX;
}

/*
 * What zk_locks shows of the holder of a node from its data: "pid N of
 * cluster X" for zklock's own identity (JSON with cluster_name and pid),
 * else the data as it is (a Curator client's participant id), valid
 * UTF-8 of printable characters.
 */
static void
describe_holder(const char *value, int len, char *out, size_t outlen)
{
	char		buf[ZKLOCK_NODE_DATA_SIZE];
	const char *p;
	int			i;

	len = Min(len, (int) sizeof(buf) - 1);
	memcpy(buf, value, len);
	buf[len] = '\0';
	if (buf[0] == '{' && (p = strstr(buf, "\"pid\":")) != NULL)
	{
		int			pid = atoi(p + 6);
		char		cluster[128] = "";
		const char *c = strstr(buf, "\"cluster_name\":\"");

		if (c != NULL)
			sscanf(c + 16, "%127[^\"]", cluster);
		if (cluster[0] != '\0')
			snprintf(out, outlen, "pid %d of cluster %s", pid, cluster);
		else
			snprintf(out, outlen, "pid %d of %s", pid, buf);
		return;
	}
	for (i = 0; i < len; i++)
		if ((unsigned char) buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = '?';
	if (!pg_verify_mbstr(PG_UTF8, buf, len, true))
		for (i = 0; i < len; i++)
			if ((unsigned char) buf[i] >= 0x80)
				buf[i] = '?';
	strlcpy(out, buf, outlen);
}

/*
 * Completion of the getData of the node a published wait waits behind:
 * its holder, for zk_locks.
 */
static void
holder_read(int rc, const char *value, int value_len, const struct Stat *stat,
			const void *data)
{
	DlxCall    *c = (DlxCall *) data;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (rc == ZOK && zklock_dlx_rec_waiting(c->idx, c->serial) &&
		value != NULL)
	{
		ZklockSlot *slot = &zklock_shared->slots[c->idx];

		describe_holder(value, value_len, slot->waits_for, sizeof(slot->waits_for));
	}
	LWLockRelease(zklock_shared->lock);
	pfree(c);
}

/*
 * Whom the wait of slot idx waits for, for zk_locks: the first node ahead
 * that blocks it (a mutex's or a writer's holder, a reader's first writer
 * ahead).  A node of a local backend gives "pid N" at once; any other is
 * read (one getData).  Caller holds the lock.
 */
static void
learn_holder(int idx, const DlxQueue *q, char **sorted, int n)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	const char *first = NULL;
	char		path[ZKLOCK_NODE_PATH_SIZE];
	int			i;

	for (i = 0; i < n && (q->leases || strcmp(sorted[i], q->node) != 0) &&
		 first == NULL; i++)
		if (strcmp(sorted[i], q->node) != 0 && queue_blocks(q, sorted[i]))
			first = sorted[i];
	slot->waits_for[0] = '\0';
	if (first == NULL)
		return;
	for (i = 0; i < zklock_shared->nslots; i++)
	{
		ZklockSlot *h = &zklock_shared->slots[i];

		if (h->state != ZKS_FREE && strcmp(h->path, slot->path) == 0 &&
			(strcmp(h->nodes[ZKN_MAIN].name, first) == 0 ||
			 strcmp(h->nodes[ZKN_LEASE_LOCK].name, first) == 0))
		{
			snprintf(slot->waits_for, sizeof(slot->waits_for), "pid %d", h->pid);
			return;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", q->base, first);
	{
		DlxCall    *c = zklock_dlx_rec_call(idx, slot->serial);

		if (zoo_aget(zklock_zh, path, 0, holder_read, c) != ZOK)
			pfree(c);
	}
}

/*
 * Completion of the listing of a waiting lock: build the record and send
 * its create.
 */
static void
list_done(int rc, const struct String_vector *strings, const void *data)
{
	DlxCall    *c = (DlxCall *) data;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (call_current(c, DLX_LISTING))
	{
		DlxRec	   *r = &zklock_dlx_recs[c->idx];
		StringInfoData buf;
		char	  **children;
		int			n = rc == ZOK ? strings->count : 0;
		DlxQueue	q;

		initStringInfo(&buf);
		children = palloc(sizeof(char *) * Max(n, 1));
		if (n > 0)
			memcpy(children, strings->data, sizeof(char *) * n);
		if (rc == ZOK && zklock_dlx_rec_waiting(c->idx, c->serial) &&
			zklock_shared->slots[c->idx].phase == r->phase &&
			wait_queue(c->idx, &q) &&
			build_record(c->idx, &q, children, n, &buf))
		{
			snprintf(r->name, sizeof(r->name), "%016llx-%d-%d-%u-%u",
					 (unsigned long long) zklock_shared->session_id, MyProcPid,
					 c->idx, c->serial, ++record_count);
			r->data = MemoryContextStrdup(TopMemoryContext, buf.data);
			r->len = buf.len;
			r->state = DLX_CREATING;
			send_create(c->idx);
			learn_holder(c->idx, &q, children, n);
		}
		else
			zklock_dlx_rec_forget(c->idx);	/* asked again at the next tick */
		pfree(children);
		pfree(buf.data);
	}
	LWLockRelease(zklock_shared->lock);
	pfree(c);
}

/*
 * Publish the wait of slot idx: list its lock, then create its record.
 * Caller holds the lock.
 */
static void
publish(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	DlxRec	   *r = &zklock_dlx_recs[idx];
	DlxQueue	q;

	if (!wait_queue(idx, &q) || q.node == NULL || q.node[0] == '\0')
		return;					/* no node yet: at the next tick */
	memset(r, 0, sizeof(*r));
	r->serial = slot->serial;
	r->phase = slot->phase;
	r->session_gen = zklock_shared->session_gen;
	r->state = DLX_LISTING;
	zklock_dlx_recs_used++;
	if (zoo_aget_children(zklock_zh, q.base, 0, list_done,
						  zklock_dlx_rec_call(idx, slot->serial)) != ZOK)
		zklock_dlx_rec_forget(idx);
}

/*
 * The waiting backend of slot idx set ZKLOCK_DLX_ bits: publish its wait,
 * or have the next check look for a cycle through it.  Caller holds the
 * lock.
 */
void
zklock_dlx_rec_asked(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	uint8		ask = slot->dlx_ask;
	DlxRec	   *r;

	slot->dlx_ask = 0;
	init_recs();
	r = &zklock_dlx_recs[idx];
	if (r->state != DLX_NONE && r->serial != slot->serial)
		return;					/* the pass deletes the last wait's first */
	if (!zklock_connected || slot->try_only || !slot_publishes(idx) ||
		!zklock_dlx_rec_waiting(idx, slot->serial))
		return;
	if (r->state == DLX_NONE && (ask & (ZKLOCK_DLX_PUBLISH | ZKLOCK_DLX_CHECK)))
		publish(idx);
	else if (r->state == DLX_LIVE && (ask & ZKLOCK_DLX_CHECK))
		r->check_asked = true;
}

/*
 * Completion of the listing of the records at this process's start: delete
 * those of this session made by an earlier worker.
 */
static void
sweep_listed(int rc, const struct String_vector *strings, const void *data)
{
	DlxCall    *c = (DlxCall *) data;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (rc == ZOK && c->session_gen == zklock_shared->session_gen)
	{
		char		ours[64];
		char		mine[64];
		char		dir[ZKLOCK_FULL_PATH_SIZE + 16];
		int			i;

		snprintf(ours, sizeof(ours), "%016llx-",
				 (unsigned long long) zklock_shared->session_id);
		snprintf(mine, sizeof(mine), "%s%d-", ours, MyProcPid);
		zklock_dlx_rec_dir(dir, sizeof(dir));
		for (i = 0; i < strings->count; i++)
		{
			const char *name = strings->data[i];
			char		path[ZKLOCK_FULL_PATH_SIZE + 96];

			if (strncmp(name, ours, strlen(ours)) != 0 ||
				strncmp(name, mine, strlen(mine)) == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, name);
			(void) zklock_deletes_add(path, NULL, false, c->session_gen, 0, 0);
		}
	}
	else if (zklock_rc_retryable(rc))
		swept = false;			/* again at the next pass; a refusal
								 * (another cluster's creator-only ACL)
								 * is not asked again */
	LWLockRelease(zklock_shared->lock);
	pfree(c);
}

/*
 * Once per process, when connected: list the records to delete those an
 * earlier worker of this session left (one getChildren).  Caller holds
 * the lock.
 */
static void
sweep_earlier(void)
{
	char		dir[ZKLOCK_FULL_PATH_SIZE + 16];

	zklock_dlx_rec_dir(dir, sizeof(dir));
	swept = true;
	if (zoo_aget_children(zklock_zh, dir, 0, sweep_listed,
						  zklock_dlx_rec_call(0, 0)) != ZOK)
		swept = false;
}

/*
 * Every pass: the records of waits that ended are deleted (through the
 * pending-delete table, retried for the session's life), those of an
 * earlier session forgotten (gone with it).  Returns whether a waiter
 * whose record is live asked for a check (worker/deadlock_check.c starts
 * it).  Caller holds the lock.
 */
bool
zklock_dlx_rec_pass(void)
{
	bool		asked = false;
	int			i;

	if (!swept && zklock_connected)
		sweep_earlier();
	if (zklock_dlx_recs_used == 0)
		return false;
	for (i = 0; i < zklock_shared->nslots; i++)
	{
		DlxRec	   *r = &zklock_dlx_recs[i];

		if (r->state == DLX_NONE)
			continue;
		if (r->session_gen != zklock_shared->session_gen)
			zklock_dlx_rec_forget(i);
		else if (r->state == DLX_LIVE &&
				 (!zklock_dlx_rec_waiting(i, r->serial) ||
				  zklock_shared->slots[i].phase != r->phase))
		{
			/* a wait that ended, or a lease that went on to its next step
			 * (published again at its next tick) */
			char		path[ZKLOCK_FULL_PATH_SIZE + 96];

			zklock_dlx_rec_path(r->name, path, sizeof(path));
			(void) zklock_deletes_add(path, NULL, false, r->session_gen, 0, 0);
			zklock_dlx_rec_forget(i);
		}
		else if (r->state == DLX_LIVE && r->check_asked)
			asked = true;
	}
	return asked;
}
