/* zklock--0.3--0.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '0.4'" to load this file. \quit

-- 0.4: zk_status() says whether the worker's connection is TLS, which SASL
-- identity it logged in as, and why no connection can be made while TLS or
-- SASL fails (state tls_failed or sasl_failed).  A function's OUT columns
-- cannot be changed in place, so zk_status() is dropped and created again;
-- nothing of the extension depends on it, and, as in a fresh install, it
-- stays executable by PUBLIC.  It names the symbol zk_status_0_4, which
-- only a library of 0.4 or later has: run by a server still on an older
-- library, this update fails ("could not find function") instead of that
-- library filling 28 columns from 25; restart the server on the new
-- library first.  The library of 0.4 also serves the zk_status() of
-- earlier versions under its old symbol (their columns are a prefix).

DROP FUNCTION zk_status();

CREATE FUNCTION zk_status(
    OUT state text,
    OUT session_id text,
    OUT server text,
    OUT session_timeout integer,
    OUT requests_queued integer,
    OUT locks_held integer,
    OUT worker_pid integer,
    OUT state_since timestamptz,
    OUT slots_used integer,
    OUT connected_count bigint,
    OUT suspended_count bigint,
    OUT expired_count bigint,
    OUT lease_until timestamptz,
    OUT lease_remaining interval,
    OUT locks_lost bigint,
    OUT leases_expired bigint,
    OUT deletes_pending bigint,
    OUT handovers bigint,
    OUT read_joins bigint,
    OUT server_mode text,
    OUT listings_skipped bigint,
    OUT batches bigint,
    OUT batched_deletes bigint,
    OUT batched_creates bigint,
    OUT batches_failed bigint,
    OUT tls boolean,
    OUT sasl_identity text,
    OUT connection_failure text)
RETURNS record
AS 'MODULE_PATHNAME', 'zk_status_0_4'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_status() IS
'state of the ZooKeeper session of this cluster''s zklock worker';
