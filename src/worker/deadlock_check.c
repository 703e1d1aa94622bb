/*-------------------------------------------------------------------------
 *
 * worker/deadlock_check.c
 *	  Deadlock detection across clusters (issue 33, item 2), its check:
 *	  the listing and reading of the wait records that
 *	  worker/deadlock_records.c publishes, the search for a cycle through
 *	  each waiter that asked (core/deadlock_rules.c), and the victim of a
 *	  cycle found, confirmed by one multi and failed with 40P01.  The
 *	  detection inside one cluster is backend/deadlock.c.
 *
 * Interface (worker/worker.h), called by worker/dispatch.c only, with
 * zklock_shared->lock held:
 *
 *	zklock_dlx_check_pass()   every pass: the records' pass
 *		(zklock_dlx_rec_pass deletes the records of waits that ended),
 *		then a check for the waits that asked for one.
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
 * it, since that wait is ending.  Exactly one victim per cycle (test 601
 * closes a cycle from both clusters at once, three times over).
 *
 * Why a cycle confirmed is a deadlock.  At the instant the multi is
 * applied, every record of the cycle exists, every node an edge rests on
 * exists, and every member's waiting node exists.  A record says "waits"
 * until its worker deletes it, which may be a little after its wait was
 * granted; but an edge i -> j from a waiter already granted needs the
 * node ahead of i to still exist, and a lock is granted while a node
 * ahead of it exists only by a local handover (worker/locks/handover.c), which
 * grants at memory speed and deletes the released node after, guarded.
 * Following such stale edges around the cycle orders the grants strictly
 * (i was granted after j released, so after j was granted: g_i > g_j >
 * ... > g_i), a contradiction (an edge to j's waiting node orders them
 * the same way: a lock is handed past a node only once its request was
 * granted and released it); so at that instant at least one member still
 * waited, and then each member it waits for still had the node there,
 * held or waited at (a node goes when its request releases it or gives
 * up), and so on around the cycle: every member waited, a deadlock.
 * The residual window: a waiter that gave up (lock_timeout, cancel) less
 * than one round trip before the multi reached the server still has its
 * node and record, so it may be counted; its wait ended anyway, and the
 * victim it makes is a session that was really waiting in a cycle that
 * had just stood.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "core/deadlock_rules.h"
#include "common/shmem.h"
#include "worker/worker.h"
#include "worker/deadlock_records.h"

/* a check whose answers did not all come in this long is dropped (ms) */
#define DLX_CHECK_MAX_MS	30000

/* A check in flight: the records read */
typedef struct DlxCheck
{
	uint32		serial;
	uint64		session_gen;	/* the session it reads in */
	ZklockMonoTime started;		/* monotonic */
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

static DlxCheck *check = NULL;	/* the check in flight */
static uint32 check_serial = 0;

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

	zklock_dlx_rec_dir(dir, sizeof(dir));
	m->idx = idx;
	m->serial = zklock_dlx_recs[idx].serial;
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
			m->victim_data = psprintf("%s%s", zklock_dlx_recs[idx].data,
									  DLX_VICTIM);
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
	if (rc == ZOK && zklock_dlx_rec_waiting(m->idx, m->serial) &&
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
	else if (zklock_rc_retryable(rc) &&
			 zklock_dlx_recs[m->idx].state == DLX_LIVE &&
			 zklock_dlx_recs[m->idx].serial == m->serial)
	{
		char		path[ZKLOCK_FULL_PATH_SIZE + 96];

		/*
		 * Applied or not, we cannot tell: the record may now say "victim"
		 * for a waiter that was not failed, and hide its cycle.  It goes,
		 * and the next tick publishes the wait again.
		 */
		zklock_dlx_rec_path(zklock_dlx_recs[m->idx].name, path, sizeof(path));
		(void) zklock_deletes_add(path, NULL, false,
								  zklock_dlx_recs[m->idx].session_gen, 0, 0);
		zklock_dlx_rec_forget(m->idx);
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

		if (!zklock_dlx_rec_waiting(idx, check->asked_serial[a]) ||
			zklock_dlx_recs[idx].state != DLX_LIVE ||
			zklock_dlx_recs[idx].serial != check->asked_serial[a])
			continue;
		for (i = 0; i < check->n && own < 0; i++)
			if (strcmp(check->names[i], zklock_dlx_recs[idx].name) == 0 &&
				check->data[i] != NULL)
				own = i;
		if (own < 0)
			continue;
		ncycle = zklock_wait_cycle(edges, nedges, own, work, cycle, nedges);
		if (ncycle > 0 && zklock_cycle_crosses(wr, edges, cycle, ncycle))
			send_multi(check, wr, idx, own, edges, cycle, ncycle);
		else if (check->complete)
			zklock_dlx_recs[idx].seen_set = check->set_hash;
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
		DlxRec	   *r = &zklock_dlx_recs[check->asked[a]];

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

		zklock_dlx_rec_dir(dir, sizeof(dir));
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
						 zklock_dlx_rec_call(i, check->serial)) == ZOK)
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
	check->started = zklock_mono_now();
	check->asked = MemoryContextAlloc(TopMemoryContext,
									  sizeof(int) * zklock_dlx_recs_used);
	check->asked_serial = MemoryContextAlloc(TopMemoryContext,
											 sizeof(uint32) * zklock_dlx_recs_used);
	for (i = 0; i < zklock_shared->nslots &&
		 check->nasked < zklock_dlx_recs_used; i++)
		if (zklock_dlx_recs[i].state == DLX_LIVE &&
			zklock_dlx_recs[i].check_asked)
		{
			zklock_dlx_recs[i].check_asked = false;
			check->asked[check->nasked] = i;
			check->asked_serial[check->nasked++] = zklock_dlx_recs[i].serial;
		}
	zklock_dlx_rec_dir(dir, sizeof(dir));
	if (zoo_aget_children(zklock_zh, dir, 0, records_listed,
						  zklock_dlx_rec_call(0, check->serial)) != ZOK)
		check_free();
}

/*
 * Every pass: the records' pass (zklock_dlx_rec_pass), and a check starts
 * when a waiter asked for one and none is in flight.  Caller holds the
 * lock.
 */
void
zklock_dlx_check_pass(void)
{
	bool		asked = zklock_dlx_rec_pass();

	/*
	 * a check of an earlier session gets no more answers, nor one whose
	 * calls a closed handle dropped: the next one starts afresh (late
	 * answers find another serial)
	 */
	if (check != NULL &&
		(check->session_gen != zklock_shared->session_gen ||
		 zklock_mono_now() >= ZKLOCK_MONO_PLUS_MS(check->started, DLX_CHECK_MAX_MS)))
		check_free();
	if (asked && check == NULL && zklock_connected)
		check_start();
}
