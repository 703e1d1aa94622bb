/*-------------------------------------------------------------------------
 *
 * raw_cycle.c
 *		Protocol floor of a ZooKeeper lock cycle, measured with the raw
 *		single-threaded C client (libzookeeper_st).
 *
 * One cycle is what an uncontended Curator InterProcessMutex acquire plus
 * release costs on the wire: create an EPHEMERAL_SEQUENTIAL child
 * "lock-" under a parent, list the children of the parent, delete the
 * child.  One ZooKeeper session carries every cycle; "inflight" pipeline
 * slots run cycles back to back, each slot either on its own parent or
 * all slots on one shared parent.  Nothing here waits for a lock: the
 * point is the cost of the three round trips, nothing else.  The shape
 * "read" makes a cycle one get_children of the slot's own parent: one
 * round trip that writes nothing (what a delaying proxy adds to a round
 * trip is measured with it).
 *
 * Usage:
 *		raw_cycle host:port inflight distinct|shared|read seconds [warmup_seconds]
 *
 * Prints one line:
 *		RESULT inflight=N shape=S cycles=C secs=T cps=X p50=U p99=U avg=U
 *			   cpu_jiffies=J zk_jiffies=Z requests=R all_cycles=A
 * where latencies are in microseconds, from the create being queued to
 * the delete's reply.  cpu_jiffies is the CPU time of the whole machine
 * (every CPU, everything but idle and iowait, from /proc/stat) spent during
 * the measured window, zk_jiffies that of the ZooKeeper server process
 * whose pid is in the environment variable BENCH_ZK_PID (utime + stime
 * from /proc/<pid>/stat; -1 without it; the sum over the servers of an
 * ensemble when it names several, comma-separated), both in clock ticks
 * (CLK_TCK).
 * requests is how many requests the server received (its four-letter
 * word mntr, zk_packets_received) from just before the cycles start to
 * just after the last one ended, and all_cycles how many cycles completed
 * in that time (in the window or not): their ratio is the requests of one
 * cycle, measured the way the Curator and zklock parts measure it.
 *
 * test/bench/raw_cycle.c
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#define MAX_SLOTS		1024
#define PATH_LEN		256
#define BASE_LEN		128

/* Where a slot is in its cycle */
typedef enum SlotStep
{
	STEP_CREATE,
	STEP_CHILDREN,
	STEP_DELETE
} SlotStep;

/* One pipeline slot: at most one request of it is in flight at a time */
typedef struct Slot
{
	int			idx;
	SlotStep	step;
	uint64_t	start_us;		/* when the current cycle was started */
	char		parent[PATH_LEN];
	char		prefix[PATH_LEN];	/* parent + "/lock-" */
	char		node[PATH_LEN];		/* node created by the current cycle */
} Slot;

static zhandle_t *zh;
static int	connected = 0;
static int	failed = 0;

static Slot slots[MAX_SLOTS];
static int	active_slots = 0;	/* slots with a request in flight */

static uint64_t measure_start_us;
static uint64_t measure_end_us;

static uint32_t *latencies;
static size_t nlatencies = 0;
static size_t latencies_cap = 0;
static long long all_cycles = 0;	/* cycles completed, in the window or not */

static int	pending_setup = 0;	/* parent creates still in flight */
static int	read_only = 0;		/* shape "read": a cycle is one get_children */

/* CPU time at the start and the end of the measured window, in ticks */
typedef struct CpuSnap
{
	long long	machine;		/* busy time of all CPUs, -1 if unknown */
	long long	zk;				/* ZooKeeper server utime + stime, -1 if unknown */
} CpuSnap;

#define MAX_ZK_PIDS		8
static long zk_pids[MAX_ZK_PIDS];	/* from BENCH_ZK_PID */
static int	nzk_pids = 0;

/*
 * now_us
 *		Monotonic clock in microseconds.
 */
static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * machine_busy_ticks
 *		CPU time of the whole machine so far, in clock ticks: the first
 *		("cpu") line of /proc/stat summed over user, nice, system, irq,
 *		softirq and steal, i.e. everything but idle and iowait (guest time
 *		is already part of user).  -1 if it cannot be read.
 */
static long long
machine_busy_ticks(void)
{
	FILE	   *f = fopen("/proc/stat", "r");
	long long	v[8] = {0};
	int			n;

	if (f == NULL)
		return -1;
	n = fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 7)
		return -1;
	/* user nice system [idle iowait] irq softirq steal */
	return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
}

/*
 * process_ticks
 *		utime + stime of a process, in clock ticks, from /proc/<pid>/stat
 *		(fields 14 and 15, counted after the parenthesised command name,
 *		which may hold spaces).  -1 if pid is 0 or the file cannot be read.
 */
static long long
process_ticks(long pid)
{
	char		path[64];
	char		buf[1024];
	char	   *p;
	FILE	   *f;
	size_t		len;
	unsigned long long utime;
	unsigned long long stime;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	/*
	 * after ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt
	 * majflt cmajflt utime stime
	 */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			   &utime, &stime) != 2)
		return -1;
	return (long long) (utime + stime);
}

/*
 * cpu_snap
 *		Read both CPU counters now.
 */
static CpuSnap
cpu_snap(void)
{
	CpuSnap		s;
	int			i;

	s.machine = machine_busy_ticks();
	s.zk = nzk_pids > 0 ? 0 : -1;
	for (i = 0; i < nzk_pids && s.zk >= 0; i++)
	{
		long long	t = process_ticks(zk_pids[i]);

		s.zk = t < 0 ? -1 : s.zk + t;
	}
	return s;
}

/*
 * cpu_delta
 *		Ticks between two readings of one counter; -1 if either is unknown.
 */
static long long
cpu_delta(long long start, long long end)
{
	return (start < 0 || end < 0) ? -1 : end - start;
}

/*
 * fail
 *		Report an error and make the main loop give up.
 */
static void
fail(const char *what, int rc)
{
	fprintf(stderr, "raw_cycle: %s: %s (%d)\n", what, zerror(rc), rc);
	failed = 1;
}

/*
 * record_latency
 *		Append one cycle latency (microseconds) to the sample array.
 */
static void
record_latency(uint64_t us)
{
	if (nlatencies == latencies_cap)
	{
		latencies_cap = latencies_cap ? latencies_cap * 2 : 65536;
		latencies = realloc(latencies, latencies_cap * sizeof(uint32_t));
		if (latencies == NULL)
		{
			fprintf(stderr, "raw_cycle: out of memory\n");
			exit(1);
		}
	}
	latencies[nlatencies++] = (uint32_t) (us > UINT32_MAX ? UINT32_MAX : us);
}

/*
 * session_watcher
 *		Global watcher: only tracks the connection state.
 */
static void
session_watcher(zhandle_t *h, int type, int state, const char *path,
				void *ctx)
{
	if (type != ZOO_SESSION_EVENT)
		return;
	if (state == ZOO_CONNECTED_STATE)
		connected = 1;
	else if (state == ZOO_EXPIRED_SESSION_STATE ||
			 state == ZOO_AUTH_FAILED_STATE)
	{
		connected = 0;
		fail("session lost", ZSESSIONEXPIRED);
	}
	else
		connected = 0;
}

static void start_cycle(Slot *slot);

/*
 * packets_received
 *		Requests the ZooKeeper server at hosts ("127.0.0.1:port") received so
 *		far (four-letter word mntr, zk_packets_received); -1 if it cannot be
 *		asked.
 */
static long long
packets_received(const char *hosts)
{
	const char *colon = strrchr(hosts, ':');
	struct sockaddr_in sa;
	char		host[64];
	char		buf[8192];
	size_t		len = 0;
	ssize_t		n;
	int			fd;
	char	   *p;

	if (colon == NULL || (size_t) (colon - hosts) >= sizeof(host))
		return -1;
	memcpy(host, hosts, colon - hosts);
	host[colon - hosts] = '\0';
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short) atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -1;
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0 ||
		write(fd, "mntr", 4) != 4)
	{
		close(fd);
		return -1;
	}
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t) n;
	close(fd);
	buf[len] = '\0';
	p = strstr(buf, "zk_packets_received");
	if (p == NULL)
		return -1;
	p += strlen("zk_packets_received");
	return strtoll(p, NULL, 10);
}

/*
 * cycle_done
 *		A slot's cycle is complete.  Count it if it ended inside the
 *		measured window, then start the next one unless the window is
 *		over.
 */
static void
cycle_done(Slot *slot)
{
	uint64_t	now = now_us();

	all_cycles++;
	if (now >= measure_start_us && now <= measure_end_us)
		record_latency(now - slot->start_us);
	if (now < measure_end_us && !failed)
		start_cycle(slot);
	else
		active_slots--;
}

/*
 * delete_done
 *		Third step finished: the cycle is complete.
 */
static void
delete_done(int rc, const void *data)
{
	if (rc != ZOK)
	{
		fail("delete", rc);
		active_slots--;
		return;
	}
	cycle_done((Slot *) data);
}

/*
 * read_done
 *		The one step of a "read" cycle finished.
 */
static void
read_done(int rc, const struct String_vector *strings, const void *data)
{
	(void) strings;
	if (rc != ZOK)
	{
		fail("get_children", rc);
		active_slots--;
		return;
	}
	cycle_done((Slot *) data);
}

/*
 * children_done
 *		Second step finished: delete our node.
 */
static void
children_done(int rc, const struct String_vector *strings, const void *data)
{
	Slot	   *slot = (Slot *) data;

	if (rc != ZOK)
	{
		fail("get_children", rc);
		active_slots--;
		return;
	}
	slot->step = STEP_DELETE;
	rc = zoo_adelete(zh, slot->node, -1, delete_done, slot);
	if (rc != ZOK)
	{
		fail("zoo_adelete", rc);
		active_slots--;
	}
}

/*
 * create_done
 *		First step finished: remember the node name, list the parent.
 */
static void
create_done(int rc, const char *value, const void *data)
{
	Slot	   *slot = (Slot *) data;

	if (rc != ZOK)
	{
		fail("create", rc);
		active_slots--;
		return;
	}
	snprintf(slot->node, PATH_LEN, "%s", value);
	slot->step = STEP_CHILDREN;
	rc = zoo_aget_children(zh, slot->parent, 0, children_done, slot);
	if (rc != ZOK)
	{
		fail("zoo_aget_children", rc);
		active_slots--;
	}
}

/*
 * start_cycle
 *		Queue the create of a new cycle on this slot.  The slot counts as
 *		active for as long as the cycle is running.
 */
static void
start_cycle(Slot *slot)
{
	int			rc;

	slot->start_us = now_us();
	if (read_only)
	{
		slot->step = STEP_CHILDREN;
		rc = zoo_aget_children(zh, slot->parent, 0, read_done, slot);
		if (rc != ZOK)
		{
			fail("zoo_aget_children", rc);
			active_slots--;
		}
		return;
	}
	slot->step = STEP_CREATE;
	rc = zoo_acreate(zh, slot->prefix, "", 0, &ZOO_OPEN_ACL_UNSAFE,
					 ZOO_EPHEMERAL | ZOO_SEQUENCE, create_done, slot);
	if (rc != ZOK)
	{
		fail("zoo_acreate", rc);
		active_slots--;
	}
}

/*
 * setup_done
 *		Completion of a parent create; an existing parent is fine.
 */
static void
setup_done(int rc, const char *value, const void *data)
{
	if (rc != ZOK && rc != ZNODEEXISTS)
		fail((const char *) data, rc);
	pending_setup--;
}

/*
 * create_parent
 *		Queue the persistent create of a parent node.
 */
static void
create_parent(const char *path)
{
	int			rc;

	pending_setup++;
	rc = zoo_acreate(zh, path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0,
					 setup_done, path);
	if (rc != ZOK)
	{
		fail("zoo_acreate (parent)", rc);
		pending_setup--;
	}
}

/*
 * run_events
 *		One turn of the event loop: ask the client what it wants, poll for
 *		it (at most max_wait_ms), let the client process what happened.
 */
static void
run_events(int max_wait_ms)
{
	int			fd = -1;
	int			interest = 0;
	int			timeout_ms;
	int			events = 0;
	int			rc;
	struct timeval tv;
	struct pollfd pfd;

	rc = zookeeper_interest(zh, &fd, &interest, &tv);
	if (rc != ZOK && rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT)
	{
		fail("zookeeper_interest", rc);
		return;
	}

	timeout_ms = tv.tv_sec * 1000 + tv.tv_usec / 1000;
	if (timeout_ms > max_wait_ms || timeout_ms < 0)
		timeout_ms = max_wait_ms;

	if (fd >= 0)
	{
		pfd.fd = fd;
		pfd.events = 0;
		pfd.revents = 0;
		if (interest & ZOOKEEPER_READ)
			pfd.events |= POLLIN;
		if (interest & ZOOKEEPER_WRITE)
			pfd.events |= POLLOUT;
		rc = poll(&pfd, 1, timeout_ms);
		if (rc < 0 && errno != EINTR)
		{
			perror("raw_cycle: poll");
			failed = 1;
			return;
		}
		if (rc > 0)
		{
			if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
				events |= ZOOKEEPER_READ;
			if (pfd.revents & POLLOUT)
				events |= ZOOKEEPER_WRITE;
		}
	}
	else
		poll(NULL, 0, timeout_ms);

	rc = zookeeper_process(zh, events);
	if (rc != ZOK && rc != ZNOTHING && rc != ZCONNECTIONLOSS &&
		rc != ZOPERATIONTIMEOUT)
		fail("zookeeper_process", rc);
}

/*
 * cmp_u32
 *		qsort comparator for uint32_t.
 */
static int
cmp_u32(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a;
	uint32_t	y = *(const uint32_t *) b;

	return (x > y) - (x < y);
}

/*
 * percentile
 *		Nearest-rank percentile of the sorted samples.
 */
static uint32_t
percentile(double p)
{
	size_t		rank;

	if (nlatencies == 0)
		return 0;
	rank = (size_t) (p / 100.0 * nlatencies + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > nlatencies)
		rank = nlatencies;
	return latencies[rank - 1];
}

/*
 * main
 *		Connect, create the parents, run the pipeline for warm-up plus the
 *		measured window, drain, report.
 */
int
main(int argc, char **argv)
{
	const char *hosts;
	int			inflight;
	int			shared;
	double		seconds;
	double		warmup = 0;
	uint64_t	deadline;
	uint64_t	t0;
	static char base[BASE_LEN];
	static char shared_parent[PATH_LEN];
	double		elapsed;
	uint64_t	sum = 0;
	size_t		i;
	const char *pid_env;
	CpuSnap		cpu_start = {-1, -1};
	CpuSnap		cpu_end = {-1, -1};
	int			window_state = 0;	/* 0 before, 1 inside, 2 after */
	long long	rq0;
	long long	rq1;

	if (argc < 5)
	{
		fprintf(stderr,
				"usage: %s host:port inflight distinct|shared|read seconds [warmup_seconds]\n",
				argv[0]);
		return 2;
	}
	hosts = argv[1];
	inflight = atoi(argv[2]);
	shared = (strcmp(argv[3], "shared") == 0);
	read_only = (strcmp(argv[3], "read") == 0);
	seconds = atof(argv[4]);
	if (argc > 5)
		warmup = atof(argv[5]);
	if (inflight < 1 || inflight > MAX_SLOTS || seconds <= 0 || warmup < 0)
	{
		fprintf(stderr, "raw_cycle: bad arguments\n");
		return 2;
	}
	pid_env = getenv("BENCH_ZK_PID");
	while (pid_env != NULL && *pid_env != '\0' && nzk_pids < MAX_ZK_PIDS)
	{
		char	   *end;

		zk_pids[nzk_pids++] = strtol(pid_env, &end, 10);
		pid_env = *end == ',' ? end + 1 : NULL;
	}

	zoo_set_debug_level(0);
	zh = zookeeper_init(hosts, session_watcher, 30000, NULL, NULL, 0);
	if (zh == NULL)
	{
		perror("raw_cycle: zookeeper_init");
		return 1;
	}

	/* wait for the session */
	deadline = now_us() + 15 * 1000000ULL;
	while (!connected && !failed && now_us() < deadline)
		run_events(100);
	if (!connected)
	{
		fprintf(stderr, "raw_cycle: could not connect to %s\n", hosts);
		return 1;
	}

	/* parents, created once: requests of one session apply in order */
	snprintf(base, BASE_LEN, "/bench/raw/%ld-%d-%s",
			 (long) getpid(), inflight, shared ? "shared" : read_only ? "read" : "distinct");
	snprintf(shared_parent, PATH_LEN, "%s/shared", base);
	create_parent("/bench");
	create_parent("/bench/raw");
	create_parent(base);
	if (shared)
		create_parent(shared_parent);
	for (i = 0; i < (size_t) inflight; i++)
	{
		Slot	   *slot = &slots[i];

		slot->idx = (int) i;
		if (shared)
			snprintf(slot->parent, PATH_LEN, "%s", shared_parent);
		else
		{
			snprintf(slot->parent, PATH_LEN, "%s/s%d", base, (int) i);
			create_parent(slot->parent);
		}
		snprintf(slot->prefix, PATH_LEN, "%s/lock-", slot->parent);
	}
	deadline = now_us() + 15 * 1000000ULL;
	while (pending_setup > 0 && !failed && now_us() < deadline)
		run_events(100);
	if (failed || pending_setup > 0)
	{
		fprintf(stderr, "raw_cycle: could not create parents\n");
		return 1;
	}

	/*
	 * run: warm-up, then the measured window.  The CPU counters are read
	 * when the loop first sees the window start and end; the event loop
	 * never sleeps past either boundary.  The slots stop after the window,
	 * so the last one may finish before the loop sees the end: read it
	 * then.
	 */
	rq0 = packets_received(hosts);
	t0 = now_us();
	measure_start_us = t0 + (uint64_t) (warmup * 1e6);
	measure_end_us = measure_start_us + (uint64_t) (seconds * 1e6);
	if (measure_start_us <= t0)
	{
		cpu_start = cpu_snap();
		window_state = 1;
	}
	for (i = 0; i < (size_t) inflight; i++)
	{
		active_slots++;
		start_cycle(&slots[i]);
	}
	deadline = measure_end_us + 30 * 1000000ULL;
	while (active_slots > 0 && !failed)
	{
		uint64_t	now = now_us();
		uint64_t	boundary;
		int			wait_ms = 100;

		if (now >= deadline)
			break;
		if (window_state == 0 && now >= measure_start_us)
		{
			cpu_start = cpu_snap();
			window_state = 1;
		}
		if (window_state == 1 && now >= measure_end_us)
		{
			cpu_end = cpu_snap();
			window_state = 2;
		}
		if (window_state < 2)
		{
			boundary = window_state == 0 ? measure_start_us : measure_end_us;
			if ((boundary - now) / 1000 + 1 < (uint64_t) wait_ms)
				wait_ms = (int) ((boundary - now) / 1000 + 1);
		}
		run_events(wait_ms);
	}
	if (window_state == 1)
		cpu_end = cpu_snap();
	rq1 = packets_received(hosts);
	if (failed || active_slots > 0)
	{
		fprintf(stderr, "raw_cycle: run failed (%d slots still active)\n",
				active_slots);
		return 1;
	}

	elapsed = (double) (measure_end_us - measure_start_us) / 1e6;
	qsort(latencies, nlatencies, sizeof(uint32_t), cmp_u32);
	for (i = 0; i < nlatencies; i++)
		sum += latencies[i];
	printf("RESULT inflight=%d shape=%s cycles=%zu secs=%.3f cps=%.0f p50=%u p99=%u avg=%.0f cpu_jiffies=%lld zk_jiffies=%lld requests=%lld all_cycles=%lld\n",
		   inflight, shared ? "shared" : read_only ? "read" : "distinct", nlatencies, elapsed,
		   nlatencies / elapsed, percentile(50), percentile(99),
		   nlatencies ? (double) sum / nlatencies : 0.0,
		   cpu_delta(cpu_start.machine, cpu_end.machine),
		   cpu_delta(cpu_start.zk, cpu_end.zk),
		   (rq0 < 0 || rq1 < 0) ? -1LL : rq1 - rq0, all_cycles);

	zookeeper_close(zh);
	return 0;
}
