/*-------------------------------------------------------------------------
 *
 * zklock_recipe.c
 *		Pure decision functions of the zklock recipe core.
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
 * src/zklock_recipe.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "zklock_recipe.h"

static int	utf8_decode(const unsigned char *s, size_t len, unsigned int *cp);
static bool bad_code_point(unsigned int cp);
static int	compare_by_key(const char *a, const char *b, const char *lock_name,
						   bool rw);
static void sort_names(char **names, int n, const char *lock_name, bool rw);
static void sift_down(char **names, int root, int end, const char *lock_name,
					  bool rw);
static size_t bounded_len(const char *s, size_t max);

/* ----------------------------------------------------------------
 *		Path validation
 * ----------------------------------------------------------------
 */

/*
 * Decode one UTF-8 character from s (len > 0 bytes available).
 *
 * Returns the number of bytes it takes, or 0 when the bytes are not valid
 * UTF-8 (RFC 3629: no overlong forms, no encoded surrogates, nothing above
 * U+10FFFF, no truncated sequences).  Java would turn such bytes into
 * U+FFFD, i.e. a different node name than the one we meant, so they must be
 * refused rather than passed on.
 */
static int
utf8_decode(const unsigned char *s, size_t len, unsigned int *cp)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80;
	unsigned char hi = 0xBF;
	int			need;
	unsigned int v;
	int			i;

	if (c < 0x80)
	{
		*cp = c;
		return 1;
	}
	if (c >= 0xC2 && c <= 0xDF)
	{
		need = 1;
		v = c & 0x1F;
	}
	else if (c >= 0xE0 && c <= 0xEF)
	{
		need = 2;
		v = c & 0x0F;
		if (c == 0xE0)
			lo = 0xA0;			/* overlong below U+0800 */
		else if (c == 0xED)
			hi = 0x9F;			/* U+D800..U+DFFF surrogates */
	}
	else if (c >= 0xF0 && c <= 0xF4)
	{
		need = 3;
		v = c & 0x07;
		if (c == 0xF0)
			lo = 0x90;			/* overlong below U+10000 */
		else if (c == 0xF4)
			hi = 0x8F;			/* above U+10FFFF */
	}
	else
		return 0;				/* continuation byte, C0, C1, F5..FF */

	if ((size_t) need >= len)
		return 0;				/* truncated */

	for (i = 1; i <= need; i++)
	{
		unsigned char b = s[i];

		/* only the second byte has the narrowed range */
		if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
			return 0;
		v = (v << 6) | (b & 0x3F);
	}
	*cp = v;
	return need + 1;
}

/*
 * Is cp a character ZooKeeper's PathUtils.validatePath refuses?
 *
 * ZooKeeper checks Java chars (UTF-16 code units): U+0000, U+0001..U+001F,
 * U+007F..U+009F, U+D800..U+F8FF and U+FFF0..U+FFFF.  A character above
 * U+FFFF reaches Java as a surrogate pair (U+D800..U+DFFF), which falls in
 * the refused range, so every supplementary character is refused too.
 */
static bool
bad_code_point(unsigned int cp)
{
	if (cp <= 0x1F)
		return true;
	if (cp >= 0x7F && cp <= 0x9F)
		return true;
	if (cp >= 0xD800 && cp <= 0xF8FF)
		return true;
	if (cp >= 0xFFF0)
		return true;
	return false;
}

/*
 * Validate a lock path before anything is sent to ZooKeeper.
 *
 * The checks and their order follow ZooKeeper's PathUtils.validatePath
 * (empty, leading slash, root, trailing slash, then a left-to-right scan
 * for empty components, "." and ".." components and refused characters),
 * with the additions that the path must be valid UTF-8, at most maxlen
 * bytes, not the root, and not inside the reserved "/zookeeper" subtree.
 * The first problem found is reported, and *bad_offset says where: 0 for
 * an empty path, a missing leading slash or the root, maxlen (the first
 * byte too many) for a path that is too long, len - 1 for a trailing slash,
 * the second '/' of "//", the first byte of a "." or ".." component, the
 * first byte of a refused character or invalid UTF-8 sequence, and 1 for
 * "/zookeeper".
 */
ZklockPathError
zklock_validate_path(const char *path, size_t len, size_t maxlen,
					 size_t *bad_offset)
{
	const unsigned char *p = (const unsigned char *) path;
	size_t		off = 0;
	ZklockPathError err = ZKLOCK_PATH_OK;
	size_t		i;
	size_t		comp_start;

	if (len == 0)
		err = ZKLOCK_PATH_EMPTY;
	else if (len > maxlen)
	{
		err = ZKLOCK_PATH_TOO_LONG;
		off = maxlen;
	}
	else if (p[0] != '/')
		err = ZKLOCK_PATH_NO_LEADING_SLASH;
	else if (len == 1)
		err = ZKLOCK_PATH_ROOT;
	else if (p[len - 1] == '/')
	{
		err = ZKLOCK_PATH_TRAILING_SLASH;
		off = len - 1;
	}

	if (err != ZKLOCK_PATH_OK)
	{
		if (bad_offset)
			*bad_offset = off;
		return err;
	}

	/*
	 * Scan the components.  '/' and '.' are ASCII and never part of a
	 * multibyte UTF-8 sequence, so they can be checked byte-wise.
	 */
	comp_start = 1;
	i = 1;
	while (i <= len)
	{
		if (i == len || p[i] == '/')
		{
			size_t		clen = i - comp_start;

			if (clen == 0)
			{
				/* i < len here: a trailing '/' was refused above */
				err = ZKLOCK_PATH_EMPTY_COMPONENT;
				off = i;
				break;
			}
			if ((clen == 1 && p[comp_start] == '.') ||
				(clen == 2 && p[comp_start] == '.' && p[comp_start + 1] == '.'))
			{
				err = ZKLOCK_PATH_DOT_COMPONENT;
				off = comp_start;
				break;
			}
			i++;
			comp_start = i;
		}
		else
		{
			unsigned int cp = 0;
			int			n = utf8_decode(p + i, len - i, &cp);

			if (n == 0)
			{
				err = ZKLOCK_PATH_BAD_ENCODING;
				off = i;
				break;
			}
			if (bad_code_point(cp))
			{
				err = ZKLOCK_PATH_BAD_CHARACTER;
				off = i;
				break;
			}
			i += (size_t) n;
		}
	}

	/* ZooKeeper keeps its own nodes (quotas, config) under /zookeeper */
	if (err == ZKLOCK_PATH_OK && len >= 10 &&
		memcmp(p, "/zookeeper", 10) == 0 && (len == 10 || p[10] == '/'))
	{
		err = ZKLOCK_PATH_RESERVED;
		off = 1;
	}

	if (err != ZKLOCK_PATH_OK && bad_offset)
		*bad_offset = off;
	return err;
}

/*
 * Text for a path error, for use in an ereport() errmsg/errdetail:
 * lower case, no trailing period (PostgreSQL's message style).
 */
const char *
zklock_path_error_message(ZklockPathError err)
{
	switch (err)
	{
		case ZKLOCK_PATH_OK:
			return "path is valid";
		case ZKLOCK_PATH_EMPTY:
			return "path must not be empty";
		case ZKLOCK_PATH_NO_LEADING_SLASH:
			return "path must start with \"/\"";
		case ZKLOCK_PATH_ROOT:
			return "path must name a node below the root \"/\"";
		case ZKLOCK_PATH_TRAILING_SLASH:
			return "path must not end with \"/\"";
		case ZKLOCK_PATH_EMPTY_COMPONENT:
			return "path must not contain an empty component \"//\"";
		case ZKLOCK_PATH_DOT_COMPONENT:
			return "path must not contain \".\" or \"..\" components";
		case ZKLOCK_PATH_BAD_CHARACTER:
			return "path contains a character that ZooKeeper does not allow";
		case ZKLOCK_PATH_BAD_ENCODING:
			return "path is not valid UTF-8";
		case ZKLOCK_PATH_TOO_LONG:
			return "path is too long";
		case ZKLOCK_PATH_RESERVED:
			return "path must not be in ZooKeeper's reserved \"/zookeeper\" subtree";
	}
	return "unknown path error";
}

/* ----------------------------------------------------------------
 *		UUIDs and protected names
 * ----------------------------------------------------------------
 */

/*
 * Format 16 random bytes the way Java's UUID.randomUUID().toString() would:
 * version 4 in the high nibble of byte 6, the IETF variant (10xx) in the
 * high bits of byte 8, lowercase hex, dashed 8-4-4-4-12.  The caller's
 * bytes are not modified.  out must have room for 37 bytes.
 */
void
zklock_format_uuid(const unsigned char bytes[16], char *out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[16];
	int			i;
	int			o = 0;

	memcpy(b, bytes, 16);
	b[6] = (unsigned char) ((b[6] & 0x0F) | 0x40);
	b[8] = (unsigned char) ((b[8] & 0x3F) | 0x80);

	for (i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 0x0F];
	}
	out[o] = '\0';
}

/*
 * Is s exactly a UUID as Java's UUID.toString() prints it: 36 characters,
 * lowercase hex digits with dashes at offsets 8, 13, 18 and 23?
 *
 * The version and variant nibbles are not checked: any UUID Java prints has
 * this shape, and a peer may use other UUID versions for its node names.
 */
bool
zklock_is_uuid(const char *s)
{
	int			i;

	if (s == NULL)
		return false;
	for (i = 0; i < ZKLOCK_UUID_LEN; i++)
	{
		char		c = s[i];

		if (i == 8 || i == 13 || i == 18 || i == 23)
		{
			if (c != '-')
				return false;
		}
		else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;		/* also stops at a NUL */
	}
	return s[ZKLOCK_UUID_LEN] == '\0';
}

/*
 * Does name end with marker followed by exactly ten digits (a Curator
 * sequential node of that marker, protected or not)?
 */
static bool
ends_with_sequence(const char *name, const char *marker)
{
	size_t		len = strlen(name);
	size_t		mlen = strlen(marker);
	size_t		i;

	if (len < mlen + 10)
		return false;
	for (i = len - 10; i < len; i++)
		if (name[i] < '0' || name[i] > '9')
			return false;
	return strncmp(name + len - 10 - mlen, marker, mlen) == 0;
}

/*
 * Classify a node name as one of the recipe nodes that Curator and zklock
 * create inside a lock, semaphore or double barrier, by the rules of
 * doc/wire.md: sequential lock, lease, read and write nodes (with or
 * without the protection prefix), any protected node, and the bare UUID of
 * a double barrier member.  Returns what it is, or NULL.  A barrier is a
 * node the user named, so none of these is ever one.
 */
const char *
zklock_recipe_node_kind(const char *name)
{
	if (name == NULL)
		return NULL;
	if (ends_with_sequence(name, ZKLOCK_READ_LOCK_NAME))
		return "read lock";
	if (ends_with_sequence(name, ZKLOCK_WRITE_LOCK_NAME))
		return "write lock";
	if (ends_with_sequence(name, ZKLOCK_LEASE_NAME))
		return "lease";
	if (ends_with_sequence(name, ZKLOCK_LOCK_NAME))
		return "lock";
	if (strncmp(name, ZKLOCK_PROTECTED_PREFIX, 3) == 0 && strlen(name) > ZKLOCK_PROTECTED_PREFIX_LEN - 1)
	{
		char		uuid[ZKLOCK_UUID_LEN + 1];

		memcpy(uuid, name + 3, ZKLOCK_UUID_LEN);
		uuid[ZKLOCK_UUID_LEN] = '\0';
		if (zklock_is_uuid(uuid) && name[3 + ZKLOCK_UUID_LEN] == '-')
			return "protected node";
	}
	if (zklock_is_uuid(name))
		return "double barrier member";
	return NULL;
}

/*
 * Length of s, but looking at no more than max bytes (C99 has no strnlen).
 */
static size_t
bounded_len(const char *s, size_t max)
{
	size_t		n = 0;

	while (n < max && s[n] != '\0')
		n++;
	return n;
}

/*
 * Write Curator's protection prefix "_c_<uuid>-" into out (>= 41 bytes),
 * NUL-terminated.  It is what a lost create is recognised by.  At most
 * ZKLOCK_UUID_LEN characters of uuid are used.
 */
void
zklock_protected_prefix(const char *uuid, char *out)
{
	size_t		ulen = bounded_len(uuid, ZKLOCK_UUID_LEN);

	memcpy(out, ZKLOCK_PROTECTED_PREFIX, 3);
	memcpy(out + 3, uuid, ulen);
	out[3 + ulen] = '-';
	out[4 + ulen] = '\0';
}

/*
 * Build the node name given to a protected create, "_c_<uuid>-<lock_name>"
 * (the server appends the 10-digit sequence).  Like snprintf: writes at
 * most outlen bytes including the NUL (out may be NULL when outlen is 0)
 * and returns the length the full name has, so a return value >= outlen
 * means it was truncated.
 */
int
zklock_protected_name(const char *uuid, const char *lock_name,
					  char *out, size_t outlen)
{
	char		prefix[ZKLOCK_PROTECTED_PREFIX_LEN + 1];
	size_t		plen;
	size_t		llen = strlen(lock_name);
	size_t		total;
	size_t		ncopy;

	zklock_protected_prefix(uuid, prefix);
	plen = strlen(prefix);
	total = plen + llen;

	if (outlen > 0)
	{
		ncopy = total < outlen - 1 ? total : outlen - 1;
		if (ncopy <= plen)
			memcpy(out, prefix, ncopy);
		else
		{
			memcpy(out, prefix, plen);
			memcpy(out + plen, lock_name, ncopy - plen);
		}
		out[ncopy] = '\0';
	}
	return (int) total;
}

/*
 * Index of the first child whose name starts with prefix, or -1.
 *
 * After a connection loss during a protected create, this finds the node
 * the server may have created for us (Curator's findProtectedNodeInForeground).
 * The children need not be sorted.
 */
int
zklock_find_protected(char *const *children, int n, const char *prefix)
{
	size_t		plen = strlen(prefix);
	int			i;

	for (i = 0; i < n; i++)
	{
		if (children[i] != NULL && strncmp(children[i], prefix, plen) == 0)
			return i;
	}
	return -1;
}

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

	if (!d.lost)
	{
		d.holds = (d.own_index < max_leases);
		if (!d.holds)
			d.watch_index = d.own_index - max_leases;
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
	writer_first = strstr(sorted[0], ZKLOCK_WRITE_LOCK_NAME) != NULL;
	for (i = 1; i < n && strcmp(zklock_rw_sort_key(sorted[i]), first_key) == 0; i++)
	{
		if (strstr(sorted[i], ZKLOCK_WRITE_LOCK_NAME) != NULL)
			writer_first = true;
		holders[count++] = i;
	}
	if (writer_first)
		return count;
	for (; i < n && strstr(sorted[i], ZKLOCK_WRITE_LOCK_NAME) == NULL; i++)
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
	size_t		olen = own ? strlen(own) : 0;
	int			i;

	d.own_index = -1;
	d.watch_index = -1;
	d.holds = false;
	d.lost = true;

	if (own == NULL)
		return d;

	for (i = 0; i < n; i++)
	{
		const char *name = sorted[i];

		if (name == NULL)
			continue;
		if (strstr(name, ZKLOCK_WRITE_LOCK_NAME) != NULL)
		{
			if (first_writer < 0)
				first_writer = i;
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
		d.watch_index = first_writer;
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
