/*-------------------------------------------------------------------------
 *
 * worker/waits.c
 *	  Deadlock detection across clusters (issue 33, item 2): the wait
 *	  records a waiter publishes in ZooKeeper once it has waited
 *	  deadlock_timeout, the check that follows them for a cycle, and the
 *	  victim of a cycle found, failed with 40P01.
 *
 * Interface (worker/worker.h), called by worker/dispatch.c only, with
 * zklock_shared->lock held:
 *
 *	zklock_dlx_asked(idx)   the waiting backend of slot idx set
 *		ZKLOCK_DLX_ bits in its slot (backend/channel.c's wait loop: PUBLISH
 *		at its first deadlock_timeout tick when the search inside the
 *		cluster found nothing, CHECK at every later one): take them.
 *	zklock_dlx_pass()   every pass: delete the records of waits that
 *		ended, start a check for the waits that asked for one.
 *
 * The records.  One ephemeral node per published wait, below
 * zklock.namespace + ZKLOCK_WAITS_DIR (a path no SQL call may use,
 * backend/args.c), made with zklock.acl as every zklock node, its parents
 * as containers.  Its name, <session id hex>-<worker pid>-<slot>-<serial>-<n>
 * (n counts this process's records), is never used twice, so a record
 * made again is another node.  A restarted worker goes on with its
 * predecessor's session (zklock_shared keeps it), so its first pass lists
 * the records and deletes those of its session made by another process
 * (sweep_earlier): nothing outlives the wait it was made for.  Its data, text, one "key value" per line:
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
 * The check (cost: 1 + N requests for N records, then one multi when a
 * cycle is found; 1 request when no record was added or removed since
 * each waiter that asked was last checked: nothing_new says why no cycle
 * can have closed).  getChildren of the records' path, getData of each;
 * record i waits for record j when a node ahead of i is one of j's holds
 * or j's own waiting node (core/deadlock_rules.c, zklock_record_edges: a
 * queue is never reordered, so a node ahead that waits keeps i out as
 * surely as one held); a shortest cycle back to
 * the checker's record (zklock_wait_cycle).  A cycle whose records are
 * all this session's is ignored: this cluster's own detector
 * (backend/deadlock.c) handles it, and one cycle must not get a victim
 * from each.  Then one multi confirms it and picks the victim:
 *
 *	check each other record of the cycle at the version read;
 *	setData of the checker's own record at the version read;
 *	check (any version) each node an edge rests on, and each member's own
 *	waiting node.
 *
 * If it succeeds the checker is the victim: its request fails with 40P01
 * (the request layer withdraws its node as any failed wait, so the next
 * waiter gets the lock) and its DETAIL names every member.  Its setData
 * writes its record again with a last line "victim" (and so changes its
 * version): another member of the same cycle that read the record before
 * fails its multi's check of it at the version it read; one that reads
 * it after (the victim's node and record are still there until its
 * worker has acted on the answer) finds it marked and draws no edge from
 * it, since that wait is ending.  Exactly one victim per cycle (test 831
 * closes a cycle from both clusters at once, three times over).
 *
 * Why a cycle confirmed is a deadlock.  At the instant the multi is
 * applied, every record of the cycle exists, every node an edge rests on
 * exists, and every member's waiting node exists.  A record says "waits"
 * until its worker deletes it, which may be a little after its wait was
 * granted; but an edge i -> j from a waiter already granted needs the
 * node ahead of i to still exist, and a lock is granted while a node
 * ahead of it exists only by a local handover (worker/handover.c), which
 * grants at memory speed and deletes the released node after, guarded.
 * Following such stale edges around the cycle orders the grants strictly
 * (i was granted after j released, so after j was granted: g_i > g_j >
 * ... > g_i), a contradiction (an edge to j's waiting node orders them
 * the same way: a lock is handed past a node only once its request was
 * granted and released it); so at that instant at least one member still
 * waited, and then each member it waits for still had the node there,
 * held or waited at (a node goes when its request releases it or gives
 * up), and so on around the cycle: every member waited, a deadlock.  The residual window: a waiter that
 * gave up (lock_timeout, cancel) less than one round trip before the
 * multi reached the server still has its node and record, so it may be
 * counted; its wait ended anyway, and the victim it makes is a session
 * that was really waiting in a cycle that had just stood.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "core/deadlock_rules.h"
#include "core/names.h"
#include "worker/worker.h"

/* a check whose answers did not all come in this long is dropped (ms) */
#define DLX_CHECK_MAX_MS	30000
/* largest record written */
#define DLX_RECORD_MAX	32768
/* the first line of a record: the format's version */
#define DLX_MAGIC		"zklock-wait 1"
/* the last line of a record whose waiter was chosen as a victim */
#define DLX_VICTIM		"victim\n"

typedef enum DlxState
{
	DLX_NONE = 0,				/* no record */
	DLX_LISTING,				/* its lock's getChildren is on its way */
	DLX_CREATING,				/* its create is on its way */
	DLX_LIVE					/* it exists */
} DlxState;

/* The record of slot idx's wait (worker memory, one per slot) */
typedef struct DlxRec
{
	DlxState	state;
	uint32		serial;			/* the slot serial it belongs to */
	ZklockPhase phase;			/* the step of the request it describes */
	uint64		session_gen;	/* made in that session */
	bool		check_asked;	/* its backend asked for a check */
	bool		retried;		/* its create was sent again (NoNode) */
	char		name[64];		/* its node's name */
	uint64		seen_set;		/* the set of records a check found no
								 * cycle through it in (set_hash), 0: none */
	char	   *data;			/* what it says */
	int			len;
} DlxRec;

/* The context of one call: the record, or the check, it belongs to */
typedef struct DlxCall
{
	int			idx;			/* slot, or the data's index in a check */
	uint32		serial;			/* slot serial, or the check's serial */
	uint64		session_gen;
} DlxCall;

/* A check in flight: the records read */
typedef struct DlxCheck
{
	uint32		serial;
	uint64		session_gen;	/* the session it reads in */
	TimestampTz started;
	int			n;
	int			pending;
	char	  **names;
	char	  **data;			/* NULL: gone or unreadable */
	int32	   *versions;
	uint64		set_hash;		/* the names listed (never 0) */
	bool		complete;		/* every record listed was read, or gone */
	int		   *asked;			/* the slots that asked, and their serials */
	uint32	   *asked_serial;
	int			nasked;
} DlxCheck;

/* A multi in flight: its ops and the victim's DETAIL */
typedef struct DlxMulti
{
	int			idx;
	uint32		serial;
	int			nops;
	zoo_op_t   *ops;
	zoo_op_result_t *results;
	char	  **paths;
	char	   *detail;
	char	   *victim_data;	/* the checker's record, marked */
} DlxMulti;

static DlxRec *recs = NULL;
static int	nrecs_used = 0;		/* records not DLX_NONE */
static DlxCheck *check = NULL;	/* the check in flight */
static uint32 check_serial = 0;
static uint32 record_count = 0;
static bool swept = false;		/* an earlier worker's records were looked for */

/*
 * The records' parent: zklock.namespace + ZKLOCK_WAITS_DIR.
 */
static void
records_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", zklock_namespace ? zklock_namespace : "",
			 ZKLOCK_WAITS_DIR);
}

/*
 * The full path of the record named name.
 */
static void
record_path(const char *name, char *buf, size_t len)
{
	records_dir(buf, len);
	strlcat(buf, "/", len);
	strlcat(buf, name, len);
}

/*
 * Worker memory for the records, on first use.
 */
static void
init_recs(void)
{
	if (recs == NULL)
		recs = MemoryContextAllocZero(TopMemoryContext,
									  sizeof(DlxRec) * zklock_shared->nslots);
}

/*
 * Forget the record of slot idx (its node is gone or being deleted).
 */
static void
rec_forget(int idx)
{
	DlxRec	   *r = &recs[idx];

	if (r->state != DLX_NONE)
		nrecs_used--;
	if (r->data)
		pfree(r->data);
	memset(r, 0, sizeof(*r));
}

/*
 * Does slot idx still wait with serial, in the current session?  Caller
 * holds the lock.
 */
static bool
still_waiting(int idx, uint32 serial)
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
static DlxCall *
new_call(int idx, uint32 serial)
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
	return recs != NULL && recs[c->idx].state == state &&
		recs[c->idx].serial == c->serial &&
		recs[c->idx].session_gen == c->session_gen &&
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
	DlxRec	   *r = &recs[idx];
	char		path[ZKLOCK_FULL_PATH_SIZE + 80];
	int			rc;

	record_path(r->name, path, sizeof(path));
	rc = zoo_acreate(zklock_zh, path, r->data, r->len, zklock_node_acl(),
					 ZOO_EPHEMERAL, create_done, new_call(idx, r->serial));
	if (rc != ZOK)
		rec_forget(idx);
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
		DlxRec	   *r = &recs[c->idx];

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
			records_dir(dir, sizeof(dir));
			zklock_create_containers(dir, true);
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
				record_path(r->name, path, sizeof(path));
				(void) zklock_delete_add(path, NULL, false, r->session_gen, 0, 0);
			}
			rec_forget(c->idx);
		}
	}
	else if (rc == ZOK && c->session_gen == zklock_shared->session_gen)
		(void) zklock_delete_add(value, NULL, false, c->session_gen, 0, 0);
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
		zklock_node_path(h, h->nodes[ZKN_MAIN].name, path, sizeof(path));
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
	if (rc == ZOK && still_waiting(c->idx, c->serial) && value != NULL)
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
		DlxCall    *c = new_call(idx, slot->serial);

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
		DlxRec	   *r = &recs[c->idx];
		StringInfoData buf;
		char	  **children;
		int			n = rc == ZOK ? strings->count : 0;
		DlxQueue	q;

		initStringInfo(&buf);
		children = palloc(sizeof(char *) * Max(n, 1));
		if (n > 0)
			memcpy(children, strings->data, sizeof(char *) * n);
		if (rc == ZOK && still_waiting(c->idx, c->serial) &&
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
			rec_forget(c->idx);	/* asked again at the next tick */
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
	DlxRec	   *r = &recs[idx];
	DlxQueue	q;

	if (!wait_queue(idx, &q) || q.node == NULL || q.node[0] == '\0')
		return;					/* no node yet: at the next tick */
	memset(r, 0, sizeof(*r));
	r->serial = slot->serial;
	r->phase = slot->phase;
	r->session_gen = zklock_shared->session_gen;
	r->state = DLX_LISTING;
	nrecs_used++;
	if (zoo_aget_children(zklock_zh, q.base, 0, list_done,
						  new_call(idx, slot->serial)) != ZOK)
		rec_forget(idx);
}

/*
 * The waiting backend of slot idx set ZKLOCK_DLX_ bits: publish its wait,
 * or have the next check look for a cycle through it.  Caller holds the
 * lock.
 */
void
zklock_dlx_asked(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	uint8		ask = slot->dlx_ask;
	DlxRec	   *r;

	slot->dlx_ask = 0;
	init_recs();
	r = &recs[idx];
	if (r->state != DLX_NONE && r->serial != slot->serial)
		return;					/* the pass deletes the last wait's first */
	if (!zklock_connected || slot->try_only || !slot_publishes(idx) ||
		!still_waiting(idx, slot->serial))
		return;
	if (r->state == DLX_NONE && (ask & (ZKLOCK_DLX_PUBLISH | ZKLOCK_DLX_CHECK)))
		publish(idx);
	else if (r->state == DLX_LIVE && (ask & ZKLOCK_DLX_CHECK))
		r->check_asked = true;
}

/*
 * The DETAIL of a cycle, in PostgreSQL's words: one line per member.
 */
static char *
cycle_detail(char **data, const ZklockWaitEdge *edges, const int *cycle,
			 int ncycle)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < ncycle; i++)
	{
		const ZklockWaitEdge *e = &edges[cycle[i]];
		const char *w = data[e->waiter];
		const char *h = data[e->holder];
		char		wc[300],
					hc[300],
					kind[64],
					lock[ZKLOCK_FULL_PATH_SIZE];
		int			wpid = 0,
					hpid = 0;
		const char *p;

		wc[0] = hc[0] = kind[0] = lock[0] = '\0';
		if ((p = strstr(w, "\ncluster ")) != NULL)
			sscanf(p + 9, "%299[^\n]", wc);
		if ((p = strstr(w, "\npid ")) != NULL)
			wpid = atoi(p + 5);
		if ((p = strstr(w, "\nkind ")) != NULL)
			sscanf(p + 6, "%63[^\n]", kind);
		if ((p = strstr(w, "\nlock ")) != NULL)
			strlcpy(lock, p + 6, Min(sizeof(lock), strcspn(p + 6, "\n") + 1));
		if ((p = strstr(h, "\ncluster ")) != NULL)
			sscanf(p + 9, "%299[^\n]", hc);
		if ((p = strstr(h, "\npid ")) != NULL)
			hpid = atoi(p + 5);
		if (i > 0)
			appendStringInfoChar(&buf, '\n');
		appendStringInfo(&buf,
						 "Process %d of cluster %s waits for zookeeper %slock \"%s\"; blocked by process %d of cluster %s%s.",
						 wpid, wc, kind, lock, hpid, hc,
						 e->behind_waiting ? ", which waits ahead of it in the queue" : "");
	}
	return buf.data;
}

/*
 * The lines of a record with key (e.g. "ahead "), as pointers into a copy
 * it makes; *n gets their number.
 */
static const char **
record_lines(const char *data, const char *key, int *n)
{
	char	   *copy = pstrdup(data);
	const char **out = palloc(sizeof(char *) * (strlen(data) / 2 + 1));
	size_t		klen = strlen(key);
	char	   *line;
	char	   *save = NULL;

	*n = 0;
	for (line = strtok_r(copy, "\n", &save); line != NULL;
		 line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, key, klen) == 0)
			out[(*n)++] = line + klen;
	return out;
}

static void multi_done(int rc, const void *data);

/*
 * Free a multi and what it holds.
 */
static void
multi_free(DlxMulti *m)
{
	int			i;

	pfree(m->detail);
	if (m->victim_data)
		pfree(m->victim_data);
	for (i = 0; i < m->nops; i++)
		pfree(m->paths[i]);
	pfree(m->paths);
	pfree(m->ops);
	pfree(m->results);
	pfree(m);
}

/*
 * Confirm the cycle through slot idx's record (own) and make it the
 * victim, in one multi (see the banner).  Caller holds the lock.
 */
static void
send_multi(DlxCheck *ck, const ZklockWaitRecord *wr, int idx, int own,
		   const ZklockWaitEdge *edges, const int *cycle, int ncycle)
{
	DlxMulti   *m = MemoryContextAllocZero(TopMemoryContext, sizeof(DlxMulti));
	const char **node = palloc(sizeof(char *) * ncycle);
	MemoryContext old;
	char		dir[ZKLOCK_FULL_PATH_SIZE + 16];
	int			i;

	/* each member's waiting node, from its record (caller's memory) */
	for (i = 0; i < ncycle; i++)
	{
		int			nnode;
		const char **lines = record_lines(ck->data[edges[cycle[i]].waiter],
										  "node ", &nnode);

		node[i] = nnode == 1 ? lines[0] : NULL;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);

	records_dir(dir, sizeof(dir));
	m->idx = idx;
	m->serial = recs[idx].serial;
	m->ops = palloc0(sizeof(zoo_op_t) * 3 * ncycle);
	m->results = palloc0(sizeof(zoo_op_result_t) * 3 * ncycle);
	m->paths = palloc0(sizeof(char *) * 3 * ncycle);
	m->detail = cycle_detail(ck->data, edges, cycle, ncycle);
	for (i = 0; i < ncycle; i++)
	{
		const ZklockWaitEdge *e = &edges[cycle[i]];
		int			w = e->waiter;

		m->paths[m->nops] = psprintf("%s/%s", dir, ck->names[w]);
		if (w == own)
		{
			m->victim_data = psprintf("%s%s", recs[idx].data, DLX_VICTIM);
			zoo_set_op_init(&m->ops[m->nops], m->paths[m->nops],
							m->victim_data, strlen(m->victim_data),
							ck->versions[w], NULL);
		}
		else
			zoo_check_op_init(&m->ops[m->nops], m->paths[m->nops],
							  ck->versions[w]);
		m->nops++;
		m->paths[m->nops] = pstrdup(wr[w].ahead[e->hold_key]);
		zoo_check_op_init(&m->ops[m->nops], m->paths[m->nops], -1);
		m->nops++;
		if (node[i] != NULL)
		{
			m->paths[m->nops] = pstrdup(node[i]);
			zoo_check_op_init(&m->ops[m->nops], m->paths[m->nops], -1);
			m->nops++;
		}
	}
	MemoryContextSwitchTo(old);
	for (i = 0; i < m->nops; i++)
		m->results[i].err = ZSYSTEMERROR;
	if (zoo_amulti(zklock_zh, m->nops, m->ops, m->results, multi_done, m) != ZOK)
		multi_free(m);
}

/*
 * Completion of a victim's multi: when it was applied, every edge of the
 * cycle stood at that instant; the waiter fails with 40P01.
 */
static void
multi_done(int rc, const void *data)
{
	DlxMulti   *m = (DlxMulti *) data;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (rc == ZOK && still_waiting(m->idx, m->serial) &&
		zklock_reqs[m->idx].serial == m->serial)
	{
		ZklockSlot *slot = &zklock_shared->slots[m->idx];

		ereport(LOG,
				(errmsg("zklock: deadlock across clusters: process %d is the victim (multi of %d operations)",
						slot->pid, m->nops),
				 errdetail_internal("%s", m->detail)));
		strlcpy(slot->errdetail, m->detail, sizeof(slot->errdetail));
		zklock_req_fail(m->idx, ERRCODE_T_R_DEADLOCK_DETECTED, "deadlock detected");
	}
	else if (zklock_rc_retryable(rc) && recs[m->idx].state == DLX_LIVE &&
			 recs[m->idx].serial == m->serial)
	{
		char		path[ZKLOCK_FULL_PATH_SIZE + 96];

		/*
		 * Applied or not, we cannot tell: the record may now say "victim"
		 * for a waiter that was not failed, and hide its cycle.  It goes,
		 * and the next tick publishes the wait again.
		 */
		record_path(recs[m->idx].name, path, sizeof(path));
		(void) zklock_delete_add(path, NULL, false, recs[m->idx].session_gen, 0, 0);
		rec_forget(m->idx);
	}
	else
		ereport(DEBUG1,
				(errmsg("zklock: a deadlock across clusters did not stand: %s",
						zerror(rc))));
	LWLockRelease(zklock_shared->lock);
	multi_free(m);
}

/*
 * Free the check in flight.
 */
static void
check_free(void)
{
	int			i;

	for (i = 0; i < check->n; i++)
	{
		pfree(check->names[i]);
		if (check->data[i])
			pfree(check->data[i]);
	}
	if (check->n > 0)
	{
		pfree(check->names);
		pfree(check->data);
		pfree(check->versions);
	}
	pfree(check->asked);
	pfree(check->asked_serial);
	pfree(check);
	check = NULL;
}

/*
 * Every record is read: look for a cycle through each waiter that asked,
 * and send its multi.  Caller holds the lock.
 */
static void
check_evaluate(void)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "zklock dlx check",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	ZklockWaitRecord *wr = palloc0(sizeof(ZklockWaitRecord) * Max(check->n, 1));
	int			maxedges = check->n * check->n + 1;
	ZklockWaitEdge *edges = palloc(sizeof(ZklockWaitEdge) * maxedges);
	int		   *work = palloc(sizeof(int) * 2 * maxedges);
	int		   *cycle = palloc(sizeof(int) * maxedges);
	int			nedges;
	int			i;
	int			a;

	for (i = 0; i < check->n; i++)
	{
		char	   *dash = strchr(check->names[i], '-');

		wr[i].session = dash ? pnstrdup(check->names[i], dash - check->names[i]) :
			check->names[i];
		if (check->data[i] == NULL ||
			strncmp(check->data[i], DLX_MAGIC "\n", strlen(DLX_MAGIC) + 1) != 0 ||
			strstr(check->data[i], "\n" DLX_VICTIM) != NULL)
			continue;			/* gone, not a record, or a victim's: its
								 * wait is ending, in no edge */
		wr[i].ahead = record_lines(check->data[i], "ahead ", &wr[i].nahead);
		wr[i].holds = record_lines(check->data[i], "hold ", &wr[i].nholds);
		{
			int			nnode;
			const char **node = record_lines(check->data[i], "node ", &nnode);

			wr[i].node = nnode == 1 ? node[0] : NULL;
		}
	}
	nedges = zklock_record_edges(wr, check->n, edges, maxedges);
	ereport(DEBUG1,
			(errmsg("zklock: deadlock check for %d waiter(s): %d request(s), %d wait record(s), %d edge(s)",
					check->nasked, 1 + check->n, check->n, nedges)));

	for (a = 0; a < check->nasked; a++)
	{
		int			idx = check->asked[a];
		int			own = -1;
		int			ncycle;

		if (!still_waiting(idx, check->asked_serial[a]) ||
			recs[idx].state != DLX_LIVE ||
			recs[idx].serial != check->asked_serial[a])
			continue;
		for (i = 0; i < check->n && own < 0; i++)
			if (strcmp(check->names[i], recs[idx].name) == 0 &&
				check->data[i] != NULL)
				own = i;
		if (own < 0)
			continue;
		ncycle = zklock_wait_cycle(edges, nedges, own, work, cycle, nedges);
		if (ncycle > 0 && zklock_cycle_crosses(wr, edges, cycle, ncycle))
			send_multi(check, wr, idx, own, edges, cycle, ncycle);
		else if (check->complete)
			recs[idx].seen_set = check->set_hash;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	check_free();
}

/*
 * Completion of a record's getData in a check.
 */
static void
data_done(int rc, const char *value, int value_len, const struct Stat *stat,
		  const void *data)
{
	DlxCall    *c = (DlxCall *) data;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (check != NULL && check->serial == c->serial)
	{
		if (rc == ZOK && value != NULL && value_len > 0)
		{
			check->data[c->idx] = MemoryContextAlloc(TopMemoryContext, value_len + 1);
			memcpy(check->data[c->idx], value, value_len);
			check->data[c->idx][value_len] = '\0';
			check->versions[c->idx] = stat->version;
		}
		else if (rc != ZNONODE)
			check->complete = false;	/* unread: its edges unknown */
		if (--check->pending == 0)
			check_evaluate();
	}
	LWLockRelease(zklock_shared->lock);
	pfree(c);
}

/*
 * Order two record names (qsort).
 */
static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * The check in flight has listed the records (strings): note the set in
 * check->set_hash, and say whether every waiter that asked was already
 * checked against this very set and found in no cycle.  Then nothing
 * needs reading: a record's edges are fixed when it is written (what it
 * waits behind and what its backend holds; a victim's mark only takes
 * edges away), so a set of records with no cycle through a waiter never
 * gets one without a record added, and record names are never used
 * twice.  Caller holds the lock.
 */
static bool
nothing_new(const struct String_vector *strings)
{
	char	  **sorted = palloc(sizeof(char *) * Max(strings->count, 1));
	uint64		h = 1;
	int			a;
	int			i;

	for (i = 0; i < strings->count; i++)
		sorted[i] = strings->data[i];
	qsort(sorted, strings->count, sizeof(char *), name_cmp);
	for (i = 0; i < strings->count; i++)
		h = hash_bytes_extended((const unsigned char *) sorted[i],
								strlen(sorted[i]) + 1, h);
	pfree(sorted);
	check->set_hash = h == 0 ? 1 : h;
	check->complete = true;
	for (a = 0; a < check->nasked; a++)
	{
		DlxRec	   *r = &recs[check->asked[a]];

		if (r->serial == check->asked_serial[a] &&
			r->seen_set != check->set_hash)
			return false;
	}
	return true;
}

/*
 * Completion of the records' listing in a check: read each, unless nothing
 * was added or removed since every waiter that asked was last checked.
 */
static void
records_listed(int rc, const struct String_vector *strings, const void *data)
{
	DlxCall    *c = (DlxCall *) data;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (check != NULL && check->serial == c->serial)
	{
		int			n = rc == ZOK ? strings->count : 0;
		char		dir[ZKLOCK_FULL_PATH_SIZE + 16];
		int			i;

		records_dir(dir, sizeof(dir));
		if (rc == ZOK && nothing_new(strings))
		{
			ereport(DEBUG1,
					(errmsg("zklock: deadlock check for %d waiter(s): 1 request, no wait record added or removed since their last check",
							check->nasked)));
			check_free();
			LWLockRelease(zklock_shared->lock);
			pfree(c);
			return;
		}
		check->n = n;
		if (n > 0)
		{
			check->names = MemoryContextAllocZero(TopMemoryContext, sizeof(char *) * n);
			check->data = MemoryContextAllocZero(TopMemoryContext, sizeof(char *) * n);
			check->versions = MemoryContextAllocZero(TopMemoryContext, sizeof(int32) * n);
		}
		check->pending = 1;
		for (i = 0; i < n; i++)
		{
			char		path[ZKLOCK_FULL_PATH_SIZE + 96];

			check->names[i] = MemoryContextStrdup(TopMemoryContext, strings->data[i]);
			snprintf(path, sizeof(path), "%s/%s", dir, strings->data[i]);
			if (zoo_aget(zklock_zh, path, 0, data_done,
						 new_call(i, check->serial)) == ZOK)
				check->pending++;
		}
		if (--check->pending == 0)
			check_evaluate();
	}
	LWLockRelease(zklock_shared->lock);
	pfree(c);
}

/*
 * Start a check for every live record whose backend asked for one.
 * Caller holds the lock.
 */
static void
check_start(void)
{
	char		dir[ZKLOCK_FULL_PATH_SIZE + 16];
	int			i;

	check = MemoryContextAllocZero(TopMemoryContext, sizeof(DlxCheck));
	check->serial = ++check_serial;
	check->session_gen = zklock_shared->session_gen;
	check->started = GetCurrentTimestamp();
	check->asked = MemoryContextAlloc(TopMemoryContext, sizeof(int) * nrecs_used);
	check->asked_serial = MemoryContextAlloc(TopMemoryContext, sizeof(uint32) * nrecs_used);
	for (i = 0; i < zklock_shared->nslots && check->nasked < nrecs_used; i++)
		if (recs[i].state == DLX_LIVE && recs[i].check_asked)
		{
			recs[i].check_asked = false;
			check->asked[check->nasked] = i;
			check->asked_serial[check->nasked++] = recs[i].serial;
		}
	records_dir(dir, sizeof(dir));
	if (zoo_aget_children(zklock_zh, dir, 0, records_listed,
						  new_call(0, check->serial)) != ZOK)
		check_free();
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
		records_dir(dir, sizeof(dir));
		for (i = 0; i < strings->count; i++)
		{
			const char *name = strings->data[i];
			char		path[ZKLOCK_FULL_PATH_SIZE + 96];

			if (strncmp(name, ours, strlen(ours)) != 0 ||
				strncmp(name, mine, strlen(mine)) == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, name);
			(void) zklock_delete_add(path, NULL, false, c->session_gen, 0, 0);
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

	records_dir(dir, sizeof(dir));
	swept = true;
	if (zoo_aget_children(zklock_zh, dir, 0, sweep_listed, new_call(0, 0)) != ZOK)
		swept = false;
}

/*
 * Every pass: the records of waits that ended are deleted (through the
 * pending-delete table, retried for the session's life), those of an
 * earlier session forgotten (gone with it); a check starts when a waiter
 * asked for one and none is in flight.  Caller holds the lock.
 */
void
zklock_dlx_pass(void)
{
	bool		asked = false;
	int			i;

	if (!swept && zklock_connected)
		sweep_earlier();
	/*
	 * a check of an earlier session gets no more answers, nor one whose
	 * calls a closed handle dropped: the next one starts afresh (late
	 * answers find another serial)
	 */
	if (check != NULL &&
		(check->session_gen != zklock_shared->session_gen ||
		 TimestampDifferenceExceeds(check->started, GetCurrentTimestamp(),
									DLX_CHECK_MAX_MS)))
		check_free();
	if (nrecs_used == 0)
		return;
	for (i = 0; i < zklock_shared->nslots; i++)
	{
		DlxRec	   *r = &recs[i];

		if (r->state == DLX_NONE)
			continue;
		if (r->session_gen != zklock_shared->session_gen)
			rec_forget(i);
		else if (r->state == DLX_LIVE &&
				 (!still_waiting(i, r->serial) ||
				  zklock_shared->slots[i].phase != r->phase))
		{
			/* a wait that ended, or a lease that went on to its next step
			 * (published again at its next tick) */
			char		path[ZKLOCK_FULL_PATH_SIZE + 96];

			record_path(r->name, path, sizeof(path));
			(void) zklock_delete_add(path, NULL, false, r->session_gen, 0, 0);
			rec_forget(i);
		}
		else if (r->state == DLX_LIVE && r->check_asked)
			asked = true;
	}
	if (asked && check == NULL && zklock_connected)
		check_start();
}
