/*-------------------------------------------------------------------------
 *
 * core/value_codec.h
 *	  Curator's value formats (core/value_codec.c).  SharedCount keeps a
 *	  4-byte big-endian int, DistributedAtomicLong an 8-byte big-endian
 *	  long (a missing node or empty data reads as 0).  The decoders return
 *	  false for data of any other length (Curator fails on it too).  Adds
 *	  of one long folded into one write get the results they would have
 *	  got one after the other (zklock_long_fold).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_VALUE_CODEC_H
#define ZKLOCK_VALUE_CODEC_H

#include <stdbool.h>
#include <stdint.h>

extern void zklock_count_encode(int32_t value, unsigned char out[4]);
extern bool zklock_count_decode(const char *data, int len, int32_t *value);
extern void zklock_long_encode(int64_t value, unsigned char out[8]);
extern bool zklock_long_decode(const char *data, int len, int64_t *value);
/* a + b, or false when it does not fit in 64 bits */
extern bool zklock_long_add(int64_t a, int64_t b, int64_t *sum);
/* adds folded into one write: each one's result, those left out */
extern int	zklock_long_fold(int64_t cur, const int64_t *deltas, int n,
							 int64_t *results, bool *applied, int64_t *sum);

#endif							/* ZKLOCK_VALUE_CODEC_H */
