# zklock — ZooKeeper coordination recipes (Apache Curator peer) for PostgreSQL

MODULE_big = zklock
OBJS = \
	src/zklock.o \
	src/zklock_shmem.o \
	src/zklock_worker.o \
	src/zklock_worker_log.o \
	src/zklock_ops.o \
	src/zklock_conn.o \
	src/zklock_dispatch.o \
	src/zklock_request.o \
	src/zklock_pathidx.o \
	src/zklock_zkio.o \
	src/zklock_deletes.o \
	src/zklock_batch.o \
	src/zklock_ghosts.o \
	src/zklock_lockeng.o \
	src/zklock_revocable.o \
	src/zklock_local.o \
	src/zklock_known.o \
	src/zklock_local_rules.o \
	src/zklock_confirm.o \
	src/zklock_rcp_semaphore.o \
	src/zklock_rcp_barrier.o \
	src/zklock_rcp_dbarrier.o \
	src/zklock_rcp_revoke.o \
	src/zklock_rcp_participants.o \
	src/zklock_rcp_counter.o \
	src/zklock_rcp_leader.o \
	src/zklock_backend.o \
	src/zklock_wait.o \
	src/zklock_acquire.o \
	src/zklock_args.o \
	src/zklock_views.o \
	src/zklock_rcp_mutex.o \
	src/zklock_rcp_rwlock.o \
	src/zklock_session.o \
	src/zklock_curator_rules.o \
	src/zklock_names.o \
	src/zklock_lease_rules.o \
	src/zklock_loss.o

EXTENSION = zklock
DATA = zklock--0.1.sql
PGFILEDESC = "zklock - ZooKeeper locks and recipes, Curator-compatible"

SHLIB_LINK += -lzookeeper_st
PG_CPPFLAGS += -I$(srcdir)/src

# pg_regress runs against a private cluster started by test/run-user-tests.sh
REGRESS = zklock_mutex zklock_recipes zklock_input zklock_security zklock_encoding
REGRESS_OPTS = --inputdir=$(srcdir) --outputdir=$(srcdir)/test/regress_out \
	--encoding=UTF8 --no-locale

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

.PHONY: unittest
unittest:
	$(MAKE) -C test/unit check

# every object depends on the shared headers
$(OBJS): src/zklock.h src/zklock_curator_rules.h src/zklock_names.h src/zklock_lease_rules.h \
	src/zklock_local_rules.h \
	src/zklock_worker_int.h src/zklock_backend_int.h
