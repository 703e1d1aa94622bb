/* zklock--0.1.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION zklock" to load this file. \quit

-- Reentrant mutex (Curator's InterProcessMutex)

CREATE FUNCTION zk_mutex_acquire(path text, timeout interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_mutex_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_acquire(text, interval) IS
'take the ZooKeeper mutex at path for this session; false when the timeout passed first';

CREATE FUNCTION zk_mutex_try_acquire(path text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_mutex_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_try_acquire(text) IS
'take the ZooKeeper mutex at path if it is free, without waiting';

CREATE FUNCTION zk_mutex_acquire_xact(path text, timeout interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_mutex_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_acquire_xact(text, interval) IS
'take the ZooKeeper mutex at path until the end of the transaction';

CREATE FUNCTION zk_mutex_release(path text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_mutex_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_release(text) IS
'release one session-level hold of the ZooKeeper mutex at path';

CREATE FUNCTION zk_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'zk_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_release_all() IS
'release every session-level zklock lock of this session';

-- Introspection

CREATE FUNCTION zk_status(
    OUT state text,
    OUT session_id text,
    OUT server text,
    OUT session_timeout integer,
    OUT requests_queued integer,
    OUT locks_held integer,
    OUT worker_pid integer,
    OUT state_since timestamptz,
    OUT slots_used integer)
RETURNS record
AS 'MODULE_PATHNAME', 'zk_status'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_status() IS
'state of the ZooKeeper session of this cluster''s zklock worker';

CREATE FUNCTION zk_locks(
    OUT pid integer,
    OUT recipe text,
    OUT path text,
    OUT node text,
    OUT mode text,
    OUT scope text,
    OUT count integer,
    OUT state text,
    OUT since timestamptz,
    OUT token bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_locks'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW zk_locks AS SELECT * FROM zk_locks();

COMMENT ON VIEW zk_locks IS
'every zklock lock held or waited for in this cluster';
