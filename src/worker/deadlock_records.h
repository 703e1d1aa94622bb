/*-------------------------------------------------------------------------
 *
 * worker/deadlock_records.h
 *	  The wait records of the deadlock detection across clusters
 *	  (worker/deadlock_records.c) as their check reads them: the record's
 *	  format, the worker's memory of each slot's record, and the calls the
 *	  check makes on them.  Its one reader besides deadlock_records.c is
 *	  worker/deadlock_check.c; what the rest of the worker calls is in
 *	  worker/worker.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_DEADLOCK_RECORDS_H
#define ZKLOCK_DEADLOCK_RECORDS_H

#include "common/shmem.h"

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

/* the records, one per slot (NULL before the first is asked for) */
extern DlxRec *zklock_dlx_recs;
extern int	zklock_dlx_recs_used;

extern bool zklock_dlx_rec_pass(void);
extern bool zklock_dlx_rec_waiting(int idx, uint32 serial);
extern void zklock_dlx_rec_dir(char *buf, size_t len);
extern void zklock_dlx_rec_path(const char *name, char *buf, size_t len);
extern void zklock_dlx_rec_forget(int idx);
extern DlxCall *zklock_dlx_rec_call(int idx, uint32 serial);

#endif							/* ZKLOCK_DEADLOCK_RECORDS_H */
