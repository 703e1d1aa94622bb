/*-------------------------------------------------------------------------
 *
 * worker/deferred_log.c
 *	  The worker never writes its log while it holds the shared lock.
 *
 *	  zklock_worker_log_init			install the hook (the worker's start)
 *	  zklock_worker_log_flush			write the messages kept back
 *
 * Writing a log line can block: on a full pipe to the logging collector,
 * on a slow terminal or syslog.  A worker blocked there while holding
 * zklock_shared->lock would hold up every backend that needs the table.
 * So, in the worker, an emit_log_hook keeps back every message below
 * ERROR reported while the lock is held, and zklock_worker_log_flush
 * writes them, in order, once the worker has let go of the lock.  The
 * buffer is bounded: past ZKLOCK_LOG_HELD messages, the rest of a stretch
 * is counted and the count reported.  An ERROR or worse is written at once
 * (the worker exits on it, releasing the lock).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/lwlock.h"
#include "utils/elog.h"
#include "utils/memutils.h"

#include "common/shmem.h"
#include "worker/worker.h"

/* messages kept back at most between two flushes */
#define ZKLOCK_LOG_HELD		64

typedef struct HeldMessage
{
	int			elevel;
	char	   *message;
	char	   *detail;
	char	   *hint;
} HeldMessage;

static emit_log_hook_type prev_emit_log_hook = NULL;
static MemoryContext held_cxt = NULL;
static HeldMessage held[ZKLOCK_LOG_HELD];
static int	nheld = 0;
static int	ndropped = 0;
static bool flushing = false;

static void hold_back_message(ErrorData *edata);

/*
 * emit_log_hook of the worker: a message for the server log, reported
 * while the worker holds the shared lock, is copied and not written now.
 */
static void
hold_back_message(ErrorData *edata)
{
	if (!flushing && edata->output_to_server && edata->elevel < ERROR &&
		zklock_shared != NULL && LWLockHeldByMe(zklock_shared->lock))
	{
		if (nheld < ZKLOCK_LOG_HELD)
		{
			MemoryContext old = MemoryContextSwitchTo(held_cxt);
			HeldMessage *m = &held[nheld++];

			m->elevel = edata->elevel;
			m->message = pstrdup(edata->message ? edata->message : "");
			m->detail = edata->detail ? pstrdup(edata->detail) : NULL;
			m->hint = edata->hint ? pstrdup(edata->hint) : NULL;
			MemoryContextSwitchTo(old);
		}
		else
			ndropped++;
		edata->output_to_server = false;
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * Install the hook (once, at the worker's start).
 */
void
zklock_worker_log_init(void)
{
	held_cxt = AllocSetContextCreate(TopMemoryContext, "zklock held log",
									 ALLOCSET_SMALL_SIZES);
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = hold_back_message;
}

/*
 * Write the messages kept back, in the order they were reported.  Caller
 * does not hold the shared lock.
 */
void
zklock_worker_log_flush(void)
{
	int			i;

	if (nheld == 0 && ndropped == 0)
		return;
	Assert(!LWLockHeldByMe(zklock_shared->lock));
	flushing = true;
	for (i = 0; i < nheld; i++)
	{
		HeldMessage *m = &held[i];

		ereport(m->elevel,
				(errmsg_internal("%s", m->message),
				 m->detail ? errdetail_internal("%s", m->detail) : 0,
				 m->hint ? errhint("%s", m->hint) : 0));
	}
	if (ndropped > 0)
		ereport(LOG,
				(errmsg("zklock: %d log messages of the worker were dropped", ndropped),
				 errdetail("At most %d messages reported while the worker holds its shared lock are kept until it lets go of it.",
						   ZKLOCK_LOG_HELD)));
	flushing = false;
	nheld = 0;
	ndropped = 0;
	MemoryContextReset(held_cxt);
}
