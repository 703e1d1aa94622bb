/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The differences between the PostgreSQL majors zklock supports (15, 17
 *	  and 18), in one place: no other file tests PG_VERSION_NUM.
 *
 * Each difference is a macro named for what it does, defined for every
 * supported major.  The ZooKeeper C client (3.8 and 3.9) has the same API
 * in every call zklock makes; what differs is how it was built: with or
 * without OpenSSL and Cyrus SASL (the last two entries).
 *
 * Interface:
 *	ZKLOCK_MY_PROCNO				this process's index in ProcGlobal->allProcs
 *	ZKLOCK_CREATE_WAIT_EVENT_SET(n) a wait event set freed only explicitly
 *	ZKLOCK_HAVE_NAMED_WAIT_EVENTS	WaitEventExtensionNew() exists
 *	ZKLOCK_EXECUTOR_RUN_PARAMS		the parameter list of an ExecutorRun hook
 *	ZKLOCK_EXECUTOR_RUN_ARGS		the same parameters, passed on
 *	ZKLOCK_HAVE_ZK_TLS				the client has zookeeper_init_ssl_ctx (zklock's patch)
 *	ZKLOCK_HAVE_ZK_SASL				the client has zookeeper_init_sasl
 *
 * A file that uses one of these macros includes this file itself.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_COMPAT_H
#define ZKLOCK_COMPAT_H

/*
 * 17 replaced PGPROC.pgprocno with the global MyProcNumber.
 */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_MY_PROCNO	((int) MyProcNumber)
#else
#define ZKLOCK_MY_PROCNO	(MyProc->pgprocno)
#endif

/*
 * 17 takes a resource owner (NULL: none) where 15 took the memory context
 * to allocate in.
 */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_CREATE_WAIT_EVENT_SET(nevents) CreateWaitEventSet(NULL, (nevents))
#else
#define ZKLOCK_CREATE_WAIT_EVENT_SET(nevents) CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

/*
 * 17 registers extension wait events by name in shared memory; 15 has only
 * the generic Extension event.
 */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_HAVE_NAMED_WAIT_EVENTS 1
#else
#define ZKLOCK_HAVE_NAMED_WAIT_EVENTS 0
#endif

/*
 * 18 dropped ExecutorRun's execute_once argument.  A hook is declared as
 * "static void hook(ZKLOCK_EXECUTOR_RUN_PARAMS)" and passes
 * ZKLOCK_EXECUTOR_RUN_ARGS on to the next ExecutorRun.
 */
#if PG_VERSION_NUM >= 180000
#define ZKLOCK_EXECUTOR_RUN_PARAMS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count
#define ZKLOCK_EXECUTOR_RUN_ARGS	queryDesc, direction, count
#else
#define ZKLOCK_EXECUTOR_RUN_PARAMS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count, \
	bool execute_once
#define ZKLOCK_EXECUTOR_RUN_ARGS	queryDesc, direction, count, execute_once
#endif

/*
 * The ZooKeeper C client's TLS and SASL: built with OpenSSL and Cyrus SASL
 * (zk-client-build/build.sh; the Makefile then defines the client's own
 * HAVE_OPENSSL_H and HAVE_CYRUS_SASL_H, which its zookeeper.h reads) or
 * not (Debian's libzookeeper_st).
 */
#ifdef HAVE_OPENSSL_H
#define ZKLOCK_HAVE_ZK_TLS 1
#else
#define ZKLOCK_HAVE_ZK_TLS 0
#endif
#ifdef HAVE_CYRUS_SASL_H
#define ZKLOCK_HAVE_ZK_SASL 1
#else
#define ZKLOCK_HAVE_ZK_SASL 0
#endif

#endif							/* ZKLOCK_COMPAT_H */
