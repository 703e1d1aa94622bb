/*-------------------------------------------------------------------------
 *
 * worker/deletes/deletes_int.h
 *	  What deletes.c calls of delete_table.c and no other file of the
 *	  worker calls: recording, finding and freeing an entry of the
 *	  pending-delete table, and the pauses between tries of a delete.
 *	  Only the files of worker/deletes/ include it (test/callgraph.pl
 *	  checks that); the rest of the worker reads deletes.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_DELETES_INT_H
#define ZKLOCK_WORKER_DELETES_INT_H

#include "worker/deletes/deletes.h"

/* pauses between tries of a pending delete (ms) */
#define DELETE_RETRY_MIN_MS		100
#define DELETE_RETRY_BASE_MS	200
#define DELETE_RETRY_MAX_MS		10000

/* worker/deletes/delete_table.c: the entries of the pending-delete table */
extern bool zklock_dtable_record(const char *path, const char *prefix,
								 bool persistent, uint64 gen, int64 czxid,
								 int64 ctime, int *entry);
extern void zklock_dtable_free(int i);
extern DeleteProgress *zklock_dtable_progress_of(int i);
extern int	zklock_dtable_tag_current(const void *tag);
extern int	zklock_dtable_find_persistent(const char *path, const char *prefix,
										  int64 czxid);
extern int	zklock_dtable_find_ephemeral(const char *path);
extern void zklock_dtable_mark_dirty(void);

#endif							/* ZKLOCK_WORKER_DELETES_INT_H */
