/*-------------------------------------------------------------------------
 *
 * backend/args.c
 *	  Argument parsing and validation of the SQL functions: paths, counts,
 *	  timeouts and flags, refused before anything reaches ZooKeeper; and
 *	  ZooKeeper's UTF-8 text in the database's encoding, as \x-hex when it
 *	  is invalid or cannot be converted (zklock_text_from_utf8,
 *	  zklock_utf8_text_datum).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "zklock.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "backend/backend.h"

/*
 * Validate a user's path and prefix it with zklock.namespace.  Errors
 * are raised here, before anything reaches the worker.
 */
void
zklock_make_lock_key(text *path_text, ZklockKind kind, BackendHoldKey *key, int *user_off)
{
	const char *raw = VARDATA_ANY(path_text);
	int			rawlen = VARSIZE_ANY_EXHDR(path_text);
	const char *utf8;
	size_t		bad = 0;
	ZklockPathError err;
	size_t		nslen = strlen(zklock_namespace ? zklock_namespace : "");

	if (rawlen > ZKLOCK_MAX_PATH_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid zookeeper path: %s",
						zklock_path_error_message(ZKLOCK_PATH_TOO_LONG)),
				 errdetail("The path is %d bytes long; the limit is %d.",
						   rawlen, ZKLOCK_MAX_PATH_LEN)));

	utf8 = pg_server_to_any(raw, rawlen, PG_UTF8);
	if (utf8 != raw)
		rawlen = strlen(utf8);
	err = zklock_validate_path(utf8, rawlen, ZKLOCK_MAX_PATH_LEN, &bad);
	if (err != ZKLOCK_PATH_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid zookeeper path: %s", zklock_path_error_message(err)),
				 errdetail("The problem is at byte %zu of the path.", bad + 1)));

	if (zklock_path_is_under(utf8, rawlen, ZKLOCK_WAITS_DIR))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid zookeeper path: \"%s\" is reserved by zklock",
						ZKLOCK_WAITS_DIR),
				 errdetail("zklock publishes lock waits there for the deadlock detection across clusters.")));

	memset(key, 0, sizeof(*key));
	key->kind = kind;
	memcpy(key->path, zklock_namespace, nslen);
	memcpy(key->path + nslen, utf8, rawlen);
	key->path[nslen + rawlen] = '\0';
	*user_off = (int) nslen;
}

/*
 * The path argument, or an error when it is NULL.
 */
text *
zklock_path_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("zookeeper path must not be null")));
	return PG_GETARG_TEXT_PP(argno);
}

/*
 * A boolean argument with a default; NULL counts as false.
 */
bool
zklock_bool_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return false;
	return PG_GETARG_BOOL(argno);
}

/*
 * A count argument that must be present and at least 1.
 */
int32
zklock_count_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int32		v;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
	v = PG_GETARG_INT32(argno);
	if (v < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at least 1", name),
				 errdetail("The value given was %d.", v)));
	return v;
}

/*
 * The type the called function declares for argument argno: a timeout is
 * declared interval, integer (milliseconds) or text (read as an interval)
 * by the overloads of one C function.  Interval when the function is not
 * known (a direct call).
 */
static Oid
declared_arg_type(FunctionCallInfo fcinfo, int argno)
{
	Oid		   *types;
	int			nargs;
	Oid			type = INTERVALOID;

	if (fcinfo->flinfo == NULL || !OidIsValid(fcinfo->flinfo->fn_oid))
		return type;
	(void) get_func_signature(fcinfo->flinfo->fn_oid, &types, &nargs);
	if (argno < nargs)
		type = types[argno];
	pfree(types);
	return type;
}

/*
 * The error of a negative timeout, whatever type it was written in.
 */
static void
negative_timeout(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("timeout must not be negative"),
			 errhint("Use NULL to wait until the lock is granted.")));
}

/*
 * The timeout argument in milliseconds; -1 for NULL (wait until granted).
 * An interval, integer milliseconds (as lock_timeout), or text read as an
 * interval (what a quoted literal such as '10 s' resolves to, so that it
 * is not ambiguous between the other two).  Negative values are an error.
 */
int64
zklock_timeout_arg(FunctionCallInfo fcinfo, int argno)
{
	Interval   *iv;
	int64		usecs;
	int64		part;
	Oid			type;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return -1;
	type = declared_arg_type(fcinfo, argno);
	if (type == INT4OID)
	{
		int32		ms = PG_GETARG_INT32(argno);

		if (ms < 0)
			negative_timeout();
		return ms;
	}
	if (type == TEXTOID)
	{
		char	   *s = TextDatumGetCString(PG_GETARG_DATUM(argno));

		iv = DatumGetIntervalP(DirectFunctionCall3(interval_in,
												   CStringGetDatum(s),
												   ObjectIdGetDatum(InvalidOid),
												   Int32GetDatum(-1)));
	}
	else
		iv = PG_GETARG_INTERVAL_P(argno);

	usecs = iv->time;
	if (pg_mul_s64_overflow((int64) iv->month, (int64) DAYS_PER_MONTH * USECS_PER_DAY, &part) ||
		pg_add_s64_overflow(usecs, part, &usecs) ||
		pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &part) ||
		pg_add_s64_overflow(usecs, part, &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timeout is out of range")));
	if (usecs < 0)
		negative_timeout();
	/* rounded up to the millisecond, without overflowing */
	return usecs / 1000 + (usecs % 1000 != 0);
}

/*
 * Bytes as \x followed by hex, the way bytea prints them.
 */
static char *
hex_text(const char *p, int len)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "\\x");
	for (i = 0; i < len; i++)
		appendStringInfo(&buf, "%02x", (unsigned char) p[i]);
	return buf.data;
}

/*
 * A UTF-8 string from ZooKeeper (a path, a node name, node data) in the
 * database encoding, always as a palloc'd copy.  In a UTF8 or SQL_ASCII
 * database the bytes are kept as they are (SQL_ASCII does no conversion
 * on the way in either).  In any other encoding the string is converted;
 * when it holds a character the encoding cannot represent (a path of
 * another database, say, seen through zk_locks), the whole string is shown
 * as \x-hex rather than failing the query.  Invalid UTF-8 (another
 * client's binary data) is shown as \x-hex too.
 */
char *
zklock_text_from_utf8(const char *p, int len)
{
	int			enc = GetDatabaseEncoding();
	MemoryContext cxt = CurrentMemoryContext;
	char	   *volatile result = NULL;

	if (!pg_verify_mbstr(PG_UTF8, p, len, true))
		return hex_text(p, len);
	if (enc == PG_UTF8 || enc == PG_SQL_ASCII)
		return pnstrdup(p, len);

	/* a conversion error has nothing to clean up but memory */
	PG_TRY();
	{
		char	   *conv = pg_any_to_server(p, len, PG_UTF8);

		result = conv == p ? pnstrdup(p, len) : conv;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		result = hex_text(p, len);
	}
	PG_END_TRY();
	return result;
}

/*
 * text_from_utf8 as a text Datum, for a NUL-terminated string.
 */
Datum
zklock_utf8_text_datum(const char *s)
{
	return CStringGetTextDatum(zklock_text_from_utf8(s, strlen(s)));
}
