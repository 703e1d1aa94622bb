/*-------------------------------------------------------------------------
 *
 * backend/cancel_on_loss.c
 *	  zklock.cancel_on_loss: stop the work when a lock is lost.
 *
 * A backend that holds zklock locks with zklock.cancel_on_loss on runs a
 * repeating timer of its own, every LOSS_CHECK_MS on CLOCK_BOOTTIME (a
 * POSIX timer signalling LOSS_SIGNAL, a real-time signal PostgreSQL does
 * not use): PostgreSQL's own timeouts schedule on the wall clock, which a
 * step back would delay.  Its handler, in signal context, reads shared memory without any lock: the
 * lease (one atomic read against the monotonic clock) and the state of
 * each slot this backend holds, copied into a small array the handler can
 * read (watch[]).  When a lock is lost, whether the worker said so or the
 * lease ran out unnoticed (a stalled worker says nothing), and a statement
 * is running, it asks for a query cancel as pg_cancel_backend would.
 *
 * The cancel then fails with PostgreSQL's "canceling statement due to user
 * request" (57014).  zklock makes it its own error: every statement runs
 * with an error context callback of ours (pushed by the ExecutorRun and
 * ProcessUtility hooks, which also count the statements running), and that
 * callback turns the cancel it asked for into SQLSTATE ZK001 naming the
 * path, before any PL/pgSQL handler sees it.  With zklock.cancel_on_loss
 * off the hooks only call through: a statement pays nothing for it.  A procedure can catch it with
 * EXCEPTION WHEN SQLSTATE 'ZK001' (WHEN OTHERS does too; a plain cancel is
 * never caught by WHEN OTHERS).
 *
 * The first cancel of a loss goes to whatever statement runs at the first
 * tick that sees it.  PostgreSQL may drop that cancel: a statement that does
 * no CHECK_FOR_INTERRUPTS after it was asked (a SET, the tail of a short
 * query) ends with it pending, and it is thrown away when the next command
 * is read.  And a PL/pgSQL handler may catch ZK001 and go on.  So the timer
 * does not stop at one: it keeps quiet only while the statements that were
 * running when it asked run (quiet_depth: a cancel is asked only while more
 * statements are running than then), and a statement that starts later is
 * cancelled too once it has run through a whole tick (two ticks in a row
 * see it): each long statement under a lost lock stops, within two ticks
 * of its start, and a short one (the handler's INSERT, zk_release_all) is
 * not hit by a stray second cancel.  A change of the set of locks the
 * backend holds starts over.  An idle session is never cancelled (no
 * statement runs): its COMMIT fails instead.  A cancel of ours that
 * PostgreSQL dropped is forgotten when the next statement starts, so a
 * user's own cancel later stays 57014.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <time.h>

#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/utility.h"

#include "zklock.h"
#include "compat.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "backend/backend.h"

#define LOSS_CHECK_MS	100
#define LOSS_SIGNAL		(SIGRTMIN + 4)
#define LOSS_WATCH_MAX	64

#define ERRCODE_ZKLOCK_LOCK_LOST	MAKE_SQLSTATE('Z','K','0','0','1')

/* a lock the timer handler watches: its slot and the serial we hold */
typedef struct LossWatch
{
	int			slot;
	uint32		serial;
} LossWatch;

static LossWatch watch[LOSS_WATCH_MAX];
static volatile sig_atomic_t watch_n = 0;	/* entries of watch[] in use */
static volatile sig_atomic_t statements_running = 0;
static volatile sig_atomic_t statements_started = 0;	/* wraps; compared only */
static volatile sig_atomic_t cancel_asked = false;	/* our cancel is pending */
static volatile sig_atomic_t cancel_done = false;	/* asked for this set */
static volatile sig_atomic_t quiet_depth = 0;	/* statements running when
												 * last asked, or fewer */
static volatile sig_atomic_t tick_started = 0;	/* statements_started at the
												 * previous tick */

static bool timer_created = false;
static bool timer_armed = false;
static timer_t timer_id;

static ExecutorRun_hook_type prev_executor_run = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;

static bool watched_lock_lost(void);
static void loss_timer_handler(SIGNAL_ARGS);
static void loss_set_timer(long ms);
static void loss_arm_timer(void);
static void loss_error_callback(void *arg);
static void enter_statement(ErrorContextCallback *cb);
static void loss_executor_run(ZKLOCK_EXECUTOR_RUN_PARAMS);
static void loss_process_utility(PlannedStmt *pstmt, const char *queryString,
								 bool readOnlyTree, ProcessUtilityContext context,
								 ParamListInfo params, QueryEnvironment *queryEnv,
								 DestReceiver *dest, QueryCompletion *qc);

/*
 * Is any watched lock lost: the lease ran out (or there is no session), or
 * the worker moved its slot away from HELD?  Reads shared memory without
 * the lock; safe in a signal handler.
 */
static bool
watched_lock_lost(void)
{
	int			n = watch_n;
	int			i;

	if (n == 0)
		return false;
	if (!zklock_lease_valid(zklock_mono_now(), NULL))
		return true;
	for (i = 0; i < n; i++)
	{
		volatile ZklockSlot *slot = &zklock_shared->slots[watch[i].slot];

		if (slot->serial != watch[i].serial || slot->state != ZKS_HELD)
			return true;
	}
	return false;
}

/*
 * The repeating timer, in signal context: ask for a cancel of the running
 * statement when a watched lock is lost, as StatementCancelHandler does.
 * Not while a cancel of ours is pending, nor while only the statements
 * running at the last one asked still run; after the first of this set of
 * locks, only when no statement started since the previous tick (the
 * innermost running one has run through a whole tick).
 */
static void
loss_timer_handler(SIGNAL_ARGS)
{
	int			save_errno = errno;
	int			started = statements_started;
	int			running = statements_running;

	if (zklock_cancel_on_loss && !cancel_asked && running > quiet_depth &&
		(!cancel_done || started == tick_started) &&
		!proc_exit_inprogress && watched_lock_lost())
	{
		cancel_done = true;
		quiet_depth = running;
		cancel_asked = true;
		InterruptPending = true;
		QueryCancelPending = true;
		SetLatch(MyLatch);
	}
	tick_started = started;
	errno = save_errno;
}

/*
 * Set the timer to fire every ms milliseconds (0 stops it).
 */
static void
loss_set_timer(long ms)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = ms / 1000;
	its.it_value.tv_nsec = (ms % 1000) * 1000000L;
	its.it_interval = its.it_value;
	if (timer_settime(timer_id, 0, &its, NULL) != 0)
		elog(WARNING, "zklock: could not set the cancel_on_loss timer: %m");
}

/*
 * Start the timer when this backend holds locks and wants them watched.
 */
static void
loss_arm_timer(void)
{
	if (timer_armed || watch_n == 0 || !zklock_cancel_on_loss)
		return;
	if (!timer_created)
	{
		struct sigevent sev;

		pqsignal(LOSS_SIGNAL, loss_timer_handler);
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_SIGNAL;
		sev.sigev_signo = LOSS_SIGNAL;
		if (timer_create(CLOCK_BOOTTIME, &sev, &timer_id) != 0 &&
			timer_create(CLOCK_MONOTONIC, &sev, &timer_id) != 0)
		{
			elog(WARNING, "zklock: could not create the cancel_on_loss timer: %m");
			return;
		}
		timer_created = true;
	}
	loss_set_timer(LOSS_CHECK_MS);
	timer_armed = true;
}

/*
 * The set of locks this backend holds changed: copy their slots for the
 * handler, and start or stop the timer.  Called by the registry
 * (backend/holds.c) after every change.
 */
void
zklock_loss_watch_update(void)
{
	HASH_SEQ_STATUS seq;
	BackendHold *ll;
	int			n = 0;

	watch_n = 0;				/* the handler sees nothing while we fill */
	if (zklock_backend_holds != NULL)
	{
		hash_seq_init(&seq, zklock_backend_holds);
		while ((ll = hash_seq_search(&seq)) != NULL)
		{
			if (n < LOSS_WATCH_MAX)
			{
				watch[n].slot = ll->slot;
				watch[n].serial = ll->serial;
				n++;
			}
		}
	}
	cancel_done = false;
	quiet_depth = 0;
	watch_n = n;
	if (n == 0 && timer_armed)
	{
		loss_set_timer(0);
		timer_armed = false;
	}
	else
		loss_arm_timer();
}

/*
 * Error context callback of every statement: the cancel we asked for
 * becomes our own error, naming the lost lock.
 */
static void
loss_error_callback(void *arg)
{
	HASH_SEQ_STATUS seq;
	BackendHold *ll;
	const char *path = NULL;
	bool		lease_ok;

	if (!cancel_asked || geterrcode() != ERRCODE_QUERY_CANCELED ||
		zklock_backend_holds == NULL)
		return;
	cancel_asked = false;

	/* the lost lock: one the worker lost, else any (the lease ran out) */
	lease_ok = zklock_lease_valid(zklock_mono_now(), NULL);
	hash_seq_init(&seq, zklock_backend_holds);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		volatile ZklockSlot *slot = &zklock_shared->slots[ll->slot];
		bool		lost = slot->serial != ll->serial || slot->state != ZKS_HELD;

		if (lost || (!lease_ok && path == NULL))
			path = ll->key.path;
		if (lost)
		{
			hash_seq_term(&seq);
			break;
		}
	}
	if (path == NULL)
		return;
	if (zklock_namespace && strncmp(path, zklock_namespace, strlen(zklock_namespace)) == 0)
		path += strlen(zklock_namespace);
	errcode(ERRCODE_ZKLOCK_LOCK_LOST);
	errmsg("zookeeper lock \"%s\" was lost", path);
	errdetail(lease_ok ?
			  "The zklock worker found the lock gone; the statement was cancelled because zklock.cancel_on_loss is on." :
			  "The zklock worker's ZooKeeper session is no longer proven alive by the leader (its lease ran out); the statement was cancelled because zklock.cancel_on_loss is on.");
	errhint("Work done under the lock since it was lost is not protected: roll back, acquire the lock again and redo it.");
}

/*
 * A statement starts: push our error context callback (cb lives in the
 * caller's frame) and count it as running.  It may be cancelled whatever
 * was cancelled before it.
 */
static void
enter_statement(ErrorContextCallback *cb)
{
	cb->callback = loss_error_callback;
	cb->arg = NULL;
	cb->previous = error_context_stack;
	error_context_stack = cb;

	/*
	 * A cancel of ours that is no longer pending and was not raised through
	 * our callback was dropped by PostgreSQL (read between commands) or spent
	 * on another error: forget it, so that a user's cancel stays 57014.
	 */
	if (cancel_asked && !QueryCancelPending)
		cancel_asked = false;
	statements_started++;
	if (quiet_depth > statements_running)
		quiet_depth = statements_running;
	statements_running++;
	loss_arm_timer();
}

/*
 * The next ExecutorRun: the previous hook's, or PostgreSQL's own.
 */
static void
call_executor_run(ZKLOCK_EXECUTOR_RUN_PARAMS)
{
	if (prev_executor_run)
		prev_executor_run(ZKLOCK_EXECUTOR_RUN_ARGS);
	else
		standard_ExecutorRun(ZKLOCK_EXECUTOR_RUN_ARGS);
}

/*
 * The next ProcessUtility: the previous hook's, or PostgreSQL's own.
 */
static void
call_process_utility(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * ExecutorRun hook: run the statement with our error context callback and
 * counted as running.
 */
static void
loss_executor_run(ZKLOCK_EXECUTOR_RUN_PARAMS)
{
	ErrorContextCallback cb;

	if (!zklock_cancel_on_loss)
	{
		/* not asked for: no frame, no counting, nothing on the hot path */
		call_executor_run(ZKLOCK_EXECUTOR_RUN_ARGS);
		return;
	}
	enter_statement(&cb);
	PG_TRY();
	{
		call_executor_run(ZKLOCK_EXECUTOR_RUN_ARGS);
	}
	PG_FINALLY();
	{
		statements_running--;
		error_context_stack = cb.previous;
	}
	PG_END_TRY();
}

/*
 * ProcessUtility hook (CALL, DO, COMMIT, ...): as loss_executor_run.
 */
static void
loss_process_utility(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	ErrorContextCallback cb;

	if (!zklock_cancel_on_loss)
	{
		call_process_utility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
		return;
	}
	enter_statement(&cb);
	PG_TRY();
	{
		call_process_utility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		statements_running--;
		error_context_stack = cb.previous;
	}
	PG_END_TRY();
}

/*
 * Install the hooks (from _PG_init).
 */
void
zklock_loss_init(void)
{
	prev_executor_run = ExecutorRun_hook;
	ExecutorRun_hook = loss_executor_run;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = loss_process_utility;
}
