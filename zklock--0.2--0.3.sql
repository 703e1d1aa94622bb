/* zklock--0.2--0.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '0.3'" to load this file. \quit

-- 0.3 adds the column waits_for to zk_locks: for a wait that lasted
-- deadlock_timeout, whom it waits for (issue 33, item 5).  A function's
-- result columns cannot change in place, so zk_locks() and the view over
-- it are dropped and made again as 0.3's full script makes them, with
-- the same comments and privileges (zk_locks() stays open to PUBLIC, the
-- view is granted to PUBLIC).  Its C symbol is new, zk_locks_0_3, so a
-- server still running 0.2's library (not restarted after the install)
-- refuses the update with "could not find function" instead of filling
-- 13 columns from 12.  No other object changes.

DROP VIEW zk_locks;
DROP FUNCTION zk_locks();

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
    OUT token bigint,
    OUT revocation_requested boolean,
    OUT waiting_for text,
    OUT waits_for text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_locks_0_3'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_locks() IS
'every zklock lock held or waited for in this cluster, as the zk_locks view shows it';

CREATE VIEW zk_locks AS SELECT * FROM zk_locks();
GRANT SELECT ON zk_locks TO PUBLIC;

COMMENT ON VIEW zk_locks IS
'every zklock lock held or waited for in this cluster';
