/*-------------------------------------------------------------------------
 *
 * backend/drop_guard.c
 *	  The drop of extension zklock refused while sessions of the database
 *	  hold or wait for zklock locks.
 *
 *	  zklock locks are cluster-wide, the extension is per database: a
 *	  session takes its locks through the functions of its own database's
 *	  extension, and only through them can it release them.  Dropping the
 *	  extension of database D under a session of D that holds or waits
 *	  would leave that session with locks it has no function to give back
 *	  (they would last until it exits), so the drop fails with 55006
 *	  (object_in_use, as DROP DATABASE with sessions connected), naming
 *	  each such session, its recipe and path; nothing is released behind a
 *	  holder's back.  Sessions of other databases do not block the drop:
 *	  they use their own database's extension.
 *
 *	  The check is an object_access_hook on OAT_DROP of the extension's
 *	  pg_extension row, so it sees every way a drop reaches the
 *	  extension: DROP EXTENSION, DROP SCHEMA ... CASCADE, DROP OWNED.
 *	  Who counts is what zk_locks lists with a pid (a slot waiting, held
 *	  or held and lost, not given back), of a backend whose database is
 *	  the current one, this session included; a leader latch membership
 *	  of scope 'cluster' (pid 0) is the cluster's, left from any database,
 *	  and does not count.  A lock a session of D
 *	  starts to take while the dropping transaction runs, after the check,
 *	  is not seen; the session then holds it until it exits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/procarray.h"

#include "zklock.h"
#include "common/shmem.h"
#include "backend/backend.h"

/* at most this many sessions are named in the DETAIL */
#define DROP_GUARD_MAX_NAMED	20

/* a slot that may block the drop, copied out of the shared table */
typedef struct DropBlocker
{
	int			pid;
	ZklockKind	kind;
	ZklockSlotState state;
	char		path[ZKLOCK_FULL_PATH_SIZE];	/* the user's path, UTF-8 */
} DropBlocker;

static object_access_hook_type prev_object_access_hook = NULL;

/*
 * Copy the slots that hold or wait for a lock (as zk_locks lists them
 * with a pid) into a palloc'd array; *n is set to their number.  Takes
 * the shared table's lock in shared mode.
 */
static DropBlocker *
collect_holds(int *n)
{
	ZklockShared *sh = zklock_shared;
	DropBlocker *out;
	int			i;

	*n = 0;
	out = palloc_extended(sizeof(DropBlocker) * (Size) sh->nslots, MCXT_ALLOC_HUGE);
	zklock_lock_table(LW_SHARED);
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *s = &sh->slots[i];
		DropBlocker *b;

		if (!(s->state == ZKS_NEW || s->state == ZKS_ACTIVE ||
			  s->state == ZKS_HELD || s->state == ZKS_LOST) ||
			s->kind == ZKK_NONE || s->pid == 0 || zklock_give_back_pending(s))
			continue;
		b = &out[(*n)++];
		b->pid = s->pid;
		b->kind = s->kind;
		b->state = s->state;
		strlcpy(b->path, s->path + s->user_path_off, sizeof(b->path));
	}
	LWLockRelease(sh->lock);
	return out;
}

/*
 * Whether backend pid is connected to the current database.  Takes
 * ProcArrayLock (BackendPidGetProc).
 */
static bool
pid_in_this_database(int pid)
{
	PGPROC	   *proc = BackendPidGetProc(pid);

	return proc != NULL && proc->databaseId == MyDatabaseId;
}

/*
 * Refuse the drop of the extension when sessions of this database hold
 * or wait for zklock locks: ERROR 55006 naming them.  Takes the shared
 * table's lock, then ProcArrayLock, one after the other.
 */
static void
refuse_drop_if_held(void)
{
	DropBlocker *holds;
	StringInfoData detail;
	int			n;
	int			named = 0;
	int			more = 0;
	int			i;

	if (zklock_shared == NULL)
		return;
	holds = collect_holds(&n);
	initStringInfo(&detail);
	for (i = 0; i < n; i++)
	{
		DropBlocker *b = &holds[i];
		const char *verb;

		if (!pid_in_this_database(b->pid))
			continue;
		if (named == DROP_GUARD_MAX_NAMED)
		{
			more++;
			continue;
		}
		if (b->state == ZKS_HELD)
			verb = "holds";
		else if (b->state == ZKS_LOST)
			verb = "held and lost";
		else
			verb = "waits for";
		if (named > 0)
			appendStringInfoChar(&detail, '\n');
		appendStringInfo(&detail, "Process %d %s %s \"%s\".", b->pid, verb,
						 zklock_kind_info(b->kind)->recipe,
						 zklock_text_from_utf8(b->path, strlen(b->path)));
		named++;
	}
	if (more > 0)
		appendStringInfo(&detail, "\nAnd %d more.", more);
	pfree(holds);
	if (named == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("cannot drop extension \"zklock\" because sessions of this database hold or wait for zklock locks"),
			 errdetail_internal("%s", detail.data),
			 errhint("Release the locks (zk_release_all() in each session, COMMIT for transaction locks), cancel the waits (pg_cancel_backend()) or end those sessions (pg_terminate_backend()), then drop the extension again.")));
}

/*
 * object_access_hook: at the drop of extension zklock (however reached),
 * refuse it while sessions of this database hold or wait for its locks.
 */
static void
drop_guard_object_access(ObjectAccessType access, Oid classId, Oid objectId,
						 int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access == OAT_DROP && classId == ExtensionRelationId && subId == 0)
	{
		char	   *name = get_extension_name(objectId);

		if (name != NULL && strcmp(name, "zklock") == 0)
			refuse_drop_if_held();
	}
}

/*
 * Install the hook (from _PG_init).
 */
void
zklock_drop_guard_init(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = drop_guard_object_access;
}
