/*-------------------------------------------------------------------------
 *
 * zklock.c
 *	  Module entry point: defines the settings (common/settings.c), checks
 *	  that the session timeout leaves room for a lease and the recipe
 *	  registry (recipes/registry.c), installs the shared memory hooks, the
 *	  backend's loss hooks and the extension's drop guard, registers the
 *	  ZooKeeper worker, and in the postmaster an exit hook that closes the
 *	  session the worker left (zklock_postmaster_exit).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"

#include "zklock.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "common/session_file.h"
#include "recipes/recipe.h"

PG_MODULE_MAGIC;


static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);


/*
 * Register the background worker that owns the ZooKeeper session.
 */
static void
register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "zklock");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "zklock_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "zklock worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "zklock worker");
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/*
 * shmem_request_hook: reserve the request table and its lock.
 */
static void
zklock_shmem_request_hook(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	zklock_shmem_request();
}

/*
 * shmem_startup_hook: create or attach to the request table.
 */
static void
zklock_shmem_startup_hook(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	zklock_shmem_startup();
}

/*
 * Module load.  zklock only works preloaded: the worker and the shared
 * request table must exist before any backend uses it.
 */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock must be loaded via shared_preload_libraries"),
				 errhint("Add zklock to shared_preload_libraries in postgresql.conf and restart the server.")));

	zklock_define_settings();
	(void) zklock_session_timeout_ok(ERROR);
	zklock_registry_check();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = zklock_shmem_request_hook;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = zklock_shmem_startup_hook;

	register_worker();
	zklock_loss_init();
	zklock_drop_guard_init();

	/* at shutdown the postmaster closes the session the worker left */
	if (!IsUnderPostmaster)
		on_proc_exit(zklock_postmaster_exit, (Datum) 0);
}
