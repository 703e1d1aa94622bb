/* zklock--0.4--0.5.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '0.5'" to load this file. \quit

-- 0.5: zk_status() shows when the certificates of the worker's TLS
-- connection expire (its own and the server's) and warns of one that
-- expires within zklock.tls_expiry_warning days.  As in 0.3 to 0.4, the
-- function is dropped and created again (its OUT columns cannot change in
-- place; nothing depends on it, and it stays executable by PUBLIC), under
-- the symbol zk_status_0_5, which only a library of 0.5 or later has: run
-- by a server still on an older library, this update fails ("could not
-- find function"); restart the server on the new library first.  The
-- library of 0.5 also serves the zk_status() of earlier versions under
-- their symbols (their columns are a prefix).

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
    OUT connection_failure text,
    OUT tls_cert_expires timestamptz,
    OUT tls_server_cert_expires timestamptz,
    OUT tls_warning text)
RETURNS record
AS 'MODULE_PATHNAME', 'zk_status_0_5'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_status() IS
'state of the ZooKeeper session of this cluster''s zklock worker';
