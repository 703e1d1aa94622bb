/*-------------------------------------------------------------------------
 *
 * worker/event_loop.c
 *	  The background worker that owns the cluster's ZooKeeper session and
 *	  runs the recipes for every backend: its entry point and event loop.
 *
 *	  zklock_worker_main				the worker's entry point
 *	  zklock_loop						what the loop is asked to do on its
 *										next pass (set through the
 *										zklock_request_* calls)
 *
 * The worker is single-threaded.  It drives the single-threaded ZooKeeper
 * C client (libzookeeper_st) from a WaitEventSet that holds its latch and
 * the client's socket: zookeeper_interest() says which socket and timeout
 * to wait for, zookeeper_process() runs the completions and watchers of
 * the async calls in this same thread.  One pass of the loop: reload the
 * configuration if asked, check the lease, open a handle if there is none,
 * send a heartbeat when one is due, take on the backends' requests
 * (zklock_dispatch_run_requests), wait, check the lease again (a stalled
 * worker must not act on a stale session), and let the client process what
 * arrived.
 *
 * src/README maps the other files of the worker, the slot states, the tag
 * scheme and the invariants of the per-request state.
 *
 *-------------------------------------------------------------------------
 */

#include "postgres.h"

#include <errno.h>

#include <poll.h>
#include <sys/stat.h>
#include <netinet/tcp.h>

#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "compat.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "common/session_file.h"
#include "worker/worker.h"
#include "worker/connection/connection.h"
#include "worker/deletes/deletes.h"
#include "worker/locks/locks.h"

/*
 * What the loop is asked to do on its next pass: set through the
 * zklock_request_* calls (worker/worker.h), read here and by the files
 * that act on a flag.  The first pass looks at everything.
 */
ZklockLoopFlags zklock_loop = {
	.rescan = true,
	.deletes_scan = true,
	.deletes_next_retry = 0,
	.need_reconnect = false,
	.wes_rebuild = true,
};

static WaitEventSet *wes = NULL;
static int	wes_fd = -2;
static ino_t wes_fd_ino = 0;	/* the socket wes_fd named at the rebuild */
static int	wes_interest = -1;
static int	wes_sock_pos = -1;

static int	socket_events(int interest);
static void rebuild_wait_set(int fd, int interest);
static void worker_exit(int code, Datum arg);
static void worker_attach(void);
static void close_previous_session(void);
static void reload_config(void);
static void renew_handle(void);
static long sync_wait_set(void);
static long next_timeout(long client_ms);
static int	take_events(const WaitEvent *events, int nevents);
static void process_zookeeper(int zkevents);
static void set_cork(bool on);

/*
 * The wait events for the client's interest (ZOOKEEPER_READ, _WRITE).
 */
static int
socket_events(int interest)
{
	int			events = 0;

	if (interest & ZOOKEEPER_READ)
		events |= WL_SOCKET_READABLE;
	if (interest & ZOOKEEPER_WRITE)
		events |= WL_SOCKET_WRITEABLE;
	return events;
}

/*
 * The inode of the socket fd names (0 for none).  The client closes its
 * socket inside any asynchronous call whose send fails (its
 * nonblocking_send), without an error to us, and its next
 * zookeeper_interest opens a new one, usually under the same number: the
 * wait set no longer watches it (closing removed it from the epoll set),
 * and changing its events there fails.  The socket's inode tells the two
 * apart.
 */
static ino_t
socket_ino(int fd)
{
	struct stat st;

	if (fd < 0 || fstat(fd, &st) != 0)
		return 0;
	return st.st_ino;
}

/*
 * Build the wait set anew for the client's current socket and interest.
 */
static void
rebuild_wait_set(int fd, int interest)
{
	if (wes != NULL)
		FreeWaitEventSet(wes);
	wes = ZKLOCK_CREATE_WAIT_EVENT_SET(3);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	if (fd >= 0 && interest != 0)
		wes_sock_pos = AddWaitEventToSet(wes, socket_events(interest), fd,
										 NULL, NULL);
	else
		wes_sock_pos = -1;
	wes_fd = fd;
	wes_fd_ino = socket_ino(fd);
	wes_interest = interest;
	zklock_loop.wes_rebuild = false;
}

/*
 * Leave shared memory tidy when the worker exits.  The ZooKeeper session
 * is not closed: a restarted worker resumes it, so held locks survive.
 */
static void
worker_exit(int code, Datum arg)
{
	zklock_dtable_persist();
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->worker_pid = 0;
	zklock_shared->worker_latch = NULL;
	zklock_shared->conn_state = ZKC_NONE;
	zklock_shared->state_since = GetCurrentTimestamp();
	LWLockRelease(zklock_shared->lock);
	zklock_flush_wakes();
}

/*
 * Set up the worker's process-local state and register it in shared
 * memory as the cluster's worker.  Takes the shared lock.
 */
static void
worker_attach(void)
{
	zklock_reqs = MemoryContextAllocZero(TopMemoryContext,
								  sizeof(WorkerReq) * zklock_shared->nslots);
	zklock_dtable_progress = MemoryContextAllocZero(TopMemoryContext,
									sizeof(DeleteProgress) * zklock_shared->ndeletes);

	zklock_defer_wakes();
	zklock_worker_log_init();

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->worker_pid = MyProcPid;
	zklock_shared->worker_latch = MyLatch;
	/* the slots an earlier worker left, by their lock's base */
	zklock_pathidx_init();
	/* nodes an earlier worker kept are guarded by no watch of ours */
	zklock_cache_worker_start();
	if (zklock_shared->deletes_used > 0)
		ereport(LOG,
				(errmsg_plural("zklock: %d zookeeper node delete left by the previous worker is still pending",
							   "zklock: %d zookeeper node deletes left by the previous worker are still pending",
							   zklock_shared->deletes_used,
							   zklock_shared->deletes_used)));
	LWLockRelease(zklock_shared->lock);
	before_shmem_exit(worker_exit, (Datum) 0);
}

/*
 * Fresh shared memory but a session file of this server run: the cluster
 * crash-restarted.  Whoever held locks in that session is gone, so close
 * it now rather than let its nodes linger for the session timeout.  A file
 * of another server run (a copied data directory) names a session that is
 * not ours to close: it is only removed.  No lock needed (the worker
 * alone writes the session).
 */
static void
close_previous_session(void)
{
	int64		old_id;
	char		old_passwd[16];
	bool		foreign;

	if (zklock_shared->have_session)
		return;
	if (zklock_session_load(&old_id, old_passwd, &foreign))
	{
		bool		gone = zklock_session_close(old_id, old_passwd, 5000);

		ereport(LOG,
				(errmsg("zklock: %s the zookeeper session 0x%llx of this server's previous worker",
						gone ? "closed" : "could not close",
						(unsigned long long) old_id)));
		zklock_session_forget();
	}
	else if (foreign)
	{
		ereport(LOG,
				(errmsg("zklock: ignoring a zookeeper session file written by another server run"),
				 errdetail("The data directory was copied from another server or the server was restarted after a crash of the postmaster; the session is not closed.")));
		zklock_session_forget();
	}
}

/*
 * Apply a changed configuration.  A new session timeout is asked for by
 * the next handle (a worker restart, a new connect string, a new session);
 * the lease follows a shorter one at once.  A new connect string restarts the worker: the new worker opens
 * its handle on the new hosts and resumes the session, exactly as after any
 * worker restart, so the per-request state and the watches it relies on are
 * made anew together.  (Handing the string to the live handle with
 * zoo_set_servers is not enough: the 3.8 C client keeps a handle that is
 * between connections on the old address.)
 */
static void
reload_config(void)
{
	int			old_timeout = zklock_session_timeout;
	int			old_margin = zklock_lease_margin;
	int			old_tick = zklock_server_tick_time;

	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	if (!zklock_session_timeout_ok(WARNING))
	{
		/* refused: the lease rules keep the values that were safe */
		ereport(WARNING,
				(errmsg("zklock: keeping zklock.session_timeout = %d ms, zklock.lease_margin = %d ms and zklock.server_tick_time = %d ms",
						old_timeout, old_margin, old_tick)));
		zklock_session_timeout = old_timeout;
		zklock_lease_margin = old_margin;
		zklock_server_tick_time = old_tick;
	}
	/* a shorter timeout or a longer margin shortens the lease at once */
	zklock_lease_settings_changed();
	/* the servers' side may have been fixed: try the credentials again now */
	zklock_auth_retry_now();
	zklock_secure_retry_now();
	if (zklock_secure_settings_changed())
	{
		ereport(LOG,
				(errmsg("zklock: a TLS or SASL setting or a TLS file changed: the worker restarts to use it"),
				 errdetail("The zookeeper session is kept and resumed over the new connection, with its locks.")));
		proc_exit(1);
	}
	if (zklock_connected_hosts != NULL && strcmp(zklock_connected_hosts, zklock_hosts) != 0)
	{
		ereport(LOG,
				(errmsg("zklock: zklock.hosts changed to \"%s\": the worker restarts to use it",
						zklock_hosts),
				 errdetail("The zookeeper session is kept and resumed on the new hosts.")));
		proc_exit(1);
	}
}

/*
 * Close a handle that is of no more use (zklock_request_reconnect) and
 * open one when there is none, unless the servers reject zklock.auth and
 * the next try is not due yet.
 */
static void
renew_handle(void)
{
	if (zklock_loop.need_reconnect && zklock_zh != NULL)
	{
		zookeeper_close(zklock_zh);
		zklock_zh = NULL;
		zklock_loop.need_reconnect = false;
	}
	if (zklock_zh == NULL && zklock_auth_may_open())
		zklock_conn_open();
}

/*
 * Make the wait set wait for what the client is interested in (its
 * socket, readable or writeable), and return how long the client may
 * wait (ms, at most a second).
 */
static long
sync_wait_set(void)
{
	int			fd = -1;
	int			interest = 0;
	struct timeval tv = {0};
	long		timeout_ms;
	int			rc;
	int			saved_errno;
	ZklockMonoTime before;

	if (zklock_zh == NULL)
	{
		if (wes == NULL || zklock_loop.wes_rebuild)
			rebuild_wait_set(-1, 0);
		return 1000;
	}
	before = zklock_mono_now();
	errno = 0;
	rc = zookeeper_interest(zklock_zh, &fd, &interest, &tv);
	saved_errno = errno;
	zklock_lease_track_handshake(before);
	if (rc != ZOK)
		zklock_request_wait_set_rebuild();
	else
		zklock_lease_cut_stuck_attempt(fd, zklock_mono_now());
	if (rc != ZOK)
	{
		zklock_secure_call_failed(zklock_zh, rc);
		zklock_conn_failed(rc, saved_errno);
	}
	if (rc == ZINVALIDSTATE)
		zklock_request_reconnect();
	timeout_ms = tv.tv_sec * 1000L + (tv.tv_usec + 999) / 1000;
	if (timeout_ms <= 0 || timeout_ms > 1000)
		timeout_ms = (timeout_ms <= 0 && fd >= 0) ? 1 : 1000;
	if (fd != wes_fd || zklock_loop.wes_rebuild ||
		(interest != wes_interest && (interest == 0 || wes_interest == 0)) ||
		(fd >= 0 && socket_ino(fd) != wes_fd_ino))
		rebuild_wait_set(fd, interest);
	else if (interest != wes_interest)
	{
		ModifyWaitEvent(wes, wes_sock_pos, socket_events(interest), NULL);
		wes_interest = interest;
	}
	return timeout_ms;
}

/*
 * How long the next wait may last (ms): what the client allows, but
 * waking up for the next heartbeat or the lease's end, the end of a
 * pending delete's pause, and the next try of rejected credentials.
 */
static long
next_timeout(long client_ms)
{
	ZklockMonoTime now = zklock_mono_now();
	long		timeout_ms;

	timeout_ms = zklock_lease_wakeup_ms(now, client_ms);
	if (zklock_loop.deletes_next_retry != 0)
		timeout_ms = Min(timeout_ms,
						 Max((long) ((zklock_loop.deletes_next_retry - now) / 1000) + 1, 1));
	if (zklock_zh == NULL)
		timeout_ms = zklock_auth_wakeup_ms(now, timeout_ms);
	return timeout_ms;
}

/*
 * What a wait returned, as the client's events (ZOOKEEPER_READ, _WRITE);
 * the latch is reset.
 */
static int
take_events(const WaitEvent *events, int nevents)
{
	int			zkevents = 0;
	int			i;

	for (i = 0; i < nevents; i++)
	{
		if (events[i].events & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (events[i].events & WL_SOCKET_READABLE)
			zkevents |= ZOOKEEPER_READ;
		if (events[i].events & WL_SOCKET_WRITEABLE)
			zkevents |= ZOOKEEPER_WRITE;
	}
	return zkevents;
}

/*
 * Let the client send and receive, and run completions and watchers.  The
 * client takes one reply from the socket per call, so keep calling while
 * the socket has more to read: one wake-up then serves every reply that
 * has arrived, instead of one reply per trip around the main loop.
 */
static void
process_zookeeper(int zkevents)
{
	int			rounds = 0;

	for (;;)
	{
		ZklockMonoTime before = zklock_mono_now();
		int			rc;
		int			saved_errno;
		struct pollfd pfd;

		errno = 0;
		rc = zookeeper_process(zklock_zh, zkevents);
		saved_errno = errno;
		zklock_lease_track_handshake(before);

		/* the grants of this reply: the completions let go of the lock */
		zklock_flush_wakes();
		if (rc != ZOK && rc != ZNOTHING)
		{
			zklock_secure_call_failed(zklock_zh, rc);
			zklock_conn_failed(rc, saved_errno);
			zklock_request_wait_set_rebuild();
			break;
		}
		if (!(zkevents & ZOOKEEPER_READ) || zklock_zh == NULL || ++rounds >= 1000 ||
			zklock_loop.wes_rebuild || wes_fd < 0)
			break;
		pfd.fd = wes_fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN))
			break;
		zkevents = ZOOKEEPER_READ;
	}
}

/*
 * Cork the client's socket while the worker works and uncork it before it
 * waits: every request issued in one trip around the loop (a create and
 * its listing, several backends' requests) leaves in as few TCP segments
 * as possible, so the server reads them in one go instead of waking up
 * for each.
 */
static void
set_cork(bool on)
{
	static int	corked_fd = -1;
	int			v = on ? 1 : 0;

	if (on)
	{
		if (wes_fd < 0 || !zklock_connected)
			return;
		if (setsockopt(wes_fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v)) == 0)
			corked_fd = wes_fd;
	}
	else if (corked_fd >= 0)
	{
		(void) setsockopt(corked_fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v));
		corked_fd = -1;
	}
}

/*
 * Entry point of the worker.  One pass of the loop: reload, check the
 * lease, renew the handle, heartbeat, take on the requests, wait, check
 * the lease again, let the client process what arrived.
 */
void
zklock_worker_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database, but visible in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	worker_attach();
	/* the client's own logging would go to our stderr: keep it quiet */
	zoo_set_debug_level(0);
	close_previous_session();
	/* deletes of persistent nodes an earlier run could not apply */
	zklock_deletes_load();

	for (;;)
	{
		WaitEvent	events[3];
		int			nevents;
		int			zkevents;
		long		timeout_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			reload_config();

		zklock_lease_check(zklock_mono_now());
		renew_handle();

		/* a heartbeat due goes out ahead of the requests of this round */
		zklock_lease_heartbeat(zklock_mono_now());
		zklock_dispatch_run_requests();
		/* the deletes this pass queued leave together, before the wait */
		zklock_batch_send_ready();
		zklock_flush_wakes();
		zklock_worker_log_flush();

		timeout_ms = next_timeout(sync_wait_set());

		/* what this trip changed in the persistent deletes, on disk */
		zklock_dtable_persist();
		zklock_flush_wakes();
		zklock_worker_log_flush();
		set_cork(false);
		nevents = WaitEventSetWait(wes, timeout_ms, events, lengthof(events),
								   zklock_wait_event(ZKLOCK_WAIT_WORKER));
		set_cork(true);

		/* first of all after a wait (or a stall): is the lease still good? */
		zklock_lease_check(zklock_mono_now());
		if (zklock_loop.need_reconnect)
			continue;
		zkevents = take_events(events, nevents);
		if (zklock_zh != NULL)
			process_zookeeper(zkevents);
		/* and those the completions queued, ahead of the next pass's calls */
		zklock_batch_send_ready();
		zklock_worker_log_flush();
		zklock_dtable_persist();
	}
}
