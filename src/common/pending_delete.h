/*-------------------------------------------------------------------------
 *
 * common/pending_delete.h
 *	  A node the worker must delete (ZklockDelete): the entry of the
 *	  pending-delete table in shared memory (zklock_deletes, common/shmem.h)
 *	  and of the file that keeps the deletes of persistent nodes
 *	  (common/session_file.h).  Those two headers include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_PENDING_DELETE_H
#define ZKLOCK_PENDING_DELETE_H

#include "zklock.h"

/*
 * A node the worker must delete: a released lock, the node of a withdrawn,
 * failed or given-up request (by name, or every child of a parent that
 * carries a protection prefix, when the create's reply never came), a
 * P/locks node given back, P/ready.  The intent is recorded here, in
 * shared memory, under ZklockShared->lock, in the same critical section
 * that frees or finishes the request slot, so a worker that dies at any
 * point leaves it to the next worker, which sends it again.  A delete is
 * retried for as long as the session lasts, whatever the error, until the
 * server says it is done (ZOK or NoNode).  When the session ends the
 * server has removed its ephemeral nodes and their entries are dropped;
 * the entry of a persistent node (P/ready) stays.  Only the worker writes
 * entries; zk_status() counts them.
 */
typedef struct ZklockDelete
{
	uint32		serial;			/* 0: free; otherwise set anew on every use */
	bool		by_prefix;		/* delete path's children named prefix... */
	bool		persistent;		/* a persistent node: survives the session */
	uint64		session_gen;	/* session whose ephemeral node it is */
	char		prefix[ZKLOCK_PROTECTED_PREFIX_LEN + 1];
	char		path[ZKLOCK_NODE_PATH_SIZE];
	int64		czxid;			/* persistent node: delete it only while it
								 * has this creation zxid (0: any) */
	int64		ctime;			/* ... and this creation time (0: not
								 * known): an ensemble rebuilt from
								 * nothing numbers its zxids again */
	char		guard[ZKLOCK_NODE_NAME_SIZE];	/* a sibling of path the lock
												 * was handed to: the delete
												 * goes only together with a
												 * check that it is there
												 * ('': none; ephemeral only) */
} ZklockDelete;

#endif							/* ZKLOCK_PENDING_DELETE_H */
