/*-------------------------------------------------------------------------
 *
 * recipes/registry.c
 *	  The tables of the recipes: which worker steps run each kind of
 *	  request (ZklockOp), and what the backend side says of each kind of
 *	  hold (ZklockKind).  Adding a recipe adds its entries here; the
 *	  generic files call the hooks and test no op or kind.
 *
 *	  The tables are data: the files below (the request layer, the lock
 *	  engine, the delete table) read them through zklock_worker_ops() and
 *	  zklock_kind_info(), inline in the headers, and so never call up into
 *	  a recipe by name.  This file is the top of the call graph.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "backend/backend.h"
#include "worker/worker.h"

const ZklockKindInfo zklock_kind_table[ZKK_LAST + 1] = {
	[ZKK_NONE] = {
		.recipe = "request", .mode = "",
	},
	[ZKK_MUTEX] = {
		.recipe = "mutex", .mode = "exclusive", .acquire = true,
		.token_rank = 1,
	},
	[ZKK_READ] = {
		.recipe = "read", .mode = "shared", .acquire = true,
		.token_rank = 3,
		.before_acquire = zklock_read_before_acquire,
	},
	[ZKK_WRITE] = {
		.recipe = "write", .mode = "exclusive", .acquire = true,
		.token_rank = 2,
		.before_acquire = zklock_write_before_acquire,
	},
	[ZKK_SEMAPHORE_MUTEX] = {
		.recipe = "semaphore_mutex", .mode = "exclusive", .acquire = true,
		.node_dir = "leases/", .token_rank = 4,
		.before_acquire = zklock_semaphore_mutex_before_acquire,
	},
	[ZKK_SEMAPHORE] = {
		.recipe = "semaphore", .mode = "lease", .acquire = true,
		.node_dir = "leases/",
	},
	[ZKK_DOUBLE_BARRIER] = {
		.recipe = "double_barrier", .mode = "member",
	},
	[ZKK_BARRIER] = {
		.recipe = "barrier", .mode = "wait",
	},
	[ZKK_LATCH] = {
		.recipe = "leader_latch", .mode = "member",
	},
};

StaticAssertDecl(lengthof(zklock_kind_table) == ZKK_LAST + 1,
				 "every ZklockKind has an entry in kind_info");

const ZklockWorkerOps zklock_ops_table[ZKOP_CONFIRM + 1] = {
	[ZKOP_MUTEX] = {
		.start = zklock_lk_create, .next = zklock_lk_list,
		.resume = zklock_lk_resume, .lock_target = zklock_mutex_lock_target,
		.lock_granted = zklock_grant,
		.released = zklock_lk_released, .local = &zklock_local_layer,
	},
	[ZKOP_READ] = {
		.start = zklock_lk_create, .next = zklock_lk_list,
		.resume = zklock_lk_resume, .lock_target = zklock_read_lock_target,
		.lock_granted = zklock_grant,
		.released = zklock_lk_released, .local = &zklock_local_layer,
	},
	[ZKOP_WRITE] = {
		.start = zklock_lk_create, .next = zklock_lk_list,
		.resume = zklock_lk_resume, .lock_target = zklock_write_lock_target,
		.lock_granted = zklock_grant,
		.released = zklock_lk_released, .local = &zklock_local_layer,
	},
	[ZKOP_LEASE] = {
		.start = zklock_lease_start, .next = zklock_lease_next,
		.resume = zklock_lease_resume, .lock_target = zklock_lease_lock_target,
		.lock_granted = zklock_lease_create, .adopted = zklock_lease_adopted,
		.local = &zklock_local_layer, .flags = ZKW_NODE_IN_LEASES,
	},
	[ZKOP_BARRIER_SET] = {
		.start = zklock_barrier_set_start,
	},
	[ZKOP_BARRIER_REMOVE] = {
		.start = zklock_barrier_remove_start,
	},
	[ZKOP_BARRIER_WAIT] = {
		.start = zklock_barrier_wait_start,
	},
	[ZKOP_DBARRIER_ENTER] = {
		.start = zklock_denter_start, .next = zklock_denter_next,
		.resume = zklock_denter_resume, .flags = ZKW_PLAIN_NAMES,
	},
	[ZKOP_DBARRIER_LEAVE] = {
		.start = zklock_leave_list, .next = zklock_leave_list,
		.resume = zklock_leave_resume,
		.flags = ZKW_KEEPS_NODES | ZKW_PLAIN_NAMES, .state_name = "leaving",
	},
	[ZKOP_REVOKE] = {
		.start = zklock_revoke_start,
	},
	[ZKOP_PARTICIPANTS] = {
		.start = zklock_participants_start,
	},
	[ZKOP_COUNTER] = {
		.start = zklock_counter_start,
	},
	[ZKOP_LATCH] = {
		.start = zklock_lk_create, .next = zklock_latch_next,
		.resume = zklock_lk_resume, .lock_target = zklock_latch_lock_target,
		.lock_granted = zklock_latch_granted, .lock_waits = zklock_latch_waits,
		.session_lost = zklock_latch_lost_session, .state_name = "member",
	},
	[ZKOP_CONFIRM] = {
		.start = zklock_confirm_start,
	},
};

/*
 * What zk_locks says of a request of this kind while it runs, or NULL when
 * the slot's own state says it.
 */
const char *
zklock_op_state_name(ZklockOp op)
{
	if ((int) op <= 0 || (int) op > ZKOP_CONFIRM)
		return NULL;
	return zklock_ops_table[op].state_name;
}
