# zklock — ZooKeeper coordination recipes (Apache Curator peer) for PostgreSQL

MODULE_big = zklock
# one folder per layer (src/README, "Layers"); test/callgraph.pl checks
# which folder may call and include which
CORE_OBJS = $(addprefix src/core/, curator_rules.o value_codec.o names.o \
	lease_rules.o handover_rules.o deadlock_rules.o recipe_guard.o)
COMMON_OBJS = $(addprefix src/common/, settings.o shmem.o session_file.o)
BACKEND_OBJS = $(addprefix src/backend/, args.o deadlock.o channel.o cancel_on_loss.o \
	xact.o holds.o acquire.o views.o stat_worker.o drop_guard.o)
WORKER_OBJS = $(addprefix src/worker/, result_codes.o zkio.o batch.o request.o \
	revocation_watch.o commit_confirm.o deadlock_records.o deadlock_check.o \
	dispatch.o deferred_log.o event_loop.o) \
	$(addprefix src/worker/connection/, secure.o tls_context.o auth.o lease.o \
	connection.o) \
	$(addprefix src/worker/deletes/, delete_table.o deletes.o ghosts.o) \
	$(addprefix src/worker/locks/, path_index.o lock_cache.o lock_engine.o \
	handover_layer.o handover.o handover_numbering.o)
# every file of src/recipes/ is a recipe's (or the registry's): a new
# recipe's file is built without a line here (src/README, "Adding a recipe")
RECIPE_OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/recipes/*.c)))
OBJS = src/zklock.o $(CORE_OBJS) $(COMMON_OBJS) $(BACKEND_OBJS) \
	$(WORKER_OBJS) $(RECIPE_OBJS)

EXTENSION = zklock
DATA = zklock--0.1.sql zklock--0.1--0.2.sql zklock--0.2.sql \
	zklock--0.2--0.3.sql zklock--0.3.sql zklock--0.3--0.4.sql zklock--0.4.sql \
	zklock--0.4--0.5.sql zklock--0.5.sql zklock--0.5--0.6.sql zklock--0.6.sql
PGFILEDESC = "zklock - ZooKeeper locks and recipes, Curator-compatible"

# the ZooKeeper C client: with TLS and SASL, the static build that
# zk-client-build/build.sh makes from Debian's source package into zk-client/
# (README, "TLS and SASL"), linked into zklock.so and kept out of its
# exported symbols; without it, Debian's libzookeeper_st, which has neither
# (zklock then refuses zklock.tls and zklock.sasl_mechanism)
ZK_CLIENT ?= $(dir $(firstword $(MAKEFILE_LIST)))zk-client
ifneq ($(wildcard $(ZK_CLIENT)/lib/libzookeeper_st.a),)
PG_CPPFLAGS += -I$(ZK_CLIENT)/include -DHAVE_OPENSSL_H -DHAVE_CYRUS_SASL_H
SHLIB_LINK += $(ZK_CLIENT)/lib/libzookeeper_st.a -Wl,--exclude-libs,libzookeeper_st.a \
	-lssl -lcrypto -lsasl2 -lm
ZK_CLIENT_LIB = $(ZK_CLIENT)/lib/libzookeeper_st.a
else
SHLIB_LINK += -lzookeeper_st
endif
PG_CPPFLAGS += -I$(srcdir)/src
EXTRA_CLEAN += $(OBJS:.o=.d) $(OBJS:.o=.bc)

# pg_regress: `make installcheck` runs it against a running server set up
# as doc/testing.md says (results/ and regression.diffs land in the current
# directory, PGXS's default), test/run-user-tests.sh against a private one
REGRESS = zklock_mutex zklock_recipes zklock_input zklock_security zklock_encoding
REGRESS_OPTS = --inputdir=$(srcdir) --encoding=UTF8 --no-locale

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# a new client build relinks zklock.so
$(shlib): $(ZK_CLIENT_LIB)

# the ZooKeeper C client with TLS and SASL (see ZK_CLIENT above)
.PHONY: zk-client
zk-client:
	bash zk-client-build/build.sh

.PHONY: unittest
unittest:
	$(MAKE) -C test/unit check

# header dependencies as the compiler saw them: an object is rebuilt when
# a header it includes changes, and only then.  -MMD on the objects only:
# the bitcode (.bc) of the same source would write the same .d naming
# itself, and the objects would lose their dependencies.
$(OBJS): override CFLAGS += -MMD -MP
-include $(OBJS:.o=.d)

# the inner test loop, without root (test/check.sh): build, install into a
# private copy of the server under tmp_install/, run tests as this user
#   make check-tap [T="800 195"]   TAP files test/t/800*.pl, 195*.pl (no T: all)
#   make check-regress             the pg_regress suite (REGRESS above)
#   make check-unit                the cmocka unit tests (test/unit)
#   make check-meta                META.json against the PGXN spec and the
#                                  versions of zklock.control, debian/changelog;
#                                  every patch of test/mutants still applies
.PHONY: check-tap check-regress check-unit check-meta clean-tmp-install
# T reaches the shell through the environment, split on blanks and not
# globbed there, so no character of it is run as a command
check-tap: export ZKLOCK_CHECK_T = $(T)
check-tap:
	set -f; bash test/check.sh tap $$ZKLOCK_CHECK_T
check-regress:
	bash test/check.sh regress
check-unit:
	bash test/check.sh unit
check-meta:
	perl test/meta/check-meta.pl --self-test
	perl test/meta/check-mutants.pl --self-test
# PGXS owns the recipe of clean; this only adds a prerequisite to it
clean: clean-tmp-install
clean-tmp-install:
	rm -rf tmp_install tmp_install.new
