/*-------------------------------------------------------------------------
 *
 * core/names.c
 *		Pure functions of the recipe core about names: validation of user
 *		paths, Java-style UUIDs, Curator's protected names, and which
 *		recipe a node name belongs to.
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
#include <stdio.h>
#include <string.h>

#include "core/names.h"

static int utf8_decode(const unsigned char *s, size_t len, unsigned int *cp);
static bool bad_code_point(unsigned int cp);
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
 * Curator's own classification of a lock's children, wherever zklock must
 * see a lock's nodes as Curator does (who holds it, who takes part, who a
 * reader waits on): Curator tests String.contains (the read/write lock's
 * predicates, InterProcessMutex.getParticipantNodes), not the name's
 * shape.  zklock_recipe_node_kind is the strict test of a name's shape,
 * for refusing to touch recipe nodes.
 */
bool
zklock_is_read_node(const char *name)
{
	return strstr(name, ZKLOCK_READ_LOCK_NAME) != NULL;
}

/*
 * The path of a recipe's node or directory below the user's path P:
 * "P/sub/name", "P/sub" (name NULL), "P/name" (sub NULL), written into buf
 * of size len.  The one place the sub-paths of a recipe (P/leases,
 * P/locks, P/ready) are put together.  Returns what snprintf returns.
 */
int
zklock_recipe_path(char *buf, size_t len, const char *path, const char *sub,
				   const char *name)
{
	if (sub != NULL && name != NULL)
		return snprintf(buf, len, "%s/%s/%s", path, sub, name);
	if (sub != NULL)
		return snprintf(buf, len, "%s/%s", path, sub);
	if (name != NULL)
		return snprintf(buf, len, "%s/%s", path, name);
	return snprintf(buf, len, "%s", path);
}

/*
 * A write lock node, by Curator's test (see zklock_is_read_node).
 */
bool
zklock_is_write_node(const char *name)
{
	return strstr(name, ZKLOCK_WRITE_LOCK_NAME) != NULL;
}

/*
 * A node of a lock whose nodes are named lock_name, by Curator's test (see
 * zklock_is_read_node).
 */
bool
zklock_is_lock_node(const char *name, const char *lock_name)
{
	return strstr(name, lock_name) != NULL;
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
 *		Ghost nodes
 * ----------------------------------------------------------------
 */

/*
 * Copy the protection id of name into uuid (37 bytes) when name is a
 * protected name, "_c_<uuid>-...", and return true; else false.
 */
static bool
protection_id_of(const char *name, char *uuid)
{
	if (strncmp(name, ZKLOCK_PROTECTED_PREFIX, 3) != 0 ||
		bounded_len(name, ZKLOCK_PROTECTED_PREFIX_LEN) < ZKLOCK_PROTECTED_PREFIX_LEN ||
		name[ZKLOCK_PROTECTED_PREFIX_LEN - 1] != '-')
		return false;
	memcpy(uuid, name + 3, ZKLOCK_UUID_LEN);
	uuid[ZKLOCK_UUID_LEN] = '\0';
	return zklock_is_uuid(uuid);
}

/*
 * qsort/bsearch order of live ids: by protection id.
 */
static int
live_id_cmp(const void *a, const void *b)
{
	return strcmp(((const ZklockLiveId *) a)->uuid,
				  ((const ZklockLiveId *) b)->uuid);
}

/*
 * Which children of a listing are ghosts: nodes that carry the protection
 * prefix of one of this client's live requests (live, nlive entries: a
 * request's protection id and the name of its node under this parent when
 * known) but are not that request's node.  Such a node was made by a create
 * of the request whose reply never came (sent on an older connection, or
 * by an earlier worker), applied after the request had found or made its
 * node: nobody knows it, and sorting first it would block the lock for the
 * life of the session.
 *
 * An id whose node is not known yet (node NULL or "": a create with the id
 * may be in flight or in doubt, and its node may be the one the request
 * adopts) keeps every child that carries it; so does an id any of whose
 * entries names no node.  Children without a protection prefix, or whose
 * id is no live request's (other clients' nodes, Curator's), are never
 * ghosts.
 *
 * Writes the indexes of the ghosts into ghosts (room for n) in listing
 * order and returns how many there are.  Sorts live in place; each child's
 * id is taken from its name once and looked up by binary search, so the
 * cost is O(n log nlive + nlive log nlive).
 */
int
zklock_find_ghosts(char *const *children, int n, ZklockLiveId *live,
				   int nlive, int *ghosts)
{
	int			nghosts = 0;
	int			i;

	if (n <= 0 || nlive <= 0)
		return 0;
	qsort(live, (size_t) nlive, sizeof(ZklockLiveId), live_id_cmp);
	for (i = 0; i < n; i++)
	{
		char		uuid[ZKLOCK_UUID_LEN + 1];
		ZklockLiveId key;
		const ZklockLiveId *hit;
		int			lo;
		int			hi;
		int			k;
		bool		keep = false;

		if (children[i] == NULL || !protection_id_of(children[i], uuid))
			continue;
		key.uuid = uuid;
		key.node = NULL;
		hit = bsearch(&key, live, (size_t) nlive, sizeof(ZklockLiveId), live_id_cmp);
		if (hit == NULL)
			continue;			/* not an id of ours */
		/* every entry with this id: a neighbour of the one found */
		lo = hi = (int) (hit - live);
		while (lo > 0 && strcmp(live[lo - 1].uuid, uuid) == 0)
			lo--;
		while (hi + 1 < nlive && strcmp(live[hi + 1].uuid, uuid) == 0)
			hi++;
		for (k = lo; k <= hi && !keep; k++)
			keep = (live[k].node == NULL || live[k].node[0] == '\0' ||
					strcmp(live[k].node, children[i]) == 0);
		if (!keep)
			ghosts[nghosts++] = i;
	}
	return nghosts;
}

/*
 * Is path (len bytes, not necessarily NUL-terminated) the path dir itself,
 * or a path below it?  "/ab" is not below "/a".
 */
bool
zklock_path_is_under(const char *path, size_t len, const char *dir)
{
	size_t		dlen = strlen(dir);

	return len >= dlen && memcmp(path, dir, dlen) == 0 &&
		(len == dlen || path[dlen] == '/');
}
