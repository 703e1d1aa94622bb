/*-------------------------------------------------------------------------
 *
 * test_curator_rules.c
 *		cmocka unit tests of the zklock recipe core (src/core/curator_rules.c).
 *
 * Expected values are Curator 5.x / ZooKeeper 3.8 behaviour as written
 * down in doc/wire.md: what a Java peer would name, sort and decide.
 *
 * test/unit/test_curator_rules.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/curator_rules.h"

#define NOT_SET ((size_t) 0xDEADBEEF)

#define U1 "53345f98-9423-4e0c-a7b5-9f819e3ec2e1"
#define U2 "0b1e2c3d-4f5a-4b6c-8d7e-9f0a1b2c3d4e"
#define U3 "ffeeddcc-bbaa-4998-8877-665544332211"
#define U4 "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"

/*
 * Validate a literal (sizeof, so embedded NULs count) with the default
 * maximum and check the error and, for errors, the offset.  A macro so
 * that a failure names the line of the case.
 */
#define CHECK_PATH(lit, want, want_off) \
	do { \
		size_t off_ = NOT_SET; \
		ZklockPathError e_ = zklock_validate_path((lit), sizeof(lit) - 1, \
												  ZKLOCK_MAX_PATH_LEN, &off_); \
		if (e_ != (want)) \
			print_error("path \"%s\": got %d (%s), want %d\n", (lit), (int) e_, \
						zklock_path_error_message(e_), (int) (want)); \
		assert_int_equal(e_, (want)); \
		assert_int_equal(off_, (want) == ZKLOCK_PATH_OK ? NOT_SET : (size_t) (want_off)); \
	} while (0)

#define CHECK_OK(lit) CHECK_PATH(lit, ZKLOCK_PATH_OK, 0)

/* ---------------------------------------------------------------- paths */

static void
test_path_valid_simple_and_nested(void **state)
{
	(void) state;
	CHECK_OK("/a");
	CHECK_OK("/a/b");
	CHECK_OK("/a/b-c_d.e");
	CHECK_OK("/locks/orders/2024-01-01");
	CHECK_OK("/a b/with space");
	CHECK_OK("/~!@#$%^&*()=+[]{};:'\",<>?|\\");
}

static void
test_path_valid_utf8(void **state)
{
	(void) state;
	CHECK_OK("/\xc3\xa4\xc3\xb6\xc3\xbc");	/* /äöü */
	CHECK_OK("/\xe6\x97\xa5\xe6\x9c\xac/\xce\xb1\xce\xb2");	/* /日本/αβ */
	CHECK_OK("/\xc2\xa0");		/* U+00A0, first after the C1 block */
	CHECK_OK("/\xed\x9f\xbf");	/* U+D7FF, last before the refused block */
	CHECK_OK("/\xef\xa4\x80");	/* U+F900, first after private use */
	CHECK_OK("/\xef\xbf\xaf");	/* U+FFEF, last before U+FFF0 */
}

static void
test_path_valid_dots_inside_names(void **state)
{
	(void) state;
	CHECK_OK("/a/.b");
	CHECK_OK("/a/b.");
	CHECK_OK("/...");
	CHECK_OK("/a/..b");
	CHECK_OK("/a/b..");
	CHECK_OK("/.hidden/x");
}

static void
test_path_empty(void **state)
{
	(void) state;
	CHECK_PATH("", ZKLOCK_PATH_EMPTY, 0);
}

static void
test_path_no_leading_slash(void **state)
{
	(void) state;
	CHECK_PATH("a/b", ZKLOCK_PATH_NO_LEADING_SLASH, 0);
	CHECK_PATH("a", ZKLOCK_PATH_NO_LEADING_SLASH, 0);
	CHECK_PATH(" /a", ZKLOCK_PATH_NO_LEADING_SLASH, 0);
}

static void
test_path_root_alone_rejected(void **state)
{
	(void) state;
	CHECK_PATH("/", ZKLOCK_PATH_ROOT, 0);
}

static void
test_path_trailing_slash(void **state)
{
	(void) state;
	CHECK_PATH("/a/", ZKLOCK_PATH_TRAILING_SLASH, 2);
	CHECK_PATH("/a/b/", ZKLOCK_PATH_TRAILING_SLASH, 4);
	CHECK_PATH("//", ZKLOCK_PATH_TRAILING_SLASH, 1);
	/* ZooKeeper checks the end before scanning */
	CHECK_PATH("/a//", ZKLOCK_PATH_TRAILING_SLASH, 3);
}

static void
test_path_empty_component(void **state)
{
	(void) state;
	CHECK_PATH("/a//b", ZKLOCK_PATH_EMPTY_COMPONENT, 3);
	CHECK_PATH("//a", ZKLOCK_PATH_EMPTY_COMPONENT, 1);
	CHECK_PATH("/a/b///c", ZKLOCK_PATH_EMPTY_COMPONENT, 5);
}

static void
test_path_dot_components(void **state)
{
	(void) state;
	CHECK_PATH("/.", ZKLOCK_PATH_DOT_COMPONENT, 1);
	CHECK_PATH("/..", ZKLOCK_PATH_DOT_COMPONENT, 1);
	CHECK_PATH("/a/./b", ZKLOCK_PATH_DOT_COMPONENT, 3);
	CHECK_PATH("/a/..", ZKLOCK_PATH_DOT_COMPONENT, 3);
	CHECK_PATH("/a/../b", ZKLOCK_PATH_DOT_COMPONENT, 3);
	CHECK_PATH("/./a", ZKLOCK_PATH_DOT_COMPONENT, 1);
}

static void
test_path_control_characters_rejected(void **state)
{
	(void) state;
	CHECK_PATH("/\x01", ZKLOCK_PATH_BAD_CHARACTER, 1);
	CHECK_PATH("/a\x01" "b", ZKLOCK_PATH_BAD_CHARACTER, 2);
	CHECK_PATH("/a\tb", ZKLOCK_PATH_BAD_CHARACTER, 2);
	CHECK_PATH("/a\nb", ZKLOCK_PATH_BAD_CHARACTER, 2);
	CHECK_PATH("/a/\x1f", ZKLOCK_PATH_BAD_CHARACTER, 3);
	CHECK_PATH("/a\x7f", ZKLOCK_PATH_BAD_CHARACTER, 2);	/* U+007F DEL */
}

static void
test_path_nul_byte_rejected(void **state)
{
	(void) state;
	CHECK_PATH("/a\0b", ZKLOCK_PATH_BAD_CHARACTER, 2);
}

static void
test_path_c1_controls_rejected(void **state)
{
	(void) state;
	CHECK_PATH("/\xc2\x80", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+0080 */
	CHECK_PATH("/ab\xc2\x85", ZKLOCK_PATH_BAD_CHARACTER, 3);	/* U+0085 NEL */
	CHECK_PATH("/\xc2\x9f", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+009F */
}

static void
test_path_private_use_and_specials_rejected(void **state)
{
	(void) state;
	CHECK_PATH("/x\xee\x80\x80", ZKLOCK_PATH_BAD_CHARACTER, 2);	/* U+E000 */
	CHECK_PATH("/\xef\xa3\xbf", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+F8FF */
	CHECK_PATH("/\xef\xbf\xb0", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+FFF0 */
	CHECK_PATH("/\xef\xbf\xb5", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+FFF5 */
	CHECK_PATH("/\xef\xbf\xbd", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+FFFD */
	CHECK_PATH("/\xef\xbf\xbf", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+FFFF */
}

static void
test_path_supplementary_characters_rejected_as_java_surrogates(void **state)
{
	(void) state;
	/* U+1F600 reaches ZooKeeper as a surrogate pair, which it refuses */
	CHECK_PATH("/a\xf0\x9f\x98\x80", ZKLOCK_PATH_BAD_CHARACTER, 2);
	CHECK_PATH("/\xf0\x90\x80\x80", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+10000 */
	CHECK_PATH("/\xf4\x8f\xbf\xbf", ZKLOCK_PATH_BAD_CHARACTER, 1);	/* U+10FFFF */
}

static void
test_path_invalid_utf8_rejected(void **state)
{
	(void) state;
	CHECK_PATH("/\x80", ZKLOCK_PATH_BAD_ENCODING, 1);	/* lone continuation */
	CHECK_PATH("/ab\xbf", ZKLOCK_PATH_BAD_ENCODING, 3);
	CHECK_PATH("/\xff", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xfe", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xf5\x80\x80\x80", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xf4\x90\x80\x80", ZKLOCK_PATH_BAD_ENCODING, 1);	/* > U+10FFFF */
	CHECK_PATH("/\xc3", ZKLOCK_PATH_BAD_ENCODING, 1);	/* truncated at end */
	CHECK_PATH("/\xe2\x82", ZKLOCK_PATH_BAD_ENCODING, 1);	/* truncated at end */
	CHECK_PATH("/\xc3" "a", ZKLOCK_PATH_BAD_ENCODING, 1);	/* bad continuation */
	CHECK_PATH("/\xe2\x82/b", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xed\xa0\x80", ZKLOCK_PATH_BAD_ENCODING, 1);	/* encoded U+D800 */
	CHECK_PATH("/\xed\xbf\xbf", ZKLOCK_PATH_BAD_ENCODING, 1);	/* encoded U+DFFF */
}

static void
test_path_overlong_utf8_rejected(void **state)
{
	(void) state;
	/* overlong forms of '/' and '.' must not sneak in structure */
	CHECK_PATH("/a\xc0\xaf" "b", ZKLOCK_PATH_BAD_ENCODING, 2);
	CHECK_PATH("/\xc1\xbf", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xe0\x80\xae", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xe0\x9f\xbf", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xf0\x80\x80\xaf", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xf0\x8f\xbf\xbf", ZKLOCK_PATH_BAD_ENCODING, 1);
	CHECK_PATH("/\xc0\x80", ZKLOCK_PATH_BAD_ENCODING, 1);	/* modified UTF-8 NUL */
}

static void
test_path_length_limit_exact_ok_one_more_rejected(void **state)
{
	char		buf[ZKLOCK_MAX_PATH_LEN + 2];
	size_t		off = NOT_SET;

	(void) state;
	buf[0] = '/';
	memset(buf + 1, 'a', sizeof(buf) - 1);

	assert_int_equal(zklock_validate_path(buf, ZKLOCK_MAX_PATH_LEN,
										  ZKLOCK_MAX_PATH_LEN, &off),
					 ZKLOCK_PATH_OK);
	assert_int_equal(off, NOT_SET);
	assert_int_equal(zklock_validate_path(buf, ZKLOCK_MAX_PATH_LEN + 1,
										  ZKLOCK_MAX_PATH_LEN, &off),
					 ZKLOCK_PATH_TOO_LONG);
	assert_int_equal(off, ZKLOCK_MAX_PATH_LEN);

	/* the limit is in bytes: five 2-byte characters are 11 bytes */
	assert_int_equal(zklock_validate_path("/\xc3\xa4\xc3\xa4\xc3\xa4\xc3\xa4\xc3\xa4",
										  11, 11, NULL), ZKLOCK_PATH_OK);
	assert_int_equal(zklock_validate_path("/\xc3\xa4\xc3\xa4\xc3\xa4\xc3\xa4\xc3\xa4",
										  11, 10, &off), ZKLOCK_PATH_TOO_LONG);
	assert_int_equal(off, 10);
	assert_int_equal(zklock_validate_path("/abcdefghi", 10, 10, NULL),
					 ZKLOCK_PATH_OK);
	assert_int_equal(zklock_validate_path("/abcdefghij", 11, 10, NULL),
					 ZKLOCK_PATH_TOO_LONG);
}

static void
test_path_zookeeper_subtree_reserved(void **state)
{
	(void) state;
	CHECK_PATH("/zookeeper", ZKLOCK_PATH_RESERVED, 1);
	CHECK_PATH("/zookeeper/x", ZKLOCK_PATH_RESERVED, 1);
	CHECK_PATH("/zookeeper/quota/a", ZKLOCK_PATH_RESERVED, 1);
	CHECK_OK("/zookeeperx");
	CHECK_OK("/zookeepe");
	CHECK_OK("/ZooKeeper");
	CHECK_OK("/a/zookeeper");
}

static void
test_path_is_length_bounded_not_nul_terminated(void **state)
{
	const char	raw[] = {'/', 'a', 'b', '/'};	/* no NUL anywhere */
	size_t		off = NOT_SET;

	(void) state;
	assert_int_equal(zklock_validate_path(raw, 3, 480, &off), ZKLOCK_PATH_OK);
	assert_int_equal(zklock_validate_path(raw, 4, 480, &off),
					 ZKLOCK_PATH_TRAILING_SLASH);
	assert_int_equal(off, 3);
	/* "/a/./b" cut after "/a/." ends in a dot component */
	assert_int_equal(zklock_validate_path("/a/./b", 4, 480, &off),
					 ZKLOCK_PATH_DOT_COMPONENT);
	assert_int_equal(off, 3);
	/* NULL bad_offset is allowed */
	assert_int_equal(zklock_validate_path("a", 1, 480, NULL),
					 ZKLOCK_PATH_NO_LEADING_SLASH);
}

static void
test_path_error_messages(void **state)
{
	ZklockPathError e;
	ZklockPathError e2;

	(void) state;
	assert_string_equal(zklock_path_error_message(ZKLOCK_PATH_NO_LEADING_SLASH),
						"path must start with \"/\"");
	for (e = ZKLOCK_PATH_OK; e <= ZKLOCK_PATH_RESERVED; e++)
	{
		const char *m = zklock_path_error_message(e);
		size_t		l;

		assert_non_null(m);
		l = strlen(m);
		assert_true(l > 0);
		assert_true(m[0] >= 'a' && m[0] <= 'z');	/* lower case */
		assert_true(m[l - 1] != '.');	/* no period */
		assert_string_not_equal(m, "unknown path error");
		for (e2 = ZKLOCK_PATH_OK; e2 < e; e2++)
			assert_string_not_equal(m, zklock_path_error_message(e2));
	}
	assert_string_equal(zklock_path_error_message((ZklockPathError) 99),
						"unknown path error");
}

/* ---------------------------------------------------------------- uuids */

static void
test_uuid_sets_version_and_variant_like_java(void **state)
{
	unsigned char b[16];
	unsigned char copy[16];
	char		out[ZKLOCK_UUID_LEN + 1];
	int			i;

	(void) state;
	for (i = 0; i < 16; i++)
		b[i] = (unsigned char) i;
	memcpy(copy, b, 16);
	memset(out, 'X', sizeof(out));
	zklock_format_uuid(b, out);
	/* byte 6: 0x06 -> 0x46, byte 8: 0x08 -> 0x88 */
	assert_string_equal(out, "00010203-0405-4607-8809-0a0b0c0d0e0f");
	assert_memory_equal(b, copy, 16);	/* input untouched */

	memset(b, 0, 16);
	zklock_format_uuid(b, out);
	assert_string_equal(out, "00000000-0000-4000-8000-000000000000");

	memset(b, 0xff, 16);
	zklock_format_uuid(b, out);
	assert_string_equal(out, "ffffffff-ffff-4fff-bfff-ffffffffffff");
}

static void
test_uuid_of_real_curator_node_round_trips(void **state)
{
	/* a UUID of the form of doc/wire.md's example, version 4 / variant 10 */
	const unsigned char b[16] = {0x53, 0x34, 0x5f, 0x98, 0x94, 0x23, 0x4e, 0x0c,
	0xa7, 0xb5, 0x9f, 0x81, 0x9e, 0x3e, 0xc2, 0xe1};
	char		out[ZKLOCK_UUID_LEN + 1];

	(void) state;
	zklock_format_uuid(b, out);
	assert_string_equal(out, U1);
	assert_int_equal(strlen(out), ZKLOCK_UUID_LEN);
	assert_true(zklock_is_uuid(out));
}

static void
test_is_uuid_accepts_java_form(void **state)
{
	(void) state;
	assert_true(zklock_is_uuid(U1));
	assert_true(zklock_is_uuid(U2));
	assert_true(zklock_is_uuid("00000000-0000-0000-0000-000000000000"));
}

static void
test_is_uuid_rejects_other_forms(void **state)
{
	(void) state;
	assert_false(zklock_is_uuid(NULL));
	assert_false(zklock_is_uuid(""));
	assert_false(zklock_is_uuid("53345F98-9423-4E0C-A7B5-9F819E3EC2E1"));	/* upper */
	assert_false(zklock_is_uuid("53345f98-9423-4e0c-a7b5-9f819e3ec2e"));	/* 35 */
	assert_false(zklock_is_uuid("53345f98-9423-4e0c-a7b5-9f819e3ec2e1a"));	/* 37 */
	assert_false(zklock_is_uuid("53345f9889423-4e0c-a7b5-9f819e3ec2e1"));	/* no dash */
	assert_false(zklock_is_uuid("53345f9-89423-4e0c-a7b5-9f819e3ec2e1"));	/* dash moved */
	assert_false(zklock_is_uuid("53345f98-9423-4e0c-a7b5-9f819e3ec2eg"));	/* not hex */
	assert_false(zklock_is_uuid("53345f98942340e0ca7b59f819e3ec2e1000"));	/* no dashes */
	assert_false(zklock_is_uuid("_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1"));
}

/* ---------------------------------------------------------------- protected names */

static void
test_protected_prefix_is_c_uuid_dash(void **state)
{
	char		out[ZKLOCK_PROTECTED_PREFIX_LEN + 1];

	(void) state;
	zklock_protected_prefix(U1, out);
	assert_string_equal(out, "_c_" U1 "-");
	assert_int_equal(strlen(out), 40);
	assert_int_equal(ZKLOCK_PROTECTED_PREFIX_LEN, 40);
}

static void
test_protected_name_for_each_recipe(void **state)
{
	char		out[128];

	(void) state;
	assert_int_equal(zklock_protected_name(U1, "lock-", out, sizeof(out)), 45);
	assert_string_equal(out, "_c_" U1 "-lock-");
	assert_int_equal(zklock_protected_name(U1, "__READ__", out, sizeof(out)), 48);
	assert_string_equal(out, "_c_" U1 "-__READ__");
	assert_int_equal(zklock_protected_name(U1, "__WRIT__", out, sizeof(out)), 48);
	assert_string_equal(out, "_c_" U1 "-__WRIT__");
	assert_int_equal(zklock_protected_name(U1, "lease-", out, sizeof(out)), 46);
	assert_string_equal(out, "_c_" U1 "-lease-");
}

static void
test_protected_name_truncates_like_snprintf(void **state)
{
	char		out[64];

	(void) state;
	memset(out, 'X', sizeof(out));
	assert_int_equal(zklock_protected_name(U1, "lock-", out, 10), 45);
	assert_string_equal(out, "_c_53345f");
	assert_int_equal(out[10], 'X');

	memset(out, 'X', sizeof(out));
	assert_int_equal(zklock_protected_name(U1, "lock-", out, 43), 45);
	assert_string_equal(out, "_c_" U1 "-lo");

	/* exactly enough room */
	assert_int_equal(zklock_protected_name(U1, "lock-", out, 46), 45);
	assert_string_equal(out, "_c_" U1 "-lock-");

	memset(out, 'X', sizeof(out));
	assert_int_equal(zklock_protected_name(U1, "lock-", out, 1), 45);
	assert_string_equal(out, "");
	assert_int_equal(zklock_protected_name(U1, "lock-", NULL, 0), 45);
}

static void
test_find_protected_recovers_lost_create(void **state)
{
	char	   *children[] = {
		"_c_" U2 "-lock-0000000001",
		"_c_" U3 "-lock-0000000002",
		"_c_" U1 "-lock-0000000003",
		"_c_" U1 "-lock-0000000009",
	};
	char		prefix[ZKLOCK_PROTECTED_PREFIX_LEN + 1];

	(void) state;
	zklock_protected_prefix(U1, prefix);
	assert_int_equal(zklock_find_protected(children, 4, prefix), 2);
	zklock_protected_prefix(U2, prefix);
	assert_int_equal(zklock_find_protected(children, 4, prefix), 0);
	zklock_protected_prefix("11111111-2222-4333-8444-555555555555", prefix);
	assert_int_equal(zklock_find_protected(children, 4, prefix), -1);
	assert_int_equal(zklock_find_protected(children, 0, prefix), -1);
	/* the prefix must be at the start, not anywhere in the name */
	assert_int_equal(zklock_find_protected(children, 4, U1 "-lock-"), -1);
}

/* ---------------------------------------------------------------- sort keys */

static void
test_sort_key_strips_through_lock_name(void **state)
{
	const char *n1 = "_c_x-lock-0000000003";
	const char *n2 = "_c_" U1 "-lock-0000000007";
	const char *n3 = "lock-0000000001";

	(void) state;
	assert_string_equal(zklock_sort_key(n1, "lock-"), "0000000003");
	assert_ptr_equal(zklock_sort_key(n1, "lock-"), n1 + 10);
	assert_string_equal(zklock_sort_key(n2, "lock-"), "0000000007");
	assert_string_equal(zklock_sort_key(n3, "lock-"), "0000000001");
	assert_string_equal(zklock_sort_key("_c_" U1 "-lease-0000000004", "lease-"),
						"0000000004");
}

static void
test_sort_key_whole_name_without_lock_name(void **state)
{
	const char *foo = "foo";
	const char *seq = "0000000005";

	(void) state;
	assert_ptr_equal(zklock_sort_key(foo, "lock-"), foo);
	assert_ptr_equal(zklock_sort_key(seq, "lock-"), seq);
	assert_string_equal(zklock_sort_key("", "lock-"), "");
	/* "lock" without the dash is not the lock name */
	assert_string_equal(zklock_sort_key("lock0000000001", "lock-"), "lock0000000001");
}

static void
test_sort_key_uses_last_occurrence(void **state)
{
	(void) state;
	assert_string_equal(zklock_sort_key("lock-lock-0000000005", "lock-"), "0000000005");
	assert_string_equal(zklock_sort_key("_c_x-mylock-app-lock-0000000002", "lock-"),
						"0000000002");
	assert_string_equal(zklock_sort_key("_c_x-lock-0000000002lock-9", "lock-"), "9");
	/* name ending in the lock name: empty key */
	assert_string_equal(zklock_sort_key("_c_x-lock-", "lock-"), "");
	/* overlapping occurrences: Java's lastIndexOf finds the last start */
	assert_string_equal(zklock_sort_key("xaaay", "aa"), "y");
	assert_string_equal(zklock_sort_key("aaaa", "aa"), "");
	/* empty lock name occurs at the end, as in Java */
	assert_string_equal(zklock_sort_key("abc", ""), "");
}

static void
test_sort_key_negative_sequence_after_overflow(void **state)
{
	(void) state;
	/* the server prints the signed counter with %010d */
	assert_string_equal(zklock_sort_key("_c_x-lock--000000001", "lock-"), "-000000001");
	assert_string_equal(zklock_sort_key("_c_x-lock--2147483648", "lock-"), "-2147483648");
}

static void
test_rw_sort_key(void **state)
{
	(void) state;
	assert_string_equal(zklock_rw_sort_key("_c_" U1 "-__READ__0000000002"), "0000000002");
	assert_string_equal(zklock_rw_sort_key("_c_" U1 "-__WRIT__0000000001"), "0000000001");
	assert_string_equal(zklock_rw_sort_key("__READ____WRIT__0000000003"), "0000000003");
	assert_string_equal(zklock_rw_sort_key("__WRIT____READ__0000000004"), "0000000004");
	assert_string_equal(zklock_rw_sort_key("_c_x-lock-0000000001"), "_c_x-lock-0000000001");
}

/* ---------------------------------------------------------------- sorting */

static void
test_sort_shuffled_nodes_from_different_uuids(void **state)
{
	char	   *names[] = {
		"_c_9a0b1c2d-0000-4000-8000-000000000001-lock-0000000006",
		"_c_00000000-0000-4000-8000-000000000002-lock-0000000009",
		"_c_ffffffff-0000-4000-8000-000000000003-lock-0000000000",
		"_c_12345678-0000-4000-8000-000000000004-lock-0000000003",
		"_c_abcdef01-0000-4000-8000-000000000005-lock-0000000008",
		"_c_77777777-0000-4000-8000-000000000006-lock-0000000001",
		"_c_0fedcba9-0000-4000-8000-000000000007-lock-0000000005",
		"_c_c0ffee00-0000-4000-8000-000000000008-lock-0000000002",
		"_c_deadbeef-0000-4000-8000-000000000009-lock-0000000007",
		"_c_55555555-0000-4000-8000-00000000000a-lock-0000000004",
	};
	char		want[16];
	int			i;

	(void) state;
	zklock_sort_children(names, 10, "lock-");
	for (i = 0; i < 10; i++)
	{
		sprintf(want, "%010d", i);
		assert_string_equal(zklock_sort_key(names[i], "lock-"), want);
	}
	/* the holder is the lowest sequence, whatever its uuid */
	assert_string_equal(names[0], "_c_ffffffff-0000-4000-8000-000000000003-lock-0000000000");
}

static void
test_sort_mixed_curator_and_foreign_names(void **state)
{
	char	   *names[] = {
		"foo",
		"_c_b-lock-0000000002",
		"lock-0000000003",		/* unprotected Curator node */
		"_c_a-lock-0000000001",
		"0000000000",
	};

	(void) state;
	zklock_sort_children(names, 5, "lock-");
	assert_string_equal(names[0], "0000000000");
	assert_string_equal(names[1], "_c_a-lock-0000000001");
	assert_string_equal(names[2], "_c_b-lock-0000000002");
	assert_string_equal(names[3], "lock-0000000003");
	assert_string_equal(names[4], "foo");	/* 'f' sorts after digits */
}

static void
test_sort_ties_broken_by_full_name(void **state)
{
	char	   *names[] = {
		"_c_c-lock-0000000001",
		"_c_b-lock-0000000001",
		"_c_a-lock-0000000001",
	};

	(void) state;
	zklock_sort_children(names, 3, "lock-");
	assert_string_equal(names[0], "_c_a-lock-0000000001");
	assert_string_equal(names[1], "_c_b-lock-0000000001");
	assert_string_equal(names[2], "_c_c-lock-0000000001");
}

static void
test_sort_negative_sequences_first_as_curator_does(void **state)
{
	char	   *names[] = {
		"_c_a-lock-2147483647",
		"_c_b-lock--2147483648",
		"_c_c-lock-0000000000",
		"_c_d-lock--000000001",
	};

	(void) state;
	zklock_sort_children(names, 4, "lock-");
	/* string order, not numeric: '-' < '0', then "-0..." < "-2..." */
	assert_string_equal(names[0], "_c_d-lock--000000001");
	assert_string_equal(names[1], "_c_b-lock--2147483648");
	assert_string_equal(names[2], "_c_c-lock-0000000000");
	assert_string_equal(names[3], "_c_a-lock-2147483647");
}

static void
test_sort_large_reversed_queue(void **state)
{
	enum
	{
	NNAMES = 1000};
	static char bufs[NNAMES][32];
	char	   *names[NNAMES];
	char		want[32];
	int			i;

	(void) state;
	for (i = 0; i < NNAMES; i++)
	{
		/* uuid part decreasing as the sequence grows */
		sprintf(bufs[i], "_c_%04d-lock-%010d", NNAMES - i, (i * 7919) % NNAMES);
		names[i] = bufs[i];
	}
	zklock_sort_children(names, NNAMES, "lock-");
	for (i = 0; i < NNAMES; i++)
	{
		sprintf(want, "%010d", i);
		assert_string_equal(zklock_sort_key(names[i], "lock-"), want);
	}
}

static void
test_sort_empty_and_single(void **state)
{
	char	   *one[] = {"_c_a-lock-0000000001"};

	(void) state;
	zklock_sort_children(NULL, 0, "lock-");
	zklock_sort_children(one, 1, "lock-");
	assert_string_equal(one[0], "_c_a-lock-0000000001");
	zklock_rw_sort_children(NULL, 0);
}

static void
test_find_child_exact_match_only(void **state)
{
	char	   *names[] = {"_c_a-lock-0000000001", "_c_b-lock-0000000002"};

	(void) state;
	assert_int_equal(zklock_find_child(names, 2, "_c_b-lock-0000000002"), 1);
	assert_int_equal(zklock_find_child(names, 2, "_c_a-lock-0000000001"), 0);
	assert_int_equal(zklock_find_child(names, 2, "_c_b-lock-000000000"), -1);
	assert_int_equal(zklock_find_child(names, 2, "_c_b-lock-00000000021"), -1);
	assert_int_equal(zklock_find_child(names, 0, "_c_a-lock-0000000001"), -1);
}

/* ---------------------------------------------------------------- mutex decisions */

static char *sorted3[] = {
	"_c_" U2 "-lock-0000000001",
	"_c_" U1 "-lock-0000000002",
	"_c_" U3 "-lock-0000000003",
};

static void
test_lock_decide_lowest_node_holds(void **state)
{
	ZklockLockDecision d = zklock_lock_decide(sorted3, 3, "_c_" U2 "-lock-0000000001", 1);

	(void) state;
	assert_false(d.lost);
	assert_true(d.holds);
	assert_int_equal(d.own_index, 0);
	assert_int_equal(d.watch_index, -1);

	/* alone in the queue */
	d = zklock_lock_decide(sorted3, 1, "_c_" U2 "-lock-0000000001", 1);
	assert_true(d.holds);
}

static void
test_lock_decide_waiter_watches_its_predecessor(void **state)
{
	ZklockLockDecision d = zklock_lock_decide(sorted3, 3, "_c_" U1 "-lock-0000000002", 1);

	(void) state;
	assert_false(d.lost);
	assert_false(d.holds);
	assert_int_equal(d.own_index, 1);
	assert_int_equal(d.watch_index, 0);

	d = zklock_lock_decide(sorted3, 3, "_c_" U3 "-lock-0000000003", 1);
	assert_false(d.holds);
	assert_int_equal(d.own_index, 2);
	assert_int_equal(d.watch_index, 1);	/* not the holder: one wake-up each */
	assert_int_equal(d.blockers, 2);	/* the holder is ahead too */

	d = zklock_lock_decide(sorted3, 3, "_c_" U1 "-lock-0000000002", 1);
	assert_int_equal(d.blockers, 1);	/* the holder is all that is ahead */
}

/*
 * A node whose sequence number is one more than another's was created right
 * after it: nothing can sort between them.  Anything else (a gap, the other
 * order, the same number, a name that is no plain ten-digit sequence, the
 * counter's negative overflow) does not count.
 */
static void
test_seq_follows_only_the_next_number(void **state)
{
	(void) state;
	assert_true(zklock_seq_follows("_c_" U1 "-lock-0000000001",
								   "_c_" U2 "-lock-0000000002", ZKLOCK_LOCK_NAME));
	assert_true(zklock_seq_follows("_c_" U1 "-lock-0000000009",
								   "_c_" U1 "-lock-0000000010", ZKLOCK_LOCK_NAME));
	assert_true(zklock_seq_follows("_c_" U1 "-lock-2147483646",
								   "_c_" U1 "-lock-2147483647", ZKLOCK_LOCK_NAME));
	/* a gap: some node was created between them */
	assert_false(zklock_seq_follows("_c_" U1 "-lock-0000000001",
									"_c_" U2 "-lock-0000000003", ZKLOCK_LOCK_NAME));
	assert_false(zklock_seq_follows("_c_" U1 "-lock-0000000002",
									"_c_" U2 "-lock-0000000001", ZKLOCK_LOCK_NAME));
	assert_false(zklock_seq_follows("_c_" U1 "-lock-0000000002",
									"_c_" U2 "-lock-0000000002", ZKLOCK_LOCK_NAME));
	/* the overflow: Curator sorts these by their text, not by number */
	assert_false(zklock_seq_follows("_c_" U1 "-lock-2147483647",
									"_c_" U1 "-lock--2147483648", ZKLOCK_LOCK_NAME));
	assert_false(zklock_seq_follows("_c_" U1 "-lock--000000002",
									"_c_" U1 "-lock--000000001", ZKLOCK_LOCK_NAME));
	/* not a lock node with a sequence */
	assert_false(zklock_seq_follows("_c_" U1 "-lock-000000001",
									"_c_" U1 "-lock-000000002", ZKLOCK_LOCK_NAME));
	assert_false(zklock_seq_follows("_c_" U1 "-lock-00000000x1",
									"_c_" U1 "-lock-0000000002", ZKLOCK_LOCK_NAME));
	assert_false(zklock_seq_follows("", "", ZKLOCK_LOCK_NAME));
}

/*
 * Read lock nodes: a reader follows the reader numbered one less; a write
 * node is never taken for a read node, whatever its number.
 */
static void
test_seq_follows_read_nodes(void **state)
{
	(void) state;
	assert_true(zklock_seq_follows("_c_" U1 "-" ZKLOCK_READ_LOCK_NAME "0000000041",
								   "_c_" U2 "-" ZKLOCK_READ_LOCK_NAME "0000000042",
								   ZKLOCK_READ_LOCK_NAME));
	assert_false(zklock_seq_follows("_c_" U1 "-" ZKLOCK_WRITE_LOCK_NAME "0000000041",
									"_c_" U2 "-" ZKLOCK_READ_LOCK_NAME "0000000042",
									ZKLOCK_READ_LOCK_NAME));
	/* a writer was created between the two readers */
	assert_false(zklock_seq_follows("_c_" U1 "-" ZKLOCK_READ_LOCK_NAME "0000000041",
									"_c_" U2 "-" ZKLOCK_READ_LOCK_NAME "0000000043",
									ZKLOCK_READ_LOCK_NAME));
}

static void
test_lock_decide_lost_when_own_node_missing(void **state)
{
	ZklockLockDecision d = zklock_lock_decide(sorted3, 3, "_c_" U1 "-lock-0000000009", 1);

	(void) state;
	assert_true(d.lost);
	assert_false(d.holds);
	assert_int_equal(d.own_index, -1);
	assert_int_equal(d.watch_index, -1);

	d = zklock_lock_decide(NULL, 0, "_c_" U1 "-lock-0000000002", 1);
	assert_true(d.lost);
	assert_false(d.holds);
}

static void
test_lock_decide_three_leases(void **state)
{
	char	   *s[] = {"_c_a-lock-0000000001", "_c_b-lock-0000000002",
		"_c_c-lock-0000000003", "_c_d-lock-0000000004", "_c_e-lock-0000000005"};
	ZklockLockDecision d;

	(void) state;
	d = zklock_lock_decide(s, 5, "_c_a-lock-0000000001", 3);
	assert_true(d.holds);
	assert_int_equal(d.watch_index, -1);
	d = zklock_lock_decide(s, 5, "_c_c-lock-0000000003", 3);
	assert_true(d.holds);
	assert_int_equal(d.own_index, 2);
	assert_int_equal(d.watch_index, -1);
	d = zklock_lock_decide(s, 5, "_c_d-lock-0000000004", 3);
	assert_false(d.holds);
	assert_int_equal(d.own_index, 3);
	assert_int_equal(d.watch_index, 0);
	assert_int_equal(d.blockers, 1);	/* one of three must go */
	d = zklock_lock_decide(s, 5, "_c_e-lock-0000000005", 3);
	assert_false(d.holds);
	assert_int_equal(d.watch_index, 1);
	assert_int_equal(d.blockers, 2);
}

static void
test_lock_decide_max_leases_below_one_is_a_mutex(void **state)
{
	ZklockLockDecision d;

	(void) state;
	d = zklock_lock_decide(sorted3, 3, "_c_" U2 "-lock-0000000001", 0);
	assert_true(d.holds);
	d = zklock_lock_decide(sorted3, 3, "_c_" U1 "-lock-0000000002", -5);
	assert_false(d.holds);
	assert_int_equal(d.watch_index, 0);
}

static void
test_lock_decide_after_sorting_shuffled_children(void **state)
{
	char	   *c[] = {
		"_c_" U3 "-lock-0000000012",
		"_c_" U1 "-lock-0000000011",
		"_c_" U2 "-lock-0000000010",
	};
	ZklockLockDecision d;

	(void) state;
	zklock_sort_children(c, 3, "lock-");
	d = zklock_lock_decide(c, 3, "_c_" U3 "-lock-0000000012", 1);
	assert_false(d.holds);
	assert_string_equal(c[d.watch_index], "_c_" U1 "-lock-0000000011");
}

/* ---------------------------------------------------------------- read/write lock */

#define W1 "_c_" U1 "-__WRIT__0000000003"
#define R1 "_c_" U2 "-__READ__0000000001"
#define R2 "_c_" U3 "-__READ__0000000002"
#define R4 "_c_aaaaaaaa-0000-4000-8000-000000000004-__READ__0000000004"
#define W5 "_c_bbbbbbbb-0000-4000-8000-000000000005-__WRIT__0000000005"

static void
test_rw_sort_orders_readers_and_writers_by_sequence(void **state)
{
	char	   *c[] = {W5, R4, W1, R2, R1};

	(void) state;
	zklock_rw_sort_children(c, 5);
	assert_string_equal(c[0], R1);
	assert_string_equal(c[1], R2);
	assert_string_equal(c[2], W1);
	assert_string_equal(c[3], R4);
	assert_string_equal(c[4], W5);
}

static void
test_read_decide_readers_before_first_writer_hold(void **state)
{
	char	   *c[] = {R1, R2, W1, R4, W5};
	ZklockLockDecision d;

	(void) state;
	d = zklock_read_decide(c, 5, R1);
	assert_false(d.lost);
	assert_true(d.holds);
	assert_int_equal(d.own_index, 0);
	assert_int_equal(d.watch_index, -1);
	assert_int_equal(d.blockers, 0);
	d = zklock_read_decide(c, 5, R2);
	assert_true(d.holds);
	assert_int_equal(d.own_index, 1);
	assert_int_equal(d.watch_index, -1);
}

static void
test_read_decide_reader_after_writer_watches_that_writer(void **state)
{
	char	   *c[] = {R1, R2, W1, R4, W5};
	ZklockLockDecision d;

	(void) state;
	d = zklock_read_decide(c, 5, R4);
	assert_false(d.lost);
	assert_false(d.holds);
	assert_int_equal(d.own_index, 3);
	assert_int_equal(d.watch_index, 2);
	assert_string_equal(c[d.watch_index], W1);
	assert_int_equal(d.blockers, 1);	/* readers ahead do not count */
}

static void
test_read_decide_watches_lowest_writer_not_nearest(void **state)
{
	char	   *r6 = "_c_cccccccc-0000-4000-8000-000000000006-__READ__0000000006";
	char	   *c[] = {R1, W1, R4, W5, r6};
	ZklockLockDecision d;

	(void) state;
	d = zklock_read_decide(c, 5, r6);
	assert_false(d.holds);
	assert_int_equal(d.own_index, 4);
	assert_int_equal(d.watch_index, 1);	/* W1, not W5 */
	assert_int_equal(d.blockers, 2);	/* W1 and W5 keep it out */
}

static void
test_read_decide_all_readers_hold_without_writers(void **state)
{
	char	   *c[] = {R1, R2, R4};
	ZklockLockDecision d;

	(void) state;
	d = zklock_read_decide(c, 3, R4);
	assert_true(d.holds);
	assert_int_equal(d.own_index, 2);
	assert_int_equal(d.watch_index, -1);
}

static void
test_read_decide_lost_when_own_missing(void **state)
{
	char	   *c[] = {R1, W1, R4};
	ZklockLockDecision d;

	(void) state;
	d = zklock_read_decide(c, 3, R2);
	assert_true(d.lost);
	assert_false(d.holds);
	assert_int_equal(d.own_index, -1);
	assert_int_equal(d.watch_index, -1);
	/* a writer's name is never taken for our read node */
	d = zklock_read_decide(c, 3, W1);
	assert_true(d.lost);
}

static void
test_read_decide_matches_own_with_starts_with(void **state)
{
	char	   *c[] = {R1, W1, R4};
	ZklockLockDecision d;

	(void) state;
	/* Curator matches our node with startsWith, not equals */
	d = zklock_read_decide(c, 3, "_c_" U2 "-__READ__");
	assert_false(d.lost);
	assert_int_equal(d.own_index, 0);
	assert_true(d.holds);
}

static void
test_write_decide_via_lock_decide_on_rw_sorted(void **state)
{
	char	   *c[] = {W5, R4, W1, R2, R1};
	ZklockLockDecision d;

	(void) state;
	zklock_rw_sort_children(c, 5);	/* R1 R2 W1 R4 W5 */
	/* a writer waits behind readers too: W1 watches R2 */
	d = zklock_lock_decide(c, 5, W1, 1);
	assert_false(d.holds);
	assert_int_equal(d.own_index, 2);
	assert_int_equal(d.watch_index, 1);
	assert_string_equal(c[d.watch_index], R2);
	/* W5 watches the reader R4 before it */
	d = zklock_lock_decide(c, 5, W5, 1);
	assert_false(d.holds);
	assert_string_equal(c[d.watch_index], R4);

	/* with the readers gone W1 holds the write lock */
	{
		char	   *c2[] = {W5, W1};

		zklock_rw_sort_children(c2, 2);
		d = zklock_lock_decide(c2, 2, W1, 1);
		assert_true(d.holds);
		assert_int_equal(d.own_index, 0);
	}
}

static void
test_rw_downgrade_read_node_sorts_at_writers_place(void **state)
{
	/* Curator 5.5+: read node named with the writer's sequence */
	char	   *down = "_c_" U1 "-__READ__0000000003";
	char	   *c[] = {W5, W1, down};
	ZklockLockDecision d;

	(void) state;
	zklock_rw_sort_children(c, 3);
	assert_string_equal(c[0], down);
	assert_string_equal(c[1], W1);
	assert_string_equal(c[2], W5);
	d = zklock_read_decide(c, 3, down);
	assert_true(d.holds);
	/* the queued writer stays behind the downgraded holder */
	d = zklock_lock_decide(c, 3, W5, 1);
	assert_false(d.holds);
	assert_string_equal(c[d.watch_index], W1);
}

/* ---------------------------------------------------------------- holders (revocation) */

/* A mutex is held by its first node only. */
static void
test_holders_mutex_first_only(void **state)
{
	char	   *c[] = {"_c_" U1 "-lock-0000000001", "_c_" U2 "-lock-0000000002"};
	int			h[2];

	(void) state;
	assert_int_equal(zklock_lock_holders(c, 2, false, h), 1);
	assert_int_equal(h[0], 0);
	assert_int_equal(zklock_lock_holders(c, 0, false, h), 0);
}

/* Readers hold up to the first writer; a first writer holds alone. */
static void
test_holders_readers_then_writer(void **state)
{
	char	   *readers[] = {"_c_" U1 "-__READ__0000000001", "_c_" U2 "-__READ__0000000002",
	"_c_" U3 "-__WRIT__0000000003", "_c_" U4 "-__READ__0000000004"};
	char	   *writer[] = {"_c_" U1 "-__WRIT__0000000001", "_c_" U2 "-__READ__0000000002"};
	int			h[4];

	(void) state;
	assert_int_equal(zklock_lock_holders(readers, 4, true, h), 2);
	assert_int_equal(h[0], 0);
	assert_int_equal(h[1], 1);
	assert_int_equal(zklock_lock_holders(writer, 2, true, h), 1);
	assert_int_equal(h[0], 0);
}

/*
 * A write holder that downgraded holds two nodes with the same sequence
 * number: both are holders, whichever sorts first, and the readers behind
 * the writer are not.
 */
static void
test_holders_downgraded_writer(void **state)
{
	char	   *wr[] = {"_c_" U1 "-__WRIT__0000000005", "_c_" U1 "-__READ__0000000005",
	"_c_" U2 "-__READ__0000000006"};
	char	   *rw[] = {"_c_" U1 "-__READ__0000000005", "_c_" U1 "-__WRIT__0000000005",
	"_c_" U2 "-__READ__0000000006"};
	int			h[3];

	(void) state;
	assert_int_equal(zklock_lock_holders(wr, 3, true, h), 2);
	assert_int_equal(h[0], 0);
	assert_int_equal(h[1], 1);
	assert_int_equal(zklock_lock_holders(rw, 3, true, h), 2);
	assert_int_equal(h[0], 0);
	assert_int_equal(h[1], 1);
}

/* ---------------------------------------------------------------- double barrier */

#define M1 "1a2b3c4d-0000-4000-8000-000000000001"
#define M2 "5e6f7a8b-0000-4000-8000-000000000002"
#define M3 "c9d0e1f2-0000-4000-8000-000000000003"

static void
test_leave_done_when_no_members(void **state)
{
	char	   *only_ready[] = {"ready"};
	const char *w = "junk";

	(void) state;
	assert_int_equal(zklock_double_barrier_leave_decide(only_ready, 1, M1, false, &w),
					 ZKLOCK_LEAVE_DONE);
	assert_null(w);
	w = "junk";
	assert_int_equal(zklock_double_barrier_leave_decide(NULL, 0, M1, false, &w),
					 ZKLOCK_LEAVE_DONE);
	assert_null(w);
}

static void
test_leave_error_when_own_node_missing(void **state)
{
	char	   *c[] = {"ready", M2, M3};
	const char *w = "junk";

	(void) state;
	assert_int_equal(zklock_double_barrier_leave_decide(c, 3, M1, false, &w),
					 ZKLOCK_LEAVE_ERROR_MISSING);
	assert_null(w);
}

static void
test_leave_only_ours_left_delete_and_done(void **state)
{
	char	   *c[] = {M2, "ready"};
	const char *w = "junk";

	(void) state;
	assert_int_equal(zklock_double_barrier_leave_decide(c, 2, M2, false, &w),
					 ZKLOCK_LEAVE_DELETE_OURS_DONE);
	assert_null(w);
}

static void
test_leave_lowest_watches_highest(void **state)
{
	char	   *c[] = {M3, "ready", M1, M2};
	const char *w = NULL;

	(void) state;
	assert_int_equal(zklock_double_barrier_leave_decide(c, 4, M1, false, &w),
					 ZKLOCK_LEAVE_WATCH_HIGHEST);
	assert_non_null(w);
	assert_string_equal(w, M3);
	assert_ptr_equal(w, c[0]);	/* points into children */
}

static void
test_leave_others_delete_ours_and_watch_lowest(void **state)
{
	char	   *c[] = {M3, "ready", M1, M2};
	const char *w = NULL;

	(void) state;
	assert_int_equal(zklock_double_barrier_leave_decide(c, 4, M2, false, &w),
					 ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST);
	assert_string_equal(w, M1);
	w = NULL;
	assert_int_equal(zklock_double_barrier_leave_decide(c, 4, M3, false, &w),
					 ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST);
	assert_string_equal(w, M1);
}

static void
test_leave_two_members_lowest_and_highest(void **state)
{
	char	   *c[] = {M2, M1};
	const char *w = NULL;

	(void) state;
	assert_int_equal(zklock_double_barrier_leave_decide(c, 2, M1, false, &w),
					 ZKLOCK_LEAVE_WATCH_HIGHEST);
	assert_string_equal(w, M2);
	assert_int_equal(zklock_double_barrier_leave_decide(c, 2, M2, false, &w),
					 ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST);
	assert_string_equal(w, M1);
	/* watch_name may be NULL */
	assert_int_equal(zklock_double_barrier_leave_decide(c, 2, M2, false, NULL),
					 ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST);
}

static void
test_leave_after_ours_deleted_pass_null_own(void **state)
{
	char	   *two[] = {"ready", M3, M1};
	char	   *one[] = {M3, "ready"};
	const char *w = NULL;

	(void) state;
	assert_int_equal(zklock_double_barrier_leave_decide(two, 3, NULL, false, &w),
					 ZKLOCK_LEAVE_WATCH_LOWEST);
	assert_string_equal(w, M1);
	w = "junk";
	assert_int_equal(zklock_double_barrier_leave_decide(one, 2, NULL, false, &w),
					 ZKLOCK_LEAVE_DONE);
	assert_null(w);
	assert_int_equal(zklock_double_barrier_leave_decide(one, 1, NULL, false, &w),
					 ZKLOCK_LEAVE_DONE);
}

/*
 * A delete of our member node was sent but its reply never came (the
 * connection dropped, the worker restarted): ours missing is then no
 * error, it is the delete having been applied.  Found, it is still ours.
 */
static void
test_leave_own_delete_sent(void **state)
{
	char	   *others[] = {"ready", M3, M1};
	char	   *one[] = {M3};
	char	   *with_ours[] = {M3, M2, M1};
	const char *w = NULL;

	(void) state;
	/* gone, two others left: watch the lowest of them */
	assert_int_equal(zklock_double_barrier_leave_decide(others, 3, M2, true, &w),
					 ZKLOCK_LEAVE_WATCH_LOWEST);
	assert_string_equal(w, M1);
	/* gone, one other left: done, as after a confirmed delete */
	assert_int_equal(zklock_double_barrier_leave_decide(one, 1, M2, true, &w),
					 ZKLOCK_LEAVE_DONE);
	/* gone and nobody else: done */
	assert_int_equal(zklock_double_barrier_leave_decide(NULL, 0, M2, true, &w),
					 ZKLOCK_LEAVE_DONE);
	/* the delete was not applied: ours is still there and still counts */
	assert_int_equal(zklock_double_barrier_leave_decide(with_ours, 3, M2, true, &w),
					 ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST);
	assert_string_equal(w, M1);
	/* without a delete sent, missing is an error */
	assert_int_equal(zklock_double_barrier_leave_decide(others, 3, M2, false, &w),
					 ZKLOCK_LEAVE_ERROR_MISSING);
}

/* Barrier calls refuse every node a recipe makes, and nothing else. */
static void
test_curator_rules_node_kind(void **state)
{
	(void) state;
	assert_string_equal(zklock_recipe_node_kind("_c_" U1 "-lock-0000000003"), "lock");
	assert_string_equal(zklock_recipe_node_kind("lock-0000000003"), "lock");
	assert_string_equal(zklock_recipe_node_kind("_c_" U1 "-lease-0000000000"), "lease");
	assert_string_equal(zklock_recipe_node_kind("_c_" U1 "-__READ__0000000012"), "read lock");
	assert_string_equal(zklock_recipe_node_kind("_c_" U1 "-__WRIT__0000000012"), "write lock");
	assert_string_equal(zklock_recipe_node_kind("x__WRIT__0000000012"), "write lock");
	assert_string_equal(zklock_recipe_node_kind("_c_" U1 "-anything"), "protected node");
	assert_string_equal(zklock_recipe_node_kind(U2), "double barrier member");
	/* user names that only look a little like them */
	assert_null(zklock_recipe_node_kind("ready"));
	assert_null(zklock_recipe_node_kind("barrier"));
	assert_null(zklock_recipe_node_kind("lock"));
	assert_null(zklock_recipe_node_kind("lock-1"));
	assert_null(zklock_recipe_node_kind("lock-000000000x"));
	assert_null(zklock_recipe_node_kind("lock-00000000001x"));
	assert_null(zklock_recipe_node_kind("_c_not-a-uuid-lock"));
	assert_null(zklock_recipe_node_kind("_c_" U1));
	assert_null(zklock_recipe_node_kind(""));
	assert_null(zklock_recipe_node_kind(NULL));
}

/* ----------------------------------------------------------------
 *		Cleanup of a request that ends without its lock
 * ----------------------------------------------------------------
 */

#define P1 "_c_" U1 "-"
#define P2 "_c_" U2 "-"

/* A held or waiting mutex whose node is known: deleted by name. */
static void
test_cleanup_known_node_by_name(void **state)
{
	ZklockCleanupInput in = {false, true, "_c_" U1 "-lock-0000000004", U1, false, "", ""};
	ZklockCleanupStep st[ZKLOCK_MAX_CLEANUP_STEPS];

	(void) state;
	assert_int_equal(zklock_cleanup_plan(&in, st), 1);
	assert_int_equal(st[0].parent, ZKLOCK_CLEANUP_IN_PATH);
	assert_false(st[0].by_prefix);
	assert_string_equal(st[0].name, "_c_" U1 "-lock-0000000004");
}

/*
 * The create was made but its reply never came (lost, or the worker that
 * sent it was restarted): the node may exist, so it is looked for by its
 * protection prefix.
 */
static void
test_cleanup_unknown_create_by_prefix(void **state)
{
	ZklockCleanupInput in = {false, true, "", U1, false, NULL, NULL};
	ZklockCleanupStep st[ZKLOCK_MAX_CLEANUP_STEPS];

	(void) state;
	assert_int_equal(zklock_cleanup_plan(&in, st), 1);
	assert_int_equal(st[0].parent, ZKLOCK_CLEANUP_IN_PATH);
	assert_true(st[0].by_prefix);
	assert_null(st[0].name);
	assert_string_equal(st[0].prefix, P1);
}

/* Nothing was ever created: nothing to delete. */
static void
test_cleanup_nothing_created(void **state)
{
	ZklockCleanupInput in = {false, true, "", "", false, "", ""};
	ZklockCleanupInput lease = {true, true, "", "", false, "", ""};
	ZklockCleanupStep st[ZKLOCK_MAX_CLEANUP_STEPS];

	(void) state;
	assert_int_equal(zklock_cleanup_plan(&in, st), 0);
	assert_int_equal(zklock_cleanup_plan(&lease, st), 0);
}

/*
 * A lease in its first phase (waiting for the P/locks mutex): only the
 * P/locks node, by name or, when its create reply is missing, by prefix
 * in P/locks (never in P or P/leases).
 */
static void
test_cleanup_lease_locks_phase(void **state)
{
	ZklockCleanupInput known = {true, true, "", "", false, "_c_" U2 "-lock-0000000000", U2};
	ZklockCleanupInput unknown = {true, true, "", "", false, "", U2};
	ZklockCleanupStep st[ZKLOCK_MAX_CLEANUP_STEPS];

	(void) state;
	assert_int_equal(zklock_cleanup_plan(&known, st), 1);
	assert_int_equal(st[0].parent, ZKLOCK_CLEANUP_IN_LOCKS);
	assert_false(st[0].by_prefix);
	assert_string_equal(st[0].name, "_c_" U2 "-lock-0000000000");

	assert_int_equal(zklock_cleanup_plan(&unknown, st), 1);
	assert_int_equal(st[0].parent, ZKLOCK_CLEANUP_IN_LOCKS);
	assert_true(st[0].by_prefix);
	assert_string_equal(st[0].prefix, P2);
}

/*
 * A lease in its second phase holds its P/locks node and has made (or is
 * making) its lease node: both go, the lease in P/leases.
 */
static void
test_cleanup_lease_both_nodes(void **state)
{
	ZklockCleanupInput in = {true, true, "", U1, false, "_c_" U2 "-lock-0000000001", U2};
	ZklockCleanupInput held = {true, true, "_c_" U1 "-lease-0000000007", U1, false, "", ""};
	ZklockCleanupStep st[ZKLOCK_MAX_CLEANUP_STEPS];

	(void) state;
	assert_int_equal(zklock_cleanup_plan(&in, st), 2);
	assert_int_equal(st[0].parent, ZKLOCK_CLEANUP_IN_LEASES);
	assert_true(st[0].by_prefix);
	assert_string_equal(st[0].prefix, P1);
	assert_int_equal(st[1].parent, ZKLOCK_CLEANUP_IN_LOCKS);
	assert_false(st[1].by_prefix);
	assert_string_equal(st[1].name, "_c_" U2 "-lock-0000000001");

	/* a granted lease gave its P/locks node back: only the lease is left */
	assert_int_equal(zklock_cleanup_plan(&held, st), 1);
	assert_int_equal(st[0].parent, ZKLOCK_CLEANUP_IN_LEASES);
	assert_string_equal(st[0].name, "_c_" U1 "-lease-0000000007");
}

/*
 * A double barrier member is named by its bare id (no protection prefix)
 * and is never looked for by prefix; one already deleted by the leave
 * protocol is not deleted again.
 */
static void
test_cleanup_double_barrier_member(void **state)
{
	ZklockCleanupInput member = {false, false, U3, U3, false, "", ""};
	ZklockCleanupInput gone = {false, false, U3, U3, true, "", ""};
	ZklockCleanupInput no_name = {false, false, "", U3, false, "", ""};
	ZklockCleanupStep st[ZKLOCK_MAX_CLEANUP_STEPS];

	(void) state;
	assert_int_equal(zklock_cleanup_plan(&member, st), 1);
	assert_false(st[0].by_prefix);
	assert_string_equal(st[0].name, U3);
	assert_int_equal(zklock_cleanup_plan(&gone, st), 0);
	assert_int_equal(zklock_cleanup_plan(&no_name, st), 0);
}

/* Aux fields mean nothing outside a lease. */
static void
test_cleanup_aux_ignored_outside_lease(void **state)
{
	ZklockCleanupInput in = {false, true, "_c_" U1 "-__WRIT__0000000002", U1, false,
	"_c_" U2 "-lock-0000000001", U2};
	ZklockCleanupStep st[ZKLOCK_MAX_CLEANUP_STEPS];

	(void) state;
	assert_int_equal(zklock_cleanup_plan(&in, st), 1);
	assert_string_equal(st[0].name, "_c_" U1 "-__WRIT__0000000002");
}

/* The table: three entries a request, the last third for callers that cannot wait. */
static void
test_delete_table_room(void **state)
{
	int			size = zklock_delete_table_size(4);

	(void) state;
	assert_int_equal(size, 12);
	/* a release may take up to size - reserve */
	assert_true(zklock_delete_may_add(0, size, 2, true, 4));
	assert_true(zklock_delete_may_add(6, size, 2, true, 4));
	assert_false(zklock_delete_may_add(7, size, 2, true, 4));
	assert_false(zklock_delete_may_add(8, size, 1, true, 4));
	/* a caller that cannot wait takes the reserve too, never more */
	assert_true(zklock_delete_may_add(8, size, 2, false, 4));
	assert_true(zklock_delete_may_add(11, size, 1, false, 4));
	assert_false(zklock_delete_may_add(12, size, 1, false, 4));
	assert_false(zklock_delete_may_add(11, size, 2, false, 4));
	/* nothing to add always fits */
	assert_true(zklock_delete_may_add(12, size, 0, true, 4));
}

/* Back-off doubles from the base and stops at the cap. */
static void
test_retry_delay_doubles_to_cap(void **state)
{
	(void) state;
	assert_int_equal(zklock_retry_delay_ms(1, 100, 10000), 100);
	assert_int_equal(zklock_retry_delay_ms(2, 100, 10000), 200);
	assert_int_equal(zklock_retry_delay_ms(3, 100, 10000), 400);
	assert_int_equal(zklock_retry_delay_ms(7, 100, 10000), 6400);
	assert_int_equal(zklock_retry_delay_ms(8, 100, 10000), 10000);
	assert_int_equal(zklock_retry_delay_ms(1000, 100, 10000), 10000);
	assert_int_equal(zklock_retry_delay_ms(0, 100, 10000), 100);
	assert_int_equal(zklock_retry_delay_ms(3, 5000, 2000), 2000);
}

/* Curator's own test of a lock's children: String.contains */
static void
test_curator_child_tests(void **state)
{
	(void) state;
	assert_true(zklock_is_read_node("_c_7c1a5f3e-1f9c-4b7c-9a51-0a2f6b1c3d4e-__READ__0000000003"));
	assert_true(zklock_is_read_node("__READ__0000000001"));
	assert_false(zklock_is_read_node("_c_x-__WRIT__0000000001"));
	assert_true(zklock_is_write_node("_c_x-__WRIT__0000000001"));
	assert_false(zklock_is_write_node("_c_x-lock-0000000001"));
	assert_true(zklock_is_lock_node("_c_x-lock-0000000001", ZKLOCK_LOCK_NAME));
	/* contains, as Curator: no sequence needed (its filter, not a shape) */
	assert_true(zklock_is_lock_node("deadlock-x", ZKLOCK_LOCK_NAME));
	assert_false(zklock_is_lock_node("_c_x-lease-0000000001", ZKLOCK_LOCK_NAME));
	assert_true(zklock_is_lock_node("_c_x-lease-0000000001", ZKLOCK_LEASE_NAME));
	/* the strict shape test refuses what is no recipe node */
	assert_null(zklock_recipe_node_kind("deadlock-x"));
}

/* the sub-paths of a recipe, put together in one place */
static void
test_recipe_path(void **state)
{
	char		buf[64];

	(void) state;
	assert_int_equal(zklock_recipe_path(buf, sizeof(buf), "/a/b", ZKLOCK_LEASES_DIR, NULL), 11);
	assert_string_equal(buf, "/a/b/leases");
	zklock_recipe_path(buf, sizeof(buf), "/a/b", ZKLOCK_LOCKS_DIR, "_c_x-lock-0000000001");
	assert_string_equal(buf, "/a/b/locks/_c_x-lock-0000000001");
	zklock_recipe_path(buf, sizeof(buf), "/a/b", NULL, ZKLOCK_READY_NODE);
	assert_string_equal(buf, "/a/b/ready");
	zklock_recipe_path(buf, sizeof(buf), "/a/b", NULL, NULL);
	assert_string_equal(buf, "/a/b");
	/* truncated like snprintf, with the length it needed */
	assert_int_equal(zklock_recipe_path(buf, 8, "/a/b", ZKLOCK_LEASES_DIR, NULL), 11);
	assert_string_equal(buf, "/a/b/le");
}

/* SharedCount: 4 bytes big-endian, nothing else */
static void
test_count_codec(void **state)
{
	unsigned char b[4];
	int32_t		v = 0;

	(void) state;
	zklock_count_encode(1, b);
	assert_memory_equal(b, "\x00\x00\x00\x01", 4);
	zklock_count_encode(-2, b);
	assert_memory_equal(b, "\xff\xff\xff\xfe", 4);
	assert_true(zklock_count_decode((const char *) b, 4, &v));
	assert_int_equal(v, -2);
	zklock_count_encode(INT32_MIN, b);
	assert_true(zklock_count_decode((const char *) b, 4, &v));
	assert_true(v == INT32_MIN);
	/* other lengths are not a SharedCount */
	assert_false(zklock_count_decode("\x00\x00\x01", 3, &v));
	assert_false(zklock_count_decode("\x00\x00\x00\x00\x01", 5, &v));
	assert_false(zklock_count_decode("", 0, &v));
	assert_false(zklock_count_decode(NULL, 0, &v));
}

/* DistributedAtomicLong: 8 bytes big-endian, empty is 0 */
static void
test_long_codec(void **state)
{
	unsigned char b[8];
	int64_t		v = 7;

	(void) state;
	zklock_long_encode(258, b);
	assert_memory_equal(b, "\x00\x00\x00\x00\x00\x00\x01\x02", 8);
	assert_true(zklock_long_decode((const char *) b, 8, &v));
	assert_true(v == 258);
	zklock_long_encode(INT64_MIN, b);
	assert_true(zklock_long_decode((const char *) b, 8, &v));
	assert_true(v == INT64_MIN);
	assert_true(zklock_long_decode("", 0, &v));
	assert_true(v == 0);
	v = 7;
	assert_true(zklock_long_decode(NULL, -1, &v));	/* no data at all */
	assert_true(v == 0);
	assert_false(zklock_long_decode("\x00\x00\x00\x01", 4, &v));
	assert_false(zklock_long_decode("\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9, &v));
}

/* adds that do not fit are refused, not wrapped */
static void
test_long_add(void **state)
{
	int64_t		s = 0;

	(void) state;
	assert_true(zklock_long_add(40, 2, &s));
	assert_true(s == 42);
	assert_true(zklock_long_add(INT64_MAX - 1, 1, &s));
	assert_true(s == INT64_MAX);
	assert_false(zklock_long_add(INT64_MAX, 1, &s));
	assert_false(zklock_long_add(INT64_MIN, -1, &s));
	assert_true(zklock_long_add(INT64_MIN, 1, &s));
	assert_true(zklock_long_add(-5, -6, &s));
	assert_true(s == -11);
}

/*
 * Adds folded into one write: each gets the value after it in the fold's
 * order (prefix sums), and one that would overflow is left out without
 * moving the others.
 */
static void
test_long_fold(void **state)
{
	int64_t		d1[] = {1, 1, 5, -2};
	int64_t		r[4] = {-1, -1, -1, -1};
	bool		ok[4];
	int64_t		sum = 0;

	(void) state;
	assert_int_equal(zklock_long_fold(10, d1, 4, r, ok, &sum), 4);
	assert_true(ok[0] && ok[1] && ok[2] && ok[3]);
	assert_true(r[0] == 11 && r[1] == 12 && r[2] == 17 && r[3] == 15);
	assert_true(sum == 15);

	/* one add alone: what zklock_long_add says */
	assert_int_equal(zklock_long_fold(-3, d1, 1, r, ok, &sum), 1);
	assert_true(ok[0] && r[0] == -2 && sum == -2);

	/* nothing to fold: the value read */
	assert_int_equal(zklock_long_fold(7, d1, 0, r, ok, &sum), 0);
	assert_true(sum == 7);
}

static void
test_long_fold_overflow(void **state)
{
	int64_t		d[] = {1, 1, -5, 1};
	int64_t		r[4] = {-1, -1, -1, -1};
	bool		ok[4];
	int64_t		sum = 0;

	(void) state;
	/* the second +1 would pass the maximum: left out; -5 and +1 go on */
	assert_int_equal(zklock_long_fold(INT64_MAX - 1, d, 4, r, ok, &sum), 3);
	assert_true(ok[0] && !ok[1] && ok[2] && ok[3]);
	assert_true(r[0] == INT64_MAX);
	assert_true(r[1] == -1);	/* untouched */
	assert_true(r[2] == INT64_MAX - 5 && r[3] == INT64_MAX - 4);
	assert_true(sum == INT64_MAX - 4);

	/* every add overflows: nothing applied, the value stays */
	{
		int64_t		dn[] = {-1, INT64_MIN};

		assert_int_equal(zklock_long_fold(INT64_MIN, dn, 2, r, ok, &sum), 0);
		assert_true(!ok[0] && !ok[1]);
		assert_true(sum == INT64_MIN);
	}

	/* an add that fits only after an earlier one made room */
	{
		int64_t		dm[] = {10, -10};

		assert_int_equal(zklock_long_fold(INT64_MAX - 5, dm, 2, r, ok, &sum), 1);
		assert_true(!ok[0] && ok[1]);
		assert_true(r[1] == INT64_MAX - 15 && sum == INT64_MAX - 15);
		/* in the other order both fit: the fold's order decides */
		dm[0] = -10;
		dm[1] = 10;
		assert_int_equal(zklock_long_fold(INT64_MAX - 5, dm, 2, r, ok, &sum), 2);
		assert_true(r[0] == INT64_MAX - 15 && r[1] == INT64_MAX - 5);
		assert_true(sum == INT64_MAX - 5);
	}
}

/*
 * The leader latch's decision, as the lock engine makes it for a latch
 * member: children sorted by the part after "latch-" (Curator's
 * fixForSorting), the first leads, any other watches the one right before
 * it; our node missing means join again.
 */
static void
test_latch_decide(void **state)
{
	char	   *c[] = {
		"_c_bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb-latch-0000000007",
		"_c_aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa-latch-0000000003",
		"_c_cccccccc-cccc-4ccc-8ccc-cccccccccccc-latch-0000000005",
	};
	ZklockLockDecision d;

	(void) state;
	zklock_sort_children(c, 3, ZKLOCK_LATCH_NAME);
	assert_string_equal(c[0], "_c_aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa-latch-0000000003");
	assert_string_equal(c[1], "_c_cccccccc-cccc-4ccc-8ccc-cccccccccccc-latch-0000000005");
	assert_string_equal(c[2], "_c_bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb-latch-0000000007");

	d = zklock_lock_decide(c, 3, "_c_aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa-latch-0000000003", 1);
	assert_true(d.holds);
	assert_false(d.lost);

	d = zklock_lock_decide(c, 3, "_c_bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb-latch-0000000007", 1);
	assert_false(d.holds);
	assert_int_equal(d.watch_index, 1);	/* its predecessor, not the leader */

	d = zklock_lock_decide(c, 3, "_c_dddddddd-dddd-4ddd-8ddd-dddddddddddd-latch-0000000009", 1);
	assert_true(d.lost);
}

/* the fence of a counter write: only holds of the current session pass */
static void
test_write_fence(void **state)
{
	(void) state;
	assert_int_equal(zklock_write_fence(false, 3, 3), ZKLOCK_FENCE_PASS);
	/* lost wins, whatever the session */
	assert_int_equal(zklock_write_fence(true, 3, 3), ZKLOCK_FENCE_LOST);
	assert_int_equal(zklock_write_fence(true, 2, 3), ZKLOCK_FENCE_LOST);
	assert_int_equal(zklock_write_fence(true, 0, 0), ZKLOCK_FENCE_LOST);
	/* held in an earlier session (not yet swept), or a later one */
	assert_int_equal(zklock_write_fence(false, 2, 3), ZKLOCK_FENCE_OTHER_SESSION);
	assert_int_equal(zklock_write_fence(false, 4, 3), ZKLOCK_FENCE_OTHER_SESSION);
	/* no session now, or a hold whose session is unknown */
	assert_int_equal(zklock_write_fence(false, 3, 0), ZKLOCK_FENCE_OTHER_SESSION);
	assert_int_equal(zklock_write_fence(false, 0, 3), ZKLOCK_FENCE_OTHER_SESSION);
	assert_int_equal(zklock_write_fence(false, 0, 0), ZKLOCK_FENCE_OTHER_SESSION);
}

/* a downgrade's create: only behind its own write node, in the current session */
static void
test_downgrade_may_create(void **state)
{
	const char *w = "_c_aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa-__WRIT__0000000007";

	(void) state;
	assert_true(zklock_downgrade_may_create(true, 3, 3, w, "0000000007"));
	/* the write lock lost, or given back */
	assert_false(zklock_downgrade_may_create(false, 3, 3, w, "0000000007"));
	/* held in an earlier session (not yet swept), or no session now */
	assert_false(zklock_downgrade_may_create(true, 2, 3, w, "0000000007"));
	assert_false(zklock_downgrade_may_create(true, 3, 0, w, "0000000007"));
	assert_false(zklock_downgrade_may_create(true, 0, 0, w, "0000000007"));
	/* another write node (the lock taken again), or no sequence */
	assert_false(zklock_downgrade_may_create(true, 3, 3, w, "0000000006"));
	assert_false(zklock_downgrade_may_create(true, 3, 3, w, "000000007"));
	assert_false(zklock_downgrade_may_create(true, 3, 3, w, ""));
	assert_false(zklock_downgrade_may_create(true, 3, 3, w, NULL));
	assert_false(zklock_downgrade_may_create(true, 3, 3, "", "0000000007"));
	assert_false(zklock_downgrade_may_create(true, 3, 3, NULL, "0000000007"));
	/* a read node is no write lock to downgrade */
	assert_false(zklock_downgrade_may_create(true, 3, 3,
											 "_c_aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa-__READ__0000000007",
											 "0000000007"));
}

/* latch participants: Curator's filter and order */
static void
test_latch_participants(void **state)
{
	char	   *c[] = {
		"_c_bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb-latch-0000000007",
		"foo",
		"_c_aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa-latch-0000000003",
		"latch-0000000005",
		"_c_cccccccc-cccc-4ccc-8ccc-cccccccccccc-lock-0000000001",
	};
	int			order[5];

	(void) state;
	assert_int_equal(zklock_latch_participants(c, 5, order), 3);
	assert_int_equal(order[0], 2);	/* 0000000003 */
	assert_int_equal(order[1], 3);	/* 0000000005 */
	assert_int_equal(order[2], 0);	/* 0000000007 */
	assert_int_equal(zklock_latch_participants(c, 0, order), 0);
}

/*
 * The records' path is zklock's: a SQL path that is it or below it is
 * refused, a sibling whose name merely starts the same is not.
 */
static void
test_path_is_under(void **state)
{
	(void) state;
	assert_true(zklock_path_is_under("/zklock-waits", 13, "/zklock-waits"));
	assert_true(zklock_path_is_under("/zklock-waits/x", 15, "/zklock-waits"));
	assert_false(zklock_path_is_under("/zklock-waitsx", 14, "/zklock-waits"));
	assert_false(zklock_path_is_under("/zklock", 7, "/zklock-waits"));
	/* the length given counts, not a NUL */
	assert_false(zklock_path_is_under("/zklock-waits", 12, "/zklock-waits"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_curator_rules_node_kind),
		cmocka_unit_test(test_path_valid_simple_and_nested),
		cmocka_unit_test(test_path_valid_utf8),
		cmocka_unit_test(test_path_valid_dots_inside_names),
		cmocka_unit_test(test_path_empty),
		cmocka_unit_test(test_path_no_leading_slash),
		cmocka_unit_test(test_path_root_alone_rejected),
		cmocka_unit_test(test_path_trailing_slash),
		cmocka_unit_test(test_path_empty_component),
		cmocka_unit_test(test_path_dot_components),
		cmocka_unit_test(test_path_control_characters_rejected),
		cmocka_unit_test(test_path_nul_byte_rejected),
		cmocka_unit_test(test_path_c1_controls_rejected),
		cmocka_unit_test(test_path_private_use_and_specials_rejected),
		cmocka_unit_test(test_path_supplementary_characters_rejected_as_java_surrogates),
		cmocka_unit_test(test_path_invalid_utf8_rejected),
		cmocka_unit_test(test_path_overlong_utf8_rejected),
		cmocka_unit_test(test_path_length_limit_exact_ok_one_more_rejected),
		cmocka_unit_test(test_path_zookeeper_subtree_reserved),
		cmocka_unit_test(test_path_is_length_bounded_not_nul_terminated),
		cmocka_unit_test(test_path_error_messages),
		cmocka_unit_test(test_uuid_sets_version_and_variant_like_java),
		cmocka_unit_test(test_uuid_of_real_curator_node_round_trips),
		cmocka_unit_test(test_is_uuid_accepts_java_form),
		cmocka_unit_test(test_is_uuid_rejects_other_forms),
		cmocka_unit_test(test_protected_prefix_is_c_uuid_dash),
		cmocka_unit_test(test_protected_name_for_each_recipe),
		cmocka_unit_test(test_protected_name_truncates_like_snprintf),
		cmocka_unit_test(test_find_protected_recovers_lost_create),
		cmocka_unit_test(test_sort_key_strips_through_lock_name),
		cmocka_unit_test(test_sort_key_whole_name_without_lock_name),
		cmocka_unit_test(test_sort_key_uses_last_occurrence),
		cmocka_unit_test(test_sort_key_negative_sequence_after_overflow),
		cmocka_unit_test(test_rw_sort_key),
		cmocka_unit_test(test_sort_shuffled_nodes_from_different_uuids),
		cmocka_unit_test(test_sort_mixed_curator_and_foreign_names),
		cmocka_unit_test(test_sort_ties_broken_by_full_name),
		cmocka_unit_test(test_sort_negative_sequences_first_as_curator_does),
		cmocka_unit_test(test_sort_large_reversed_queue),
		cmocka_unit_test(test_sort_empty_and_single),
		cmocka_unit_test(test_find_child_exact_match_only),
		cmocka_unit_test(test_lock_decide_lowest_node_holds),
		cmocka_unit_test(test_seq_follows_only_the_next_number),
		cmocka_unit_test(test_seq_follows_read_nodes),
		cmocka_unit_test(test_lock_decide_waiter_watches_its_predecessor),
		cmocka_unit_test(test_lock_decide_lost_when_own_node_missing),
		cmocka_unit_test(test_lock_decide_three_leases),
		cmocka_unit_test(test_lock_decide_max_leases_below_one_is_a_mutex),
		cmocka_unit_test(test_lock_decide_after_sorting_shuffled_children),
		cmocka_unit_test(test_rw_sort_orders_readers_and_writers_by_sequence),
		cmocka_unit_test(test_read_decide_readers_before_first_writer_hold),
		cmocka_unit_test(test_read_decide_reader_after_writer_watches_that_writer),
		cmocka_unit_test(test_read_decide_watches_lowest_writer_not_nearest),
		cmocka_unit_test(test_read_decide_all_readers_hold_without_writers),
		cmocka_unit_test(test_read_decide_lost_when_own_missing),
		cmocka_unit_test(test_read_decide_matches_own_with_starts_with),
		cmocka_unit_test(test_write_decide_via_lock_decide_on_rw_sorted),
		cmocka_unit_test(test_rw_downgrade_read_node_sorts_at_writers_place),
		cmocka_unit_test(test_leave_done_when_no_members),
		cmocka_unit_test(test_leave_error_when_own_node_missing),
		cmocka_unit_test(test_leave_only_ours_left_delete_and_done),
		cmocka_unit_test(test_leave_lowest_watches_highest),
		cmocka_unit_test(test_leave_others_delete_ours_and_watch_lowest),
		cmocka_unit_test(test_leave_two_members_lowest_and_highest),
		cmocka_unit_test(test_leave_after_ours_deleted_pass_null_own),
		cmocka_unit_test(test_leave_own_delete_sent),
		cmocka_unit_test(test_holders_mutex_first_only),
		cmocka_unit_test(test_holders_readers_then_writer),
		cmocka_unit_test(test_holders_downgraded_writer),
		cmocka_unit_test(test_cleanup_known_node_by_name),
		cmocka_unit_test(test_cleanup_unknown_create_by_prefix),
		cmocka_unit_test(test_cleanup_nothing_created),
		cmocka_unit_test(test_cleanup_lease_locks_phase),
		cmocka_unit_test(test_cleanup_lease_both_nodes),
		cmocka_unit_test(test_cleanup_double_barrier_member),
		cmocka_unit_test(test_cleanup_aux_ignored_outside_lease),
		cmocka_unit_test(test_delete_table_room),
		cmocka_unit_test(test_retry_delay_doubles_to_cap),
		cmocka_unit_test(test_curator_child_tests),
		cmocka_unit_test(test_recipe_path),
		cmocka_unit_test(test_count_codec),
		cmocka_unit_test(test_long_codec),
		cmocka_unit_test(test_long_add),
		cmocka_unit_test(test_long_fold),
		cmocka_unit_test(test_long_fold_overflow),
		cmocka_unit_test(test_write_fence),
		cmocka_unit_test(test_downgrade_may_create),
		cmocka_unit_test(test_latch_participants),
		cmocka_unit_test(test_latch_decide),
		cmocka_unit_test(test_path_is_under),
	};

	return cmocka_run_group_tests_name("zklock recipe core", tests, NULL, NULL);
}
