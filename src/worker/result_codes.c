/*-------------------------------------------------------------------------
 *
 * worker/result_codes.c
 *	  What a ZooKeeper result code means to the worker: the SQLSTATE a
 *	  backend is handed for it, and whether the call may be tried again,
 *	  was refused unapplied, or came back because the session is ending.
 *
 *	  zklock_rc_sqlstate		the SQLSTATE of an error from rc
 *	  zklock_rc_retryable		may or may not have been applied: try again
 *	  zklock_rc_refused		a create the server refused: no node made
 *	  zklock_rc_session_gone	the session is ending
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "worker/worker.h"

/*
 * Map a ZooKeeper result code to an SQLSTATE for errors handed to a
 * backend.
 */
int
zklock_rc_sqlstate(int rc)
{
	switch (rc)
	{
		case ZNOAUTH:
		case ZAUTHFAILED:
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		case ZCONNECTIONLOSS:
		case ZSESSIONCLOSEDREQUIRESASLAUTH:
		case ZOPERATIONTIMEOUT:
		case ZSESSIONEXPIRED:
		case ZSESSIONMOVED:
		case ZCLOSING:
		case ZINVALIDSTATE:
			return ERRCODE_CONNECTION_FAILURE;
		case ZBADARGUMENTS:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case ZNOCHILDRENFOREPHEMERALS:
			return ERRCODE_WRONG_OBJECT_TYPE;
		case ZNOTEMPTY:
			return ERRCODE_OBJECT_IN_USE;
		default:
			return ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
	}
}

/*
 * True for the result codes after which the call may or may not have been
 * applied and should be tried again once the connection is back: the
 * connection was lost or timed out; the session moved to another server
 * (which drops this connection, and the client reconnects); the client
 * closed its socket after a send error or an out-of-order reply (the
 * 3.8 client reports that as a runtime inconsistency); the server
 * rejected zklock.auth on this connection and closed it (the session
 * watcher fails the waiting requests then); the server requires a SASL
 * login the session has not made, refused the request unapplied and
 * closed the connection (worker/connection/secure.c says why and fails the
 * waiting requests).
 */
bool
zklock_rc_retryable(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
		rc == ZSESSIONMOVED || rc == ZRUNTIMEINCONSISTENCY ||
		rc == ZAUTHFAILED || rc == ZSESSIONCLOSEDREQUIRESASLAUTH;
}

/*
 * True for the result codes with which the server refused a create: no
 * node was made.
 */
bool
zklock_rc_refused(int rc)
{
	switch (rc)
	{
		case ZNONODE:
		case ZNOAUTH:
		case ZNODEEXISTS:
		case ZINVALIDACL:
		case ZBADARGUMENTS:
		case ZNOCHILDRENFOREPHEMERALS:
			return true;
		default:
			return false;
	}
}

/*
 * True for the result codes that mean the session is ending; the session
 * watcher deals with every request then.
 */
bool
zklock_rc_session_gone(int rc)
{
	return rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE;
}
