/*-------------------------------------------------------------------------
 *
 * backend/deadlock.c
 *	  Deadlock detection inside one cluster: a cycle of waits among zklock
 *	  locks, or among zklock locks and PostgreSQL's heavyweight locks (row,
 *	  table, advisory), is found by a waiter that has waited
 *	  deadlock_timeout and broken by failing that waiter with 40P01.
 *
 * The design (issue 33, item 1; chosen).  A zklock detector that reads
 * both graphs, run by the waiting backend itself from its wait loop
 * (backend/channel.c, zklock_wait_for_request) once its wait has lasted
 * deadlock_timeout, and again every deadlock_timeout while it still
 * waits.  PostgreSQL's own detector cannot see a wait on a latch, so it
 * can never find a cycle that passes through a zklock wait; the other
 * design (making zklock's holds and waits PostgreSQL lock objects, so
 * that its detector and pg_locks see them) would put a heavyweight lock
 * acquire and release on every zklock acquire, which the fast path must
 * not pay.  Here an acquire granted before deadlock_timeout pays nothing
 * but the wake-up time folded into its wait.
 *
 * Interface (backend/backend.h), called by backend/channel.c only:
 *
 *	zklock_deadlock_search(idx, serial)   no lock held.  Walks the wait-for
 *		graph from this backend's waiting request in slot idx and returns
 *		a cycle back to it, its heavyweight edges confirmed, or NULL.
 *	zklock_deadlock_stands(dl)   caller holds zklock_shared->lock
 *		exclusively: the victim rule's re-check of the cycle's zklock edges
 *		(core/deadlock_rules.c).  The caller withdraws its own request in
 *		the same critical section when it stands.
 *	zklock_deadlock_report(dl)   ereport(ERROR) 40P01 "deadlock detected",
 *		one DETAIL line per edge in PostgreSQL's wording, the queries in
 *		the server log.
 *	zklock_deadlock_free(dl)   free a cycle that did not stand.
 *
 * And, for zk_locks.blocking_pids and zk_blocking_pids (backend/views.c),
 * the same zklock edges drawn for every waiting request of a copy of the
 * table, at any time (not only after deadlock_timeout):
 *
 *	zklock_local_blockers(copy, n, blockers, counts)   no lock held.
 *
 * The walk, from this backend (waiting for zklock path P):
 *
 *	- a process that waits for a zklock lock (a slot of a kind with a
 *	  deadlock mode, NEW or ACTIVE, not a try, not given back) has an edge
 *	  to each other process whose request (HELD, or itself waiting; not a
 *	  try, not given back) has a node of the same path ahead of its own
 *	  that keeps it out (zklock_queue_blocks, core/deadlock_rules.c: a
 *	  reader waits for the write nodes ahead, a writer and a mutex for
 *	  every node ahead, a lease for the P/locks nodes ahead, a semaphore
 *	  of one lease for every lease held).  The order is the nodes'
 *	  sequence numbers, from the slots' node names;
 *	- any other process has the edges pg_blocking_pids() would give it:
 *	  GetBlockerStatusData, each holder of a conflicting mode (hard) and
 *	  each process ahead of it in the lock's wait queue asking for a
 *	  conflicting mode (soft), by lock group leader.  The waits of the
 *	  members of its lock group (parallel workers) count as its own, as
 *	  in PostgreSQL's detector: the leader cannot finish its query before
 *	  they get their locks;
 *	- waits on a Curator client or on another cluster give no edge (the
 *	  holder is not in this cluster's table): such a cycle is not seen
 *	  here.  When this search finds nothing, the wait loop has the worker
 *	  publish the wait and look for a cycle across clusters through
 *	  ZooKeeper (worker/deadlock_records.c, deadlock_check.c).
 *
 * Snapshots, and why a cycle found stood at one instant.  The zklock slots
 * are read under zklock_shared->lock in shared mode, which is released
 * before GetBlockerStatusData takes PostgreSQL's lock partition locks: the
 * backend never holds both families at once (the worker holds the zklock
 * lock for its passes, and must not wait behind PostgreSQL's lock table).
 * A cycle found is confirmed before anyone fails: each heavyweight edge of
 * it is read again from PostgreSQL's lock table, after all of them were
 * read once; then the zklock edges are re-checked under the zklock lock
 * held exclusively (zklock_deadlock_stands).  A zklock edge names its
 * waiting request and the blocking node's request by slot and serial, and
 * keeps the step the waiter was at and the name of the node it rests on: a
 * slot keeps its serial from its claim until it is freed, its node's name
 * from the create's answer until the node is given up, so an edge seen
 * at the first look and again at the re-check (same serials, the waiter
 * still waiting at the same step, the node still there under the same
 * name, still held when the edge needs it held) was there all along.  A
 * heavyweight edge seen at both of its looks was there at
 * the instant between the last first look and the first second look
 * (barring the same waiter leaving the queue and queueing again for the
 * same lock behind the same holder in between), and every zklock edge too:
 * at that instant the whole cycle stood, and a cycle of waits that stands
 * is a deadlock.  Nothing is cached between checks.
 *
 * Exactly one victim.  The waiter that ran the check is the victim, and
 * withdraws its request in the critical section of its re-check, so its edge
 * is gone for every later re-check: of two zklock waiters of one cycle
 * checking at the same time, the second finds the cycle broken.  The withdrawn
 * request is given back by the caller's error path as any wait that ends
 * early, and the worker gives the lock to the next waiter.  A backend waiting
 * for a heavyweight lock of the same cycle runs PostgreSQL's detector, which
 * cannot see the zklock edge: it finds no cycle and fails nobody.  A grant
 * that reaches this backend's slot before the re-check wins: no error.
 *
 * Cost.  Nothing before deadlock_timeout.  Then, per check: one copy of the
 * lock slots under the shared lock, one GetBlockerStatusData per process
 * reached that does not wait for a zklock lock (twice for the edges of a
 * cycle found), and a walk of the edges found.  A waiter behind a holder
 * that waits for nothing reaches one process and one call.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "core/handover_rules.h"
#include "common/shmem.h"
#include "backend/backend.h"

/* most processes one check walks through */
#define DL_MAX_PROCS	1024

/* What the walk keeps of a zklock slot */
typedef struct DlSlot
{
	int			idx;
	uint32		serial;
	int			pid;
	bool		waiting;		/* NEW or ACTIVE: it waits; else HELD */
	ZklockKind	kind;
	ZklockDeadlockMode mode;
	ZklockPhase phase;			/* a lease: its step */
	int			user_path_off;
	char		path[ZKLOCK_FULL_PATH_SIZE];
	char		names[ZKN_COUNT][ZKLOCK_NODE_NAME_SIZE];	/* its nodes' names */
} DlSlot;

/* The most queue nodes a slot has (a lease: its P/locks node, its lease) */
#define DL_MAX_QNODES	2

/* What an edge waits for, for the DETAIL and the re-check */
typedef struct DlEdgeInfo
{
	bool		zk;				/* a zklock wait, else a heavyweight one */
	ZklockKind	kind;			/* zk: the kind waited for */
	char	   *path;			/* zk: the user's path, as stored (UTF-8) */
	ZklockPhase wait_phase;		/* zk: the waiter's step */
	ZklockNodeIndex hold_node;	/* zk: which node of the blocking request */
	bool		hold_waits;		/* zk: its request waited */
	char		hold_name[ZKLOCK_NODE_NAME_SIZE];	/* zk: that node's name */
	LOCKTAG		locktag;		/* heavyweight: the lock waited for */
	LOCKMODE	lockmode;		/* ... and the mode asked */
} DlEdgeInfo;

/* The edges gathered by one walk */
typedef struct DlGraph
{
	ZklockWaitEdge *edges;
	DlEdgeInfo *info;
	int			n;
	int			max;
} DlGraph;

/* A cycle found: its edges in order, the first one this backend's */
struct ZklockDeadlock
{
	int			n;
	ZklockWaitEdge *edges;
	DlEdgeInfo *info;
	int		   *order;			/* 0 .. n - 1: the cycle, for its re-check */
};

/*
 * Fill *out from slot s (index idx) if it takes part in wait-for edges: a
 * wait (NEW or ACTIVE; a try only with tries) or a hold (HELD) of a kind
 * with a deadlock mode, not given back.  Returns whether it does.  Caller
 * holds zklock_shared->lock, or s is a copy taken under it.
 */
static bool
dl_slot_from(const ZklockSlot *s, int idx, bool tries, DlSlot *out)
{
	ZklockDeadlockMode mode;
	bool		waiting;

	if (s->state == ZKS_NEW || s->state == ZKS_ACTIVE)
		waiting = true;
	else if (s->state == ZKS_HELD)
		waiting = false;
	else
		return false;
	mode = zklock_kind_info(s->kind)->deadlock;
	/* a semaphore of one lease waits as a semaphore mutex does */
	if (mode == ZKDL_LEASE && s->args.lease.max_leases == 1)
		mode = ZKDL_LEASE_ONE;
	if (mode == ZKDL_NONE || (waiting && s->try_only && !tries) ||
		zklock_give_back_pending(s))
		return false;
	out->idx = idx;
	out->serial = s->serial;
	out->pid = s->pid;
	out->waiting = waiting;
	out->kind = s->kind;
	out->mode = mode;
	out->phase = s->phase;
	out->user_path_off = s->user_path_off;
	strlcpy(out->path, s->path, sizeof(out->path));
	strlcpy(out->names[ZKN_MAIN], s->nodes[ZKN_MAIN].name,
			sizeof(out->names[ZKN_MAIN]));
	strlcpy(out->names[ZKN_LEASE_LOCK], s->nodes[ZKN_LEASE_LOCK].name,
			sizeof(out->names[ZKN_LEASE_LOCK]));
	return true;
}

/*
 * Copy the slots that take part in wait-for edges (dl_slot_from; waits of
 * a try with tries only).  Takes zklock_shared->lock in shared mode;
 * allocates before.
 */
static DlSlot *
snapshot_slots(bool tries, int *nout)
{
	ZklockShared *sh = zklock_shared;
	DlSlot	   *out = palloc_extended(sizeof(DlSlot) * (Size) sh->nslots,
									  MCXT_ALLOC_HUGE);
	int			n = 0;
	int			i;

	zklock_lock_table(LW_SHARED);
	for (i = 0; i < sh->nslots; i++)
		if (dl_slot_from(&sh->slots[i], i, tries, &out[n]))
			n++;
	LWLockRelease(sh->lock);
	*nout = n;
	return out;
}

/*
 * Add one edge to the graph, growing it as needed.
 */
static void
add_edge(DlGraph *g, int waiter, int holder, uint64 wait_key, uint64 hold_key,
		 const DlEdgeInfo *info)
{
	if (g->n == g->max)
	{
		g->max = g->max == 0 ? 16 : g->max * 2;
		g->edges = g->edges ? repalloc(g->edges, sizeof(ZklockWaitEdge) * g->max) :
			palloc(sizeof(ZklockWaitEdge) * g->max);
		g->info = g->info ? repalloc(g->info, sizeof(DlEdgeInfo) * g->max) :
			palloc(sizeof(DlEdgeInfo) * g->max);
	}
	g->edges[g->n].waiter = waiter;
	g->edges[g->n].holder = holder;
	g->edges[g->n].wait_key = wait_key;
	g->edges[g->n].hold_key = hold_key;
	g->edges[g->n].behind_waiting = info->zk && info->hold_waits;
	g->info[g->n] = *info;
	g->n++;
}

/*
 * The nodes slot s stands with in its path's queues: a lock node, or for a
 * lease its P/locks node while it has one (waiting) and its lease (its
 * request's, held or waited for).  which[] gets the slot's node index of
 * each.  Returns how many.
 */
static int
queue_nodes(const DlSlot *s, ZklockQueueNode *out, ZklockNodeIndex *which)
{
	int			n = 0;
	int			i;

	if (s->mode != ZKDL_LEASE_ONE && s->mode != ZKDL_LEASE)
	{
		out[n].queue = ZKQ_LOCK;
		which[n++] = ZKN_MAIN;
	}
	else
	{
		if (s->waiting && s->names[ZKN_LEASE_LOCK][0] != '\0')
		{
			out[n].queue = ZKQ_GATE;
			which[n++] = ZKN_LEASE_LOCK;
		}
		out[n].queue = ZKQ_LEASES;
		which[n++] = ZKN_MAIN;
	}
	for (i = 0; i < n; i++)
	{
		out[i].mode = s->mode;
		out[i].waits = s->waiting;
		out[i].seq = zklock_node_seq(s->names[which[i]]);
	}
	return n;
}

/*
 * The zklock edges of the waiting slot w: to every other process with a
 * node of the same path that keeps w out, held or waiting
 * (zklock_queue_blocks), one edge per such request.  No lock (a snapshot).
 */
static void
zklock_edges(DlGraph *g, const DlSlot *slots, int nslots, const DlSlot *w)
{
	ZklockQueueNode wn[DL_MAX_QNODES];
	ZklockNodeIndex wwhich[DL_MAX_QNODES];
	int			nw = queue_nodes(w, wn, wwhich);
	DlEdgeInfo	info;
	int			i;

	memset(&info, 0, sizeof(info));
	info.zk = true;
	info.kind = w->kind;
	info.path = pstrdup(w->path + w->user_path_off);
	info.wait_phase = w->phase;
	for (i = 0; i < nslots; i++)
	{
		const DlSlot *h = &slots[i];
		ZklockQueueNode hn[DL_MAX_QNODES];
		ZklockNodeIndex hwhich[DL_MAX_QNODES];
		int			nh;
		int			a;
		int			b;
		int			found = -1;

		if (h->pid == w->pid || strcmp(h->path, w->path) != 0)
			continue;
		nh = queue_nodes(h, hn, hwhich);
		for (a = 0; a < nw && found < 0; a++)
			for (b = 0; b < nh && found < 0; b++)
				if (zklock_queue_blocks(&wn[a], &hn[b]))
					found = b;
		if (found < 0)
			continue;
		info.hold_node = hwhich[found];
		info.hold_waits = hn[found].waits;
		strlcpy(info.hold_name, h->names[hwhich[found]], sizeof(info.hold_name));
		add_edge(g, w->pid, h->pid, ZKLOCK_DL_KEY(w->idx, w->serial),
				 ZKLOCK_DL_KEY(h->idx, h->serial), &info);
	}
}

/*
 * The heavyweight edges of process pid, as pg_blocking_pids() finds its
 * blockers (PostgreSQL's src/backend/utils/adt/lockfuncs.c): the waits of
 * pid and of the members of its lock group, each drawn from pid.
 * GetBlockerStatusData takes every lock partition lock; the caller holds
 * no zklock lock.
 */
static void
heavyweight_edges(DlGraph *g, int pid)
{
	BlockedProcsData *data = GetBlockerStatusData(pid);
	int			i;
	int			j;

	for (i = 0; i < data->nprocs; i++)
	{
		BlockedProcData *bproc = &data->procs[i];
		LockInstanceData *instances = &data->locks[bproc->first_lock];
		int		   *ahead = &data->waiter_pids[bproc->first_waiter];
		LockInstanceData *blocked = NULL;
		LockMethod	method;
		int			conflicts;
		DlEdgeInfo	info;

		for (j = 0; j < bproc->num_locks; j++)
			if (instances[j].pid == bproc->pid)
				blocked = &instances[j];
		if (blocked == NULL)
			continue;
		method = GetLockTagsMethodTable(&blocked->locktag);
		conflicts = method->conflictTab[blocked->waitLockMode];
		memset(&info, 0, sizeof(info));
		info.zk = false;
		info.locktag = blocked->locktag;
		info.lockmode = blocked->waitLockMode;

		for (j = 0; j < bproc->num_locks; j++)
		{
			LockInstanceData *inst = &instances[j];

			if (inst == blocked || inst->leaderPid == blocked->leaderPid ||
				inst->leaderPid == 0)
				continue;
			if ((conflicts & inst->holdMask) == 0)
			{
				/* not held in a conflicting mode: asked for, ahead of pid? */
				bool		is_ahead = false;
				int			k;

				if (inst->waitLockMode == NoLock ||
					(conflicts & LOCKBIT_ON(inst->waitLockMode)) == 0)
					continue;
				for (k = 0; k < bproc->num_waiters && !is_ahead; k++)
					is_ahead = (ahead[k] == inst->pid);
				if (!is_ahead)
					continue;
			}
			add_edge(g, pid, inst->leaderPid, 0, 0, &info);
		}
	}
}

/*
 * Is pid in procs (of n)?  Adds it if not, when there is room.
 */
static bool
seen_pid(int *procs, int *n, int pid)
{
	int			i;

	for (i = 0; i < *n; i++)
		if (procs[i] == pid)
			return true;
	if (*n < DL_MAX_PROCS)
		procs[(*n)++] = pid;
	return false;
}

/*
 * Does a second look at PostgreSQL's lock table still show the heavyweight
 * edge e (same waiter, holder, lock and mode)?  No zklock lock held.
 */
static bool
heavyweight_edge_again(const ZklockWaitEdge *e, const DlEdgeInfo *info)
{
	DlGraph		again;
	int			i;

	memset(&again, 0, sizeof(again));
	heavyweight_edges(&again, e->waiter);
	for (i = 0; i < again.n; i++)
		if (again.edges[i].holder == e->holder &&
			again.info[i].lockmode == info->lockmode &&
			memcmp(&again.info[i].locktag, &info->locktag, sizeof(LOCKTAG)) == 0)
			return true;
	return false;
}

/*
 * Walk the wait-for graph from this backend's request in slot idx (serial)
 * and return a cycle back to it whose heavyweight edges were confirmed by
 * a second look, or NULL.  Takes zklock_shared->lock in shared mode for the
 * snapshot and PostgreSQL's lock partition locks after, never both; the
 * answer is allocated in the caller's memory context.
 */
ZklockDeadlock *
zklock_deadlock_search(int idx, uint32 serial)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt;
	DlSlot	   *slots;
	int			nslots;
	DlGraph		g;
	int		   *procs;
	int			nprocs = 0;
	int			next = 0;
	int		   *work;
	int		   *cycle;
	int			ncycle;
	int			i;
	ZklockDeadlock *dl = NULL;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "zklock deadlock check",
								ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);
	memset(&g, 0, sizeof(g));
	slots = snapshot_slots(false, &nslots);
	procs = palloc(sizeof(int) * DL_MAX_PROCS);

	/* breadth first from this backend, each process reached once */
	(void) seen_pid(procs, &nprocs, MyProcPid);
	while (next < nprocs)
	{
		int			pid = procs[next++];
		const DlSlot *w = NULL;
		int			first = g.n;

		for (i = 0; i < nslots && w == NULL; i++)
			if (slots[i].waiting && slots[i].pid == pid)
				w = &slots[i];
		if (pid == MyProcPid &&
			(w == NULL || w->idx != idx || w->serial != serial))
			break;				/* our own wait is over */
		if (w != NULL)
			zklock_edges(&g, slots, nslots, w);
		else
			heavyweight_edges(&g, pid);
		for (i = first; i < g.n; i++)
			(void) seen_pid(procs, &nprocs, g.edges[i].holder);
		CHECK_FOR_INTERRUPTS();
	}

	work = palloc(sizeof(int) * 2 * Max(g.n, 1));
	cycle = palloc(sizeof(int) * Max(g.n, 1));
	ncycle = zklock_wait_cycle(g.edges, g.n, MyProcPid, work, cycle, g.n);

	/* the second look at each heavyweight edge of the cycle */
	for (i = 0; i < ncycle; i++)
		if (!g.info[cycle[i]].zk &&
			!heavyweight_edge_again(&g.edges[cycle[i]], &g.info[cycle[i]]))
			ncycle = 0;

	MemoryContextSwitchTo(caller);
	if (ncycle > 0)
	{
		dl = palloc(sizeof(ZklockDeadlock));
		dl->n = ncycle;
		dl->edges = palloc(sizeof(ZklockWaitEdge) * ncycle);
		dl->info = palloc(sizeof(DlEdgeInfo) * ncycle);
		dl->order = palloc(sizeof(int) * ncycle);
		for (i = 0; i < ncycle; i++)
		{
			dl->order[i] = i;
			dl->edges[i] = g.edges[cycle[i]];
			dl->info[i] = g.info[cycle[i]];
			if (dl->info[i].zk)
				dl->info[i].path = pstrdup(g.info[cycle[i]].path);
		}
	}
	MemoryContextDelete(cxt);
	return dl;
}

/*
 * Free what zklock_deadlock_search returned.
 */
void
zklock_deadlock_free(ZklockDeadlock *dl)
{
	int			i;

	for (i = 0; i < dl->n; i++)
		if (dl->info[i].zk)
			pfree(dl->info[i].path);
	pfree(dl->edges);
	pfree(dl->info);
	pfree(dl->order);
	pfree(dl);
}

/*
 * Is the zklock edge e of the cycle arg still there: its waiting request
 * still waiting in the same slot with the same serial and at the same
 * step, the blocking request's node still there under the same name in a
 * slot of the same serial (still held, when the edge was drawn to a
 * hold), neither given back?  Caller holds zklock_shared->lock.
 */
static bool
zklock_edge_live(const ZklockWaitEdge *e, void *arg)
{
	const ZklockDeadlock *dl = (const ZklockDeadlock *) arg;
	const DlEdgeInfo *info = &dl->info[e - dl->edges];
	ZklockSlot *w = &zklock_shared->slots[ZKLOCK_DL_KEY_IDX(e->wait_key)];
	ZklockSlot *h = &zklock_shared->slots[ZKLOCK_DL_KEY_IDX(e->hold_key)];

	if (w->serial != ZKLOCK_DL_KEY_SERIAL(e->wait_key) ||
		(w->state != ZKS_NEW && w->state != ZKS_ACTIVE) ||
		w->phase != info->wait_phase || zklock_give_back_pending(w))
		return false;
	if (h->serial != ZKLOCK_DL_KEY_SERIAL(e->hold_key) ||
		zklock_give_back_pending(h) ||
		strcmp(h->nodes[info->hold_node].name, info->hold_name) != 0)
		return false;
	if (info->hold_waits)
		return h->state == ZKS_NEW || h->state == ZKS_ACTIVE ||
			h->state == ZKS_HELD;
	return h->state == ZKS_HELD;
}

/*
 * The victim rule's re-check (core/deadlock_rules.c): does the cycle still
 * stand?  Then this backend is its victim, and the caller withdraws its
 * request before it releases the lock.  Caller holds zklock_shared->lock
 * exclusively.
 */
bool
zklock_deadlock_stands(const ZklockDeadlock *dl)
{
	return zklock_cycle_stands(dl->edges, dl->order, dl->n, zklock_edge_live,
							   (void *) dl);
}

/*
 * What one edge waits for, in PostgreSQL's words for a heavyweight lock
 * ("ShareLock on transaction 789") and ours for a zklock one ("zookeeper
 * lock \"/a\"", "zookeeper read lock \"/a\"").
 */
static void
describe_wait(StringInfo buf, const DlEdgeInfo *info)
{
	if (info->zk)
	{
		const ZklockKindInfo *k = zklock_kind_info(info->kind);

		appendStringInfo(buf, "zookeeper %s%slock \"%s\"",
						 k->deadlock == ZKDL_MUTEX ? "" : k->recipe,
						 k->deadlock == ZKDL_MUTEX ? "" : " ",
						 zklock_text_from_utf8(info->path, strlen(info->path)));
	}
	else
	{
		StringInfoData tag;

		initStringInfo(&tag);
		DescribeLockTag(&tag, &info->locktag);
		appendStringInfo(buf, "%s on %s",
						 GetLockmodeName(info->locktag.locktag_lockmethodid,
										 info->lockmode),
						 tag.data);
		pfree(tag.data);
	}
}

/*
 * Fail this backend, the victim of the cycle dl, as PostgreSQL's
 * DeadLockReport does: 40P01, one DETAIL line per edge, the queries of its
 * members in the server log only.  Its request is already withdrawn.
 */
void
zklock_deadlock_report(const ZklockDeadlock *dl)
{
	StringInfoData client;
	StringInfoData log;
	int			i;

	initStringInfo(&client);
	initStringInfo(&log);
	for (i = 0; i < dl->n; i++)
	{
		if (i > 0)
			appendStringInfoChar(&client, '\n');
		appendStringInfo(&client, "Process %d waits for ", dl->edges[i].waiter);
		describe_wait(&client, &dl->info[i]);
		appendStringInfo(&client, "; blocked by process %d%s.", dl->edges[i].holder,
						 dl->edges[i].behind_waiting ?
						 ", which waits ahead of it in the queue" : "");
	}
	appendBinaryStringInfo(&log, client.data, client.len);
	for (i = 0; i < dl->n; i++)
		appendStringInfo(&log, "\nProcess %d: %s", dl->edges[i].waiter,
						 pgstat_get_backend_current_activity(dl->edges[i].waiter, false));
	pgstat_report_deadlock();
	ereport(ERROR,
			(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
			 errmsg("deadlock detected"),
			 errdetail_internal("%s", client.data),
			 errdetail_log("%s", log.data),
			 errhint("See server log for query details.")));
}

/*
 * Add pid to pids (n of them, in ascending order) unless it is there.
 */
static void
add_pid(int *pids, int *n, int pid)
{
	int			i = *n;

	while (i > 0 && pids[i - 1] > pid)
		i--;
	if (i > 0 && pids[i - 1] == pid)
		return;
	memmove(&pids[i + 1], &pids[i], sizeof(int) * (*n - i));
	pids[i] = pid;
	(*n)++;
}

/*
 * qsort comparator: DlSlots by path.
 */
static int
dl_slot_path_cmp(const void *a, const void *b)
{
	return strcmp(((const DlSlot *) a)->path, ((const DlSlot *) b)->path);
}

/*
 * The pids of the local sessions that keep the waiting slot w out, of the
 * nslots slots of its path: the zklock edges of the detector, and for a
 * lease of a semaphore of more than one lease (an OR wait, which draws no
 * edge) every holder of a lease, any one of whom lets it in.  In ascending
 * order.  No lock (a snapshot).
 */
static int *
path_blockers(const DlSlot *slots, int nslots, const DlSlot *w, int *nout)
{
	DlGraph		g;
	int		   *pids = palloc(sizeof(int) * nslots);
	int			n = 0;
	int			i;

	memset(&g, 0, sizeof(g));
	zklock_edges(&g, slots, nslots, w);
	for (i = 0; i < g.n; i++)
		add_pid(pids, &n, g.edges[i].holder);
	if (w->mode == ZKDL_LEASE && w->phase == ZKP_LEASE)
		for (i = 0; i < nslots; i++)
			if (!slots[i].waiting && slots[i].pid != w->pid &&
				(slots[i].mode == ZKDL_LEASE || slots[i].mode == ZKDL_LEASE_ONE))
				add_pid(pids, &n, slots[i].pid);
	*nout = n;
	return pids;
}

/*
 * zklock_local_blockers(copy, n, blockers, counts): for each of the n slots
 * of copy (copied under zklock_shared->lock), whom it waits behind in this
 * cluster, as pg_blocking_pids() says it for a heavyweight lock: the pids
 * of the other local sessions whose nodes of its path, held or queued
 * ahead of its own, keep it out (path_blockers; a try's wait counts).
 * blockers[i] gets a palloc'd array of counts[i] pids (NULL and 0 for a
 * slot that does not wait for a lock).  No lock held; O(n log n) and the
 * pairs of each path.
 */
void
zklock_local_blockers(const ZklockSlot *copy, int n, int **blockers, int *counts)
{
	DlSlot	   *dl = palloc_extended(sizeof(DlSlot) * (Size) Max(n, 1),
									 MCXT_ALLOC_HUGE);
	int			ndl = 0;
	int			start;
	int			i;

	for (i = 0; i < n; i++)
	{
		blockers[i] = NULL;
		counts[i] = 0;
		if (dl_slot_from(&copy[i], i, true, &dl[ndl]))
			ndl++;
	}
	/* the slots of each path together: a wait meets its own path's only */
	qsort(dl, ndl, sizeof(DlSlot), dl_slot_path_cmp);
	for (start = 0; start < ndl;)
	{
		int			end = start + 1;

		while (end < ndl && strcmp(dl[end].path, dl[start].path) == 0)
			end++;
		for (i = start; i < end; i++)
			if (dl[i].waiting)
				blockers[dl[i].idx] = path_blockers(&dl[start], end - start, &dl[i],
													&counts[dl[i].idx]);
		start = end;
		CHECK_FOR_INTERRUPTS();
	}
	pfree(dl);
}
