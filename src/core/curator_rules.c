/*-------------------------------------------------------------------------
 *
 * core/curator_rules.c
 *		Pure decision functions of the zklock recipe core: the order of a
 *		lock's children, who holds, what to watch, the double barrier's
 *		leave steps, what a failed request must delete, back-off, the
 *		pending-delete table's room, a counter write's fence, a
 *		downgrade's create, LeaderLatch's participants.
 *
 * Everything here is a function of its arguments: no PostgreSQL calls, no
 * ZooKeeper calls, no allocation, no global state.  The rules are those of
 * Apache Curator 5.x and ZooKeeper 3.8 as written down in doc/wire.md; node
 * names must match Curator's byte for byte so that zklock and Curator
 * clients contend for the same locks.
 *
 * Strings compare with strcmp (unsigned bytes).  Java compares UTF-16 code
 * units instead; the two orders differ only between supplementary
 * characters and U+E000..U+FFFF, and ZooKeeper refuses node names with
 * supplementary characters or U+E000..U+F8FF, so for valid names the orders
 * are the same.
 *
 *-------------------------------------------------------------------------
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/curator_rules.h"

static int	compare_by_key(const char *a, const char *b, const char *lock_name,
						   bool rw);
static void sort_names(char **names, int n, const char *lock_name, bool rw);
static void sift_down(char **names, int root, int end, const char *lock_name,
					  bool rw);

/* ----------------------------------------------------------------
 *		Sorting of children
 * ----------------------------------------------------------------
 */

/*
 * Curator's fixForSorting: the part of name after the LAST occurrence of
 * lock_name, or the whole name when lock_name does not occur in it.  For
 * lock nodes that part is the 10-digit sequence the server appended.
 *
 * Occurrences may overlap (Java's lastIndexOf finds the last start); an
 * empty lock_name occurs at the end, so the key is then "".
 */
const char *
zklock_sort_key(const char *name, const char *lock_name)
{
	size_t		llen = strlen(lock_name);
	const char *last = NULL;
	const char *p = name;

	if (llen == 0)
		return name + strlen(name);

	while ((p = strstr(p, lock_name)) != NULL)
	{
		last = p;
		p++;
	}
	return last ? last + llen : name;
}

/*
 * Sort key of a read/write lock child (the read/write lock's fixForSorting):
 * strip through the last "__READ__", then through the last "__WRIT__".
 */
const char *
zklock_rw_sort_key(const char *name)
{
	return zklock_sort_key(zklock_sort_key(name, ZKLOCK_READ_LOCK_NAME),
						   ZKLOCK_WRITE_LOCK_NAME);
}

/*
 * True when lock node next was created right after lock node prev under
 * the same parent: its sequence number (the key after the last lock_name)
 * is prev's plus one.  The server gives every child created under a parent
 * a higher number than any created before it, so no node can sort between
 * them: prev is next's predecessor in the queue for as long as prev
 * exists.  Keys that are not ten plain digits (another naming, or the
 * counter's overflow to negative numbers) never follow.
 */
bool
zklock_seq_follows(const char *prev, const char *next, const char *lock_name)
{
	const char *keys[2];
	long long	seq[2];
	int			k;
	int			i;

	keys[0] = zklock_sort_key(prev, lock_name);
	keys[1] = zklock_sort_key(next, lock_name);
	for (k = 0; k < 2; k++)
	{
		if (strlen(keys[k]) != ZKLOCK_SEQ_DIGITS)
			return false;
		seq[k] = 0;
		for (i = 0; i < ZKLOCK_SEQ_DIGITS; i++)
		{
			if (keys[k][i] < '0' || keys[k][i] > '9')
				return false;
			seq[k] = seq[k] * 10 + (keys[k][i] - '0');
		}
	}
	return seq[1] == seq[0] + 1;
}

/*
 * Order of two children: by sort key, then by full name.
 *
 * The keys are the zero-padded sequence numbers and compare as strings, as
 * in Curator.  After the signed 32-bit counter overflows, the server prints
 * negative numbers ("-000000001", "-2147483648"); '-' sorts before every
 * digit, so they sort first and not numerically.  Curator does the same,
 * and agreeing with Curator on the order matters more than arithmetic.
 * Curator's sort is stable and leaves ties in server order; breaking ties
 * by the full name makes ours deterministic.
 */
static int
compare_by_key(const char *a, const char *b, const char *lock_name, bool rw)
{
	int			c;

	if (rw)
		c = strcmp(zklock_rw_sort_key(a), zklock_rw_sort_key(b));
	else
		c = strcmp(zklock_sort_key(a, lock_name), zklock_sort_key(b, lock_name));
	if (c == 0)
		c = strcmp(a, b);
	return c;
}

/*
 * Heap sort helper: move names[root] down until the max-heap property holds
 * for names[root..end].
 */
static void
sift_down(char **names, int root, int end, const char *lock_name, bool rw)
{
	for (;;)
	{
		int			child = 2 * root + 1;
		char	   *tmp;

		if (child > end)
			break;
		if (child + 1 <= end &&
			compare_by_key(names[child], names[child + 1], lock_name, rw) < 0)
			child++;
		if (compare_by_key(names[root], names[child], lock_name, rw) >= 0)
			break;
		tmp = names[root];
		names[root] = names[child];
		names[child] = tmp;
		root = child;
	}
}

/*
 * Sort names in place.  A heap sort: O(n log n) for long queues of waiters,
 * no allocation, and no need for qsort_r to pass the lock name along.  The
 * order is total (ties broken by the full name), so stability is moot.
 */
static void
sort_names(char **names, int n, const char *lock_name, bool rw)
{
	int			i;

	if (names == NULL || n < 2)
		return;
	for (i = n / 2 - 1; i >= 0; i--)
		sift_down(names, i, n - 1, lock_name, rw);
	for (i = n - 1; i > 0; i--)
	{
		char	   *tmp = names[0];

		names[0] = names[i];
		names[i] = tmp;
		sift_down(names, 0, i - 1, lock_name, rw);
	}
}

/*
 * Sort the children of a lock node into queue order (Curator's
 * getSortedChildren with fixForSorting on lock_name, e.g. "lock-").
 */
void
zklock_sort_children(char **names, int n, const char *lock_name)
{
	sort_names(names, n, lock_name, false);
}

/*
 * Sort the children of a read/write lock node into queue order.
 */
void
zklock_rw_sort_children(char **names, int n)
{
	sort_names(names, n, NULL, true);
}

/*
 * Index of the child named exactly own, or -1.
 */
int
zklock_find_child(char *const *names, int n, const char *own)
{
	int			i;

	if (own == NULL)
		return -1;
	for (i = 0; i < n; i++)
	{
		if (names[i] != NULL && strcmp(names[i], own) == 0)
			return i;
	}
	return -1;
}

/* ----------------------------------------------------------------
 *		Lock decisions
 * ----------------------------------------------------------------
 */

/*
 * Does the owner of node own hold the lock (Curator's
 * StandardLockInternalsDriver.getsTheLock)?  sorted are the children in
 * queue order.  The first max_leases nodes hold; any other node watches the
 * node max_leases places before it, so that one release wakes one waiter.
 * A missing own node means it was deleted (session expiry, or someone
 * deleted it): the caller must create a new one.  max_leases below 1 is
 * taken as 1 (a mutex).
 */
ZklockLockDecision
zklock_lock_decide(char *const *sorted, int n, const char *own, int max_leases)
{
	ZklockLockDecision d;

	if (max_leases < 1)
		max_leases = 1;

	d.own_index = zklock_find_child(sorted, n, own);
	d.watch_index = -1;
	d.lost = (d.own_index < 0);
	d.holds = false;
	d.blockers = 0;

	if (!d.lost)
	{
		d.holds = (d.own_index < max_leases);
		if (!d.holds)
		{
			d.watch_index = d.own_index - max_leases;
			d.blockers = d.own_index - max_leases + 1;
		}
	}
	return d;
}

/*
 * Which of the sorted lock children hold the lock: fill holders with their
 * indexes (in order) and return how many there are (at most n).  This is
 * what a revocation asks (zk_revoke, as Curator's Revoker would be used on
 * each holder's node).
 *
 * A mutex (rw false) is held by its first node.  For a read/write lock
 * (sorted with zklock_rw_sort_children), every node carrying the lowest
 * sequence number holds: the first node, and, when it is a writer that
 * downgraded, its read node, made with the writer's sequence number (its
 * twin sorts on either side of it).  When none of those is a writer, the
 * readers that follow hold too, up to the first writer.
 */
int
zklock_lock_holders(char *const *sorted, int n, bool rw, int *holders)
{
	int			count = 0;
	bool		writer_first = false;
	const char *first_key;
	int			i;

	if (n <= 0)
		return 0;
	holders[count++] = 0;
	if (!rw)
		return count;

	first_key = zklock_rw_sort_key(sorted[0]);
	writer_first = zklock_is_write_node(sorted[0]);
	for (i = 1; i < n && strcmp(zklock_rw_sort_key(sorted[i]), first_key) == 0; i++)
	{
		if (zklock_is_write_node(sorted[i]))
			writer_first = true;
		holders[count++] = i;
	}
	if (writer_first)
		return count;
	for (; i < n && !zklock_is_write_node(sorted[i]); i++)
		holders[count++] = i;
	return count;
}

/*
 * Does the reader owning node own hold the read lock (Curator's
 * InterProcessReadWriteLock readLockPredicate)?  sorted are the children
 * sorted with zklock_rw_sort_children.
 *
 * Walk the children in order, noting the first one whose name contains
 * "__WRIT__"; stop at our own node, which is matched with startsWith and
 * only among the non-writer nodes, as Curator does.  The read lock is held
 * when no writer sorts before us; otherwise we watch that first writer.
 * The "a write holder gets the read lock at once" shortcut (downgrade) is
 * the caller's business: it needs no look at the children.
 */
ZklockLockDecision
zklock_read_decide(char *const *sorted, int n, const char *own)
{
	ZklockLockDecision d;
	int			first_writer = -1;
	int			writers = 0;
	size_t		olen = own ? strlen(own) : 0;
	int			i;

	d.own_index = -1;
	d.watch_index = -1;
	d.holds = false;
	d.lost = true;
	d.blockers = 0;

	if (own == NULL)
		return d;

	for (i = 0; i < n; i++)
	{
		const char *name = sorted[i];

		if (name == NULL)
			continue;
		if (zklock_is_write_node(name))
		{
			if (first_writer < 0)
				first_writer = i;
			writers++;
		}
		else if (strncmp(name, own, olen) == 0)
		{
			d.own_index = i;
			break;
		}
	}

	if (d.own_index < 0)
		return d;

	d.lost = false;
	d.holds = (first_writer < 0 || d.own_index < first_writer);
	if (!d.holds)
	{
		d.watch_index = first_writer;
		d.blockers = writers;	/* only writers keep a reader out */
	}
	return d;
}

/* ----------------------------------------------------------------
 *		Double barrier
 * ----------------------------------------------------------------
 */

/*
 * One round of the double barrier's leave (Curator's
 * DistributedDoubleBarrier.internalLeave).  children are the children of
 * the barrier node as listed (unsorted, "ready" may be among them); the
 * members are the others, ordered as strings.
 *
 *	no members				-> DONE
 *	own missing				-> ERROR_MISSING (the caller reports done instead
 *							   when the session was lost meanwhile)
 *	only own left			-> DELETE_OURS_DONE
 *	own is lowest			-> WATCH_HIGHEST (wait for the others to go)
 *	otherwise				-> DELETE_OURS_WATCH_LOWEST
 *
 * After DELETE_OURS_WATCH_LOWEST our node is gone and must not be counted
 * missing on the next round (Curator's ourNodeShouldExist = false): the
 * caller then passes own = NULL, and gets DONE once at most one member is
 * left, else WATCH_LOWEST.  With own_delete_sent (a delete of own was
 * sent, its reply never came) own missing means that delete was applied:
 * it is treated as own = NULL; own still listed is deleted again.
 *
 * *watch_name (if not NULL) is set to the child to watch with exists, or
 * NULL when there is none; it points into children.
 */
ZklockLeaveAction
zklock_double_barrier_leave_decide(char *const *children, int n,
								   const char *own, bool own_delete_sent,
								   const char **watch_name)
{
	const char *lowest = NULL;
	const char *highest = NULL;
	bool		own_found = false;
	int			members = 0;
	int			i;
	ZklockLeaveAction action;

	for (i = 0; i < n; i++)
	{
		const char *name = children[i];

		if (name == NULL || strcmp(name, ZKLOCK_READY_NODE) == 0)
			continue;
		members++;
		if (own != NULL && strcmp(name, own) == 0)
			own_found = true;
		if (lowest == NULL || strcmp(name, lowest) < 0)
			lowest = name;
		if (highest == NULL || strcmp(name, highest) > 0)
			highest = name;
	}

	if (watch_name)
		*watch_name = NULL;

	if (own != NULL && !own_found && own_delete_sent)
		own = NULL;
	if (members == 0)
		return ZKLOCK_LEAVE_DONE;

	if (own == NULL)
	{
		/* ours was deleted in an earlier round */
		if (members == 1)
			return ZKLOCK_LEAVE_DONE;
		action = ZKLOCK_LEAVE_WATCH_LOWEST;
		if (watch_name)
			*watch_name = lowest;
		return action;
	}

	if (!own_found)
		return ZKLOCK_LEAVE_ERROR_MISSING;
	if (members == 1)
		return ZKLOCK_LEAVE_DELETE_OURS_DONE;

	if (strcmp(own, lowest) == 0)
	{
		action = ZKLOCK_LEAVE_WATCH_HIGHEST;
		if (watch_name)
			*watch_name = highest;
	}
	else
	{
		action = ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST;
		if (watch_name)
			*watch_name = lowest;
	}
	return action;
}

/* ----------------------------------------------------------------
 *		Cleaning up after a request
 * ----------------------------------------------------------------
 */

/*
 * Fill steps with what a request that ends without its lock must delete
 * and return how many there are (at most ZKLOCK_MAX_CLEANUP_STEPS).
 *
 * A node whose name is known is deleted by name.  A node whose create was
 * made with a protection id but whose name never came back (the reply was
 * lost, the worker restarted, the create is still on its way) may exist:
 * every child of its parent that carries the id's prefix is deleted.  The
 * session applies its requests in order, so that listing comes after the
 * create and finds the node if the create made it.  A double barrier
 * member is named by its id alone, so its name is always known.
 */
int
zklock_cleanup_plan(const ZklockCleanupInput *in,
					ZklockCleanupStep steps[ZKLOCK_MAX_CLEANUP_STEPS])
{
	int			n = 0;
	const char *node = in->node ? in->node : "";
	const char *uuid = in->uuid ? in->uuid : "";
	const char *aux_node = in->aux_node ? in->aux_node : "";
	const char *aux_uuid = in->aux_uuid ? in->aux_uuid : "";
	ZklockCleanupParent main_parent = in->lease ? ZKLOCK_CLEANUP_IN_LEASES :
		ZKLOCK_CLEANUP_IN_PATH;

	if (node[0] != '\0')
	{
		if (!in->node_deleted)
		{
			steps[n].parent = main_parent;
			steps[n].by_prefix = false;
			steps[n].name = node;
			steps[n].prefix[0] = '\0';
			n++;
		}
	}
	else if (uuid[0] != '\0' && in->protected_names)
	{
		steps[n].parent = main_parent;
		steps[n].by_prefix = true;
		steps[n].name = NULL;
		zklock_protected_prefix(uuid, steps[n].prefix);
		n++;
	}

	if (in->lease)
	{
		if (aux_node[0] != '\0')
		{
			steps[n].parent = ZKLOCK_CLEANUP_IN_LOCKS;
			steps[n].by_prefix = false;
			steps[n].name = aux_node;
			steps[n].prefix[0] = '\0';
			n++;
		}
		else if (aux_uuid[0] != '\0')
		{
			steps[n].parent = ZKLOCK_CLEANUP_IN_LOCKS;
			steps[n].by_prefix = true;
			steps[n].name = NULL;
			zklock_protected_prefix(aux_uuid, steps[n].prefix);
			n++;
		}
	}
	return n;
}

/*
 * Entries of the pending-delete table: a request owns at most two nodes
 * at once (a lease and its P/locks node), and the table keeps as many
 * again for the nodes of requests that ended without waiting for room.
 */
int
zklock_delete_table_size(int max_requests)
{
	return max_requests * 3;
}

/*
 * May need more entries be taken from a table of size with used taken?
 * A caller that can wait leaves reserve entries free.
 */
bool
zklock_delete_may_add(int used, int size, int need, bool can_wait, int reserve)
{
	int			limit = can_wait ? size - reserve : size;

	if (need <= 0)
		return true;
	return used + need <= limit;
}

/*
 * Exponential back-off: base_ms, 2 * base_ms, 4 * base_ms ... at most
 * cap_ms; attempt 1 is the first retry.
 */
int
zklock_retry_delay_ms(int attempt, int base_ms, int cap_ms)
{
	long		delay = base_ms;
	int			i;

	if (base_ms <= 0)
		return cap_ms > 0 ? cap_ms : 0;
	for (i = 1; i < attempt && delay < cap_ms; i++)
		delay *= 2;
	return (int) (delay < cap_ms ? delay : cap_ms);
}

/*
 * The fence's verdict on one hold of a backend about to write a counter
 * (see the header): only a hold made in the worker's current session, and
 * not lost, lets the write go.  A write sent on that session executes, if
 * at all, before the session ends, so while the hold's nodes exist.
 */
ZklockFenceVerdict
zklock_write_fence(bool lost, uint64_t hold_gen, uint64_t current_gen)
{
	if (lost)
		return ZKLOCK_FENCE_LOST;
	if (hold_gen == 0 || current_gen == 0 || hold_gen != current_gen)
		return ZKLOCK_FENCE_OTHER_SESSION;
	return ZKLOCK_FENCE_PASS;
}

/*
 * May the read node of a downgrade, named with the sequence number seq,
 * be created now?  Only while the write lock it downgrades is held (held:
 * its slot is HELD and not given back) in the worker's current session
 * (the fence's test: made in session hold_gen, the worker's is
 * current_gen, 0 when it has none) by the write node write_node that ends
 * in seq.  A create sent on that session is applied, if at all, while
 * that write node exists, so the read node takes the place the write
 * holder already has; otherwise it would take the place of a write lock
 * the session lost, ahead of whoever holds the lock now.
 */
bool
zklock_downgrade_may_create(bool held, uint64_t hold_gen, uint64_t current_gen,
							const char *write_node, const char *seq)
{
	if (!held || write_node == NULL || seq == NULL || seq[0] == '\0' ||
		zklock_write_fence(false, hold_gen, current_gen) != ZKLOCK_FENCE_PASS)
		return false;
	return zklock_is_write_node(write_node) &&
		strcmp(zklock_rw_sort_key(write_node), seq) == 0;
}

/*
 * Order of the latch participants among children: index of each child
 * containing "latch-" (Curator's getParticipantNodes filter), sorted as
 * Curator sorts them (LockInternals.getSortedChildren with "latch-").
 * Returns how many were written to order (n at most).
 */
int
zklock_latch_participants(char *const *children, int n, int *order)
{
	int			m = 0;
	int			i;
	int			j;

	for (i = 0; i < n; i++)
		if (zklock_is_lock_node(children[i], ZKLOCK_LATCH_NAME))
			order[m++] = i;
	/* insertion sort by sort key, stable: ties keep listing order */
	for (i = 1; i < m; i++)
	{
		int			k = order[i];
		const char *key = zklock_sort_key(children[k], ZKLOCK_LATCH_NAME);

		for (j = i - 1; j >= 0 &&
			 strcmp(zklock_sort_key(children[order[j]], ZKLOCK_LATCH_NAME), key) > 0; j--)
			order[j + 1] = order[j];
		order[j + 1] = k;
	}
	return m;
}
