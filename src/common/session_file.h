/*-------------------------------------------------------------------------
 *
 * common/session_file.h
 *	  The files in the data directory that outlive the worker's shared
 *	  memory (common/session_file.c): the session file, the close of a
 *	  session left by an earlier run or by the postmaster's exit, and the
 *	  pending deletes of persistent nodes (zklock.deletes).  Its readers
 *	  are the worker's files that resume, close or keep a session and its
 *	  deletes, and the module's entry.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SESSION_FILE_H
#define ZKLOCK_SESSION_FILE_H

#include "common/pending_delete.h"

/* common/session_file.c */
extern void zklock_session_save(int64 session_id, const char *passwd);
extern bool zklock_session_load(int64 *session_id, char *passwd, bool *foreign);
extern void zklock_session_forget(void);
extern bool zklock_session_close(int64 session_id, const char *passwd, int timeout_ms);
extern void zklock_postmaster_exit(int code, Datum arg);
extern bool zklock_persistent_deletes_save(const ZklockDelete *entries, int n,
										   int elevel);
extern int	zklock_persistent_deletes_read(ZklockDelete *out, int max,
										   char **file_hosts);

#endif							/* ZKLOCK_SESSION_FILE_H */
