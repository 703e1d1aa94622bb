/*-------------------------------------------------------------------------
 *
 * core/deadlock_rules.c
 *	  Pure rules of the deadlock detector (see core/deadlock_rules.h and
 *	  backend/deadlock.c, which gathers the edges and acts on the answer).
 *
 * The graph.  A node is a process (pid); an edge waiter -> holder says
 * that waiter cannot go on before holder lets go.  Every edge is an AND
 * wait (the waiter needs every one of its blockers gone), so a cycle of
 * edges that all stand at one instant is a deadlock: none of its members
 * can move before another does.  That is why an edge is drawn only where
 * it surely holds (a wait that any one of several holders could end draws
 * none): a missing edge only misses a deadlock, a wrong one would fail a
 * session for nothing.
 *
 * The edges of a zklock wait (zklock_queue_blocks).  A ZooKeeper queue is
 * never reordered: a node leaves it only when its request releases it or
 * gives up.  So a waiter waits for every node ahead of it that keeps it
 * out by Curator's rule for its recipe, whether that node's request holds
 * or itself waits: a mutex waiter and a writer for every node ahead (a
 * writer for read and write nodes alike), a reader for each write node
 * ahead (Curator's reader cannot pass one), an acquirer of a lease for
 * every node ahead of its own in the P/locks gate.  A semaphore of one
 * lease also waits for every lease held, at any step (none can be granted
 * before all of them are gone); a semaphore of more lease waits for any
 * one holder, an OR wait, and gives no edge at its lease step.  A waiter
 * whose node's name is not known yet (its create not answered) will stand
 * behind every node of the queue, but its node may also exist already
 * (a reply lost), so it gets edges to holders only, which are ahead of
 * any node that waits.  Nodes of the mutex and of the read/write lock on
 * one path are two queues as zklock reads them: no edge between them.
 *
 * The search.  Only cycles through the checking process count (each
 * waiter checks for itself, as PostgreSQL's detector does): a
 * breadth-first walk from it, so the cycle found is a shortest one, and
 * the same edge list always gives the same cycle.
 *
 * The victim rule.  The process that ran the check and found the cycle
 * is its victim, if the cycle still stands when it looks again with the
 * shared table's lock held exclusively: every zklock edge of it is still
 * the same waiting request behind the same hold (zklock_cycle_stands).
 * In the same critical section the victim withdraws its own wait, so its
 * edge is gone for any other member that checks next: two zklock waiters
 * of one cycle that find it at the same time cannot both fail, because
 * the second one's re-check finds the first one's wait withdrawn.
 *
 * Across clusters (worker/deadlock_check.c).  The processes are the wait
 * records read from ZooKeeper, numbered by their place in the listing;
 * record i waits for record j when a node ahead of i's waiting node that
 * blocks it is one of the nodes j's backend holds, or j's own waiting
 * node (zklock_record_edges).  The same search finds a cycle back to the checker's record; a cycle whose
 * records were all published by one session is left to that cluster's
 * own detector (zklock_cycle_crosses), so that one cycle never gets a
 * victim from each detector.
 *
 *-------------------------------------------------------------------------
 */
#include <stddef.h>
#include <string.h>

#include "core/deadlock_rules.h"

/*
 * Does a waiter in mode waiting wait for a node ahead of it (or, for a
 * lease, a lease held), of the same path, in mode held?  Both come from
 * the recipes' kinds; only modes of one recipe family meet (a mutex and a
 * read/write lock on one path are two queues as zklock reads them, so no
 * edge between them).
 */
bool
zklock_deadlock_blocks(ZklockDeadlockMode waiting, ZklockDeadlockMode held)
{
	switch (waiting)
	{
		case ZKDL_MUTEX:
			return held == ZKDL_MUTEX;
		case ZKDL_READ:
			/* Curator's reader waits for the writers ahead of it only */
			return held == ZKDL_WRITE;
		case ZKDL_WRITE:
			/* a writer waits for every node ahead, read or write */
			return held == ZKDL_READ || held == ZKDL_WRITE;
		case ZKDL_LEASE_ONE:
			/* at most one lease: every lease held must go first */
			return held == ZKDL_LEASE_ONE || held == ZKDL_LEASE;
		case ZKDL_LEASE:
		case ZKDL_NONE:
			return false;
	}
	return false;
}

/*
 * Can a waiter in mode waiting be blocked by any node at all (is its wait
 * worth a deadlock check)?  A lease of a larger semaphore is, at its
 * P/locks step.
 */
bool
zklock_deadlock_waits(ZklockDeadlockMode waiting)
{
	return waiting == ZKDL_LEASE ||
		zklock_deadlock_blocks(waiting, ZKDL_MUTEX) ||
		zklock_deadlock_blocks(waiting, ZKDL_READ) ||
		zklock_deadlock_blocks(waiting, ZKDL_WRITE) ||
		zklock_deadlock_blocks(waiting, ZKDL_LEASE_ONE) ||
		zklock_deadlock_blocks(waiting, ZKDL_LEASE);
}

/*
 * Does the waiting request's node waiter wait for the node other, of
 * another process, in the same lock path (see the banner)?  Both in the
 * same queue; other's request may hold or wait.
 */
bool
zklock_queue_blocks(const ZklockQueueNode *waiter, const ZklockQueueNode *other)
{
	bool		ahead;

	if (!waiter->waits || waiter->queue != other->queue)
		return false;
	switch (waiter->queue)
	{
		case ZKQ_LEASES:
			/* one lease: every lease held must go first, in any order */
			return waiter->mode == ZKDL_LEASE_ONE && !other->waits &&
				zklock_deadlock_blocks(waiter->mode, other->mode);
		case ZKQ_GATE:
			/* P/locks is a mutex of every acquirer of a lease of P */
			return (waiter->mode == ZKDL_LEASE_ONE || waiter->mode == ZKDL_LEASE) &&
				(other->mode == ZKDL_LEASE_ONE || other->mode == ZKDL_LEASE) &&
				waiter->seq >= 0 && other->seq >= 0 && other->seq < waiter->seq;
		case ZKQ_LOCK:
			if (waiter->seq >= 0)
				ahead = other->seq >= 0 && other->seq < waiter->seq;
			else
				ahead = !other->waits;	/* not placed yet: holders only */
			return ahead && zklock_deadlock_blocks(waiter->mode, other->mode);
	}
	return false;
}

/* parent[] of an edge not reached yet, and of one leaving the start */
#define EDGE_UNSEEN		(-2)
#define EDGE_FROM_START	(-1)

/*
 * One step of the walk: the edges on which process from waits, not seen
 * yet, are reached through edge via (EDGE_FROM_START for the start's own)
 * and queued in order.  Returns the first of them that comes back to
 * start, or -1.  A process expanded twice finds all its edges seen.
 */
static int
expand(const ZklockWaitEdge *edges, int nedges, int32_t start, int32_t from,
	   int via, int *parent, int *order, int *nseen)
{
	int			e;

	for (e = 0; e < nedges; e++)
	{
		if (parent[e] != EDGE_UNSEEN || edges[e].waiter != from ||
			edges[e].holder == edges[e].waiter)
			continue;
		parent[e] = via;
		order[(*nseen)++] = e;
		if (edges[e].holder == start)
			return e;
	}
	return -1;
}

/*
 * Look for a cycle of edges that leaves start and comes back to it.
 * Returns its length and puts the indexes of its edges into cycle, in
 * order (the first leaves start, the last comes back to it); 0 when there
 * is none, or when the shortest one has more than maxlen edges.  work must
 * have room for 2 * nedges ints.  Breadth first, so the cycle is a
 * shortest one; the same edges in the same order give the same answer.
 */
int
zklock_wait_cycle(const ZklockWaitEdge *edges, int nedges, int32_t start,
				  int *work, int *cycle, int maxlen)
{
	int		   *parent = work;
	int		   *order = work + nedges;
	int			nseen = 0;
	int			next = 0;
	int			closing;
	int			e;
	int			len;

	for (e = 0; e < nedges; e++)
		parent[e] = EDGE_UNSEEN;

	/* processes are expanded in the order they were reached */
	closing = expand(edges, nedges, start, start, EDGE_FROM_START,
					 parent, order, &nseen);
	while (closing < 0 && next < nseen)
	{
		int			via = order[next++];

		closing = expand(edges, nedges, start, edges[via].holder, via,
						 parent, order, &nseen);
	}
	if (closing < 0)
		return 0;

	len = 0;
	for (e = closing; e != EDGE_FROM_START; e = parent[e])
		len++;
	if (len > maxlen)
		return 0;
	next = len;
	for (e = closing; e != EDGE_FROM_START; e = parent[e])
		cycle[--next] = e;
	return len;
}

/*
 * The victim rule (see the banner): does the cycle (ncycle edges of
 * edges, by index) still stand, as live says of each of its zklock edges
 * now?  Heavyweight edges (no keys) are confirmed by the caller before,
 * from PostgreSQL's lock table.
 */
bool
zklock_cycle_stands(const ZklockWaitEdge *edges, const int *cycle, int ncycle,
					ZklockEdgeLive live, void *arg)
{
	int			i;

	if (ncycle <= 0)
		return false;
	for (i = 0; i < ncycle; i++)
	{
		const ZklockWaitEdge *e = &edges[cycle[i]];

		if (e->wait_key != 0 && !live(e, arg))
			return false;
	}
	return true;
}

/*
 * The edges among wait records: i -> j when a node ahead of record i is
 * held by record j's backend or is j's own waiting node, at most one edge
 * per pair (the first such node).  An edge's wait_key is i and its
 * hold_key the index of that node in i's ahead list, so the caller can
 * name the node the edge rests on; behind_waiting says it is j's waiting
 * node.  Returns the number of edges (at most maxedges).
 */
int
zklock_record_edges(const ZklockWaitRecord *recs, int nrecs,
					ZklockWaitEdge *edges, int maxedges)
{
	int			n = 0;
	int			i;
	int			j;

	for (i = 0; i < nrecs; i++)
	{
		for (j = 0; j < nrecs && n < maxedges; j++)
		{
			int			a;
			int			h;
			int			found = -1;
			bool		waiting = false;

			if (j == i)
				continue;
			for (a = 0; a < recs[i].nahead && found < 0; a++)
			{
				for (h = 0; h < recs[j].nholds && found < 0; h++)
					if (strcmp(recs[i].ahead[a], recs[j].holds[h]) == 0)
						found = a;
				if (found < 0 && recs[j].node != NULL &&
					strcmp(recs[i].ahead[a], recs[j].node) == 0)
				{
					found = a;
					waiting = true;
				}
			}
			if (found < 0)
				continue;
			edges[n].waiter = i;
			edges[n].holder = j;
			edges[n].wait_key = (uint64_t) i;
			edges[n].hold_key = (uint64_t) found;
			edges[n].behind_waiting = waiting;
			n++;
		}
	}
	return n;
}

/*
 * Does the cycle (ncycle edges of edges, by index, over recs) pass through
 * records of more than one session?  A cycle within one session's records
 * is that cluster's own detector's.
 */
bool
zklock_cycle_crosses(const ZklockWaitRecord *recs, const ZklockWaitEdge *edges,
					 const int *cycle, int ncycle)
{
	int			i;

	for (i = 0; i < ncycle; i++)
		if (strcmp(recs[edges[cycle[i]].waiter].session,
				   recs[edges[cycle[0]].waiter].session) != 0)
			return true;
	return false;
}
