/*-------------------------------------------------------------------------
 *
 * core/value_codec.c
 *	  Curator's value formats, byte for byte: SharedCount's 4-byte and
 *	  DistributedAtomicLong's 8-byte big-endian numbers, the sum of an
 *	  add that must fit in 64 bits, and the results of adds folded into
 *	  one write.  Pure functions (libc only), unit-tested in
 *	  test/unit/test_curator_rules.c.
 *
 *	  zklock_count_encode, zklock_count_decode	SharedCount's int
 *	  zklock_long_encode, zklock_long_decode	DistributedAtomicLong's long
 *	  zklock_long_add							a + b, or false on overflow
 *	  zklock_long_fold							adds folded into one write
 *
 *-------------------------------------------------------------------------
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/value_codec.h"

/*
 * SharedCount's value into out: 4 bytes, big-endian (Java's
 * ByteBuffer.putInt).
 */
void
zklock_count_encode(int32_t value, unsigned char out[4])
{
	uint32_t	u = (uint32_t) value;

	out[0] = (unsigned char) (u >> 24);
	out[1] = (unsigned char) (u >> 16);
	out[2] = (unsigned char) (u >> 8);
	out[3] = (unsigned char) u;
}

/*
 * SharedCount's value from a node's data: exactly 4 bytes, or false.
 */
bool
zklock_count_decode(const char *data, int len, int32_t *value)
{
	const unsigned char *d = (const unsigned char *) data;

	if (data == NULL || len != 4)
		return false;
	*value = (int32_t) (((uint32_t) d[0] << 24) | ((uint32_t) d[1] << 16) |
						((uint32_t) d[2] << 8) | (uint32_t) d[3]);
	return true;
}

/*
 * DistributedAtomicLong's value into out: 8 bytes, big-endian (Java's
 * ByteBuffer.putLong).
 */
void
zklock_long_encode(int64_t value, unsigned char out[8])
{
	uint64_t	u = (uint64_t) value;
	int			i;

	for (i = 7; i >= 0; i--)
	{
		out[i] = (unsigned char) u;
		u >>= 8;
	}
}

/*
 * DistributedAtomicLong's value from a node's data: empty (or no data)
 * is 0, as Curator reads it; 8 bytes big-endian; any other length false.
 */
bool
zklock_long_decode(const char *data, int len, int64_t *value)
{
	const unsigned char *d = (const unsigned char *) data;
	uint64_t	u = 0;
	int			i;

	if (data == NULL || len <= 0)
	{
		*value = 0;
		return len <= 0;
	}
	if (len != 8)
		return false;
	for (i = 0; i < 8; i++)
		u = (u << 8) | d[i];
	*value = (int64_t) u;
	return true;
}

/*
 * a + b into *sum, or false when the sum does not fit in 64 bits (Java's
 * long would wrap; SQL refuses instead).
 */
bool
zklock_long_add(int64_t a, int64_t b, int64_t *sum)
{
	if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
		return false;
	*sum = a + b;
	return true;
}

/*
 * Adds folded into one write of a DistributedAtomicLong read at cur
 * (recipes/counter.c): deltas[0..n-1] in the fold's order, as if made one
 * after the other.  An add that fits is applied to the value the adds
 * before it left: applied[i] is true and results[i] the value after it
 * (what that add alone would have returned then).  An add that would
 * leave 64 bits is left out, as if it had failed at its turn: applied[i]
 * false, results[i] untouched, and the adds after it go on from the value
 * before it.  *sum is the value the write leaves (cur when none applies).
 * Returns the number of adds applied.
 */
int
zklock_long_fold(int64_t cur, const int64_t *deltas, int n, int64_t *results,
				 bool *applied, int64_t *sum)
{
	int64_t		v = cur;
	int			done = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		int64_t		next;

		applied[i] = zklock_long_add(v, deltas[i], &next);
		if (!applied[i])
			continue;
		results[i] = next;
		v = next;
		done++;
	}
	*sum = v;
	return done;
}
