/*-------------------------------------------------------------------------
 *
 * delay_proxy.c
 *		A user-space TCP proxy that delays every byte by a fixed time, for
 *		the benchmark's emulated network (this kernel has no netem).
 *
 * It listens on one loopback address (127.0.0.0/8 only: inside the
 * benchmark's private network namespace that loopback is the run's own)
 * and relays each accepted connection to one upstream address, both ways.
 * Every chunk read from one side is written to the other side DELAY_US
 * microseconds after it was read, in order, so a request and its reply
 * each take DELAY_US more: a round trip through the proxy costs 2 *
 * DELAY_US more than a direct one.
 *
 * Single-threaded: one epoll loop, one timerfd armed at the earliest
 * release time of any chunk.  Buffers are bounded: each direction of a
 * connection holds at most BUF_SIZE bytes and MAX_CHUNKS chunks; a full
 * direction stops reading its source until bytes go out (TCP's own flow
 * control then slows the sender).  At most MAX_CONNS connections at once;
 * more are accepted and closed at once.  The proxy ends by itself after
 * MAX_SECONDS, or on SIGTERM / SIGINT, and then prints what it relayed.
 *
 * Usage:
 *		delay_proxy LISTEN_IP:PORT UPSTREAM_IP:PORT DELAY_US MAX_SECONDS
 *
 * Prints "READY" on stdout once it listens; at the end, on stderr, one
 * line "delay_proxy: ..." with the connections and bytes relayed.
 *
 * test/bench/delay_proxy.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE				/* accept4 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS		64
#define BUF_SIZE		(128 * 1024)
#define MAX_CHUNKS		1024
#define CONNECT_MS		2000	/* bound of one upstream connect */

/* epoll tags of the two fds that are not a connection's */
#define TAG_LISTEN		UINT64_MAX
#define TAG_TIMER		(UINT64_MAX - 1)

/* A chunk of one direction: the bytes up to "end" go out at "release_us" */
typedef struct Chunk
{
	uint64_t	release_us;
	uint64_t	end;			/* stream offset just past the chunk */
} Chunk;

/* One direction of a connection: bytes read from "from", written to "to" */
typedef struct Pipe
{
	int			from;
	int			to;
	char	   *buf;			/* ring of BUF_SIZE bytes */
	uint64_t	head;			/* stream offset written out so far */
	uint64_t	tail;			/* stream offset read in so far */
	Chunk		chunks[MAX_CHUNKS];
	int			chead;			/* oldest chunk */
	int			ccount;			/* chunks queued */
	bool		eof;			/* "from" said end of stream */
	bool		shut;			/* "to" was shut down for writing */
	bool		blocked;		/* "to" refused bytes: wait for EPOLLOUT */
	uint64_t	total;			/* bytes relayed */
} Pipe;

/* One relayed connection: client fd, upstream fd, both directions */
typedef struct Conn
{
	bool		used;
	int			cfd;
	int			ufd;
	uint32_t	cmask;			/* epoll events asked for on cfd */
	uint32_t	umask;			/* and on ufd */
	Pipe		up;				/* client -> upstream */
	Pipe		down;			/* upstream -> client */
} Conn;

static Conn conns[MAX_CONNS];
static int	epfd;
static int	timerfd;
static uint64_t delay_us;
static volatile sig_atomic_t stop_now = 0;
static long accepted = 0;
static long refused = 0;
static uint64_t total_up = 0;
static uint64_t total_down = 0;

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
 * on_signal
 *		SIGTERM / SIGINT: leave the loop.
 */
static void
on_signal(int sig)
{
	(void) sig;
	stop_now = 1;
}

/*
 * parse_addr
 *		"a.b.c.d:port" into a sockaddr; false if it is not one.
 */
static bool
parse_addr(const char *text, struct sockaddr_in *sa)
{
	const char *colon = strrchr(text, ':');
	char		host[64];
	long		port;

	if (colon == NULL || (size_t) (colon - text) >= sizeof(host))
		return false;
	memcpy(host, text, colon - text);
	host[colon - text] = '\0';
	port = strtol(colon + 1, NULL, 10);
	if (port <= 0 || port > 65535)
		return false;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short) port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}

/*
 * set_nodelay
 *		No Nagle: a delayed chunk must leave as soon as it is released.
 */
static void
set_nodelay(int fd)
{
	int			one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * pipe_init
 *		An empty direction from one fd to another.
 */
static bool
pipe_init(Pipe *p, int from, int to)
{
	memset(p, 0, sizeof(*p));
	p->from = from;
	p->to = to;
	p->buf = malloc(BUF_SIZE);
	return p->buf != NULL;
}

/*
 * conn_close
 *		Close both ends of a connection and free its buffers.
 */
static void
conn_close(Conn *c)
{
	if (!c->used)
		return;
	total_up += c->up.total;
	total_down += c->down.total;
	close(c->cfd);
	close(c->ufd);
	free(c->up.buf);
	free(c->down.buf);
	c->used = false;
}

/*
 * pipe_wants_read
 *		Whether a direction has room for more bytes from its source.
 */
static bool
pipe_wants_read(const Pipe *p)
{
	return !p->eof && p->tail - p->head < BUF_SIZE && p->ccount < MAX_CHUNKS;
}

/*
 * conn_update_interest
 *		Ask epoll for what each fd of a connection waits for now: input
 *		while its direction has room, output while the other direction is
 *		blocked on it.
 */
static void
conn_update_interest(Conn *c, uint64_t tag)
{
	uint32_t	cm = 0;
	uint32_t	um = 0;
	struct epoll_event ev;

	if (pipe_wants_read(&c->up))
		cm |= EPOLLIN;
	if (c->down.blocked)
		cm |= EPOLLOUT;
	if (pipe_wants_read(&c->down))
		um |= EPOLLIN;
	if (c->up.blocked)
		um |= EPOLLOUT;
	if (cm != c->cmask)
	{
		ev.events = cm;
		ev.data.u64 = tag * 2;
		epoll_ctl(epfd, EPOLL_CTL_MOD, c->cfd, &ev);
		c->cmask = cm;
	}
	if (um != c->umask)
	{
		ev.events = um;
		ev.data.u64 = tag * 2 + 1;
		epoll_ctl(epfd, EPOLL_CTL_MOD, c->ufd, &ev);
		c->umask = um;
	}
}

/*
 * pipe_read
 *		Read what the source has (as much as fits) and queue it as one
 *		chunk released delay_us from now.  Returns false when the
 *		connection must be closed.
 */
static bool
pipe_read(Pipe *p)
{
	uint64_t	room = BUF_SIZE - (p->tail - p->head);
	size_t		off = p->tail % BUF_SIZE;
	size_t		len = BUF_SIZE - off;
	ssize_t		n;
	Chunk	   *ch;

	if (!pipe_wants_read(p))
		return true;
	if (len > room)
		len = room;
	n = read(p->from, p->buf + off, len);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
	if (n == 0)
	{
		p->eof = true;
		return true;
	}
	p->tail += (uint64_t) n;
	ch = &p->chunks[(p->chead + p->ccount) % MAX_CHUNKS];
	ch->release_us = now_us() + delay_us;
	ch->end = p->tail;
	p->ccount++;
	return true;
}

/*
 * pipe_write
 *		Write the bytes whose chunks are due by now; shut the destination
 *		down for writing once the source ended and everything went out.
 *		Returns false when the connection must be closed.
 */
static bool
pipe_write(Pipe *p, uint64_t now)
{
	uint64_t	limit = p->head;
	int			i;

	for (i = 0; i < p->ccount; i++)
	{
		const Chunk *ch = &p->chunks[(p->chead + i) % MAX_CHUNKS];

		if (ch->release_us > now)
			break;
		limit = ch->end;
	}
	p->blocked = false;
	while (p->head < limit)
	{
		size_t		off = p->head % BUF_SIZE;
		size_t		len = BUF_SIZE - off;
		ssize_t		n;

		if (len > limit - p->head)
			len = limit - p->head;
		n = write(p->to, p->buf + off, len);
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
			{
				p->blocked = true;
				break;
			}
			return false;
		}
		p->head += (uint64_t) n;
		p->total += (uint64_t) n;
	}
	while (p->ccount > 0 && p->chunks[p->chead].end <= p->head)
	{
		p->chead = (p->chead + 1) % MAX_CHUNKS;
		p->ccount--;
	}
	if (p->eof && !p->shut && p->head == p->tail)
	{
		shutdown(p->to, SHUT_WR);
		p->shut = true;
	}
	return true;
}

/*
 * connect_upstream
 *		A non-blocking socket connected to the upstream, waiting at most
 *		CONNECT_MS for it; -1 on failure.
 */
static int
connect_upstream(const struct sockaddr_in *up)
{
	int			fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct pollfd pfd;
	int			err = 0;
	socklen_t	elen = sizeof(err);

	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *) up, sizeof(*up)) == 0)
		return fd;
	if (errno != EINPROGRESS)
	{
		close(fd);
		return -1;
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, CONNECT_MS) != 1 ||
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0)
	{
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * accept_one
 *		Accept a client, connect it to the upstream and start relaying;
 *		a client beyond MAX_CONNS, or whose upstream does not answer, is
 *		closed at once.
 */
static void
accept_one(int lfd, const struct sockaddr_in *up)
{
	int			cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	int			ufd;
	int			i;
	Conn	   *c = NULL;
	struct epoll_event ev;

	if (cfd < 0)
		return;
	for (i = 0; i < MAX_CONNS; i++)
		if (!conns[i].used)
		{
			c = &conns[i];
			break;
		}
	if (c == NULL || (ufd = connect_upstream(up)) < 0)
	{
		refused++;
		close(cfd);
		return;
	}
	set_nodelay(cfd);
	set_nodelay(ufd);
	if (!pipe_init(&c->up, cfd, ufd) || !pipe_init(&c->down, ufd, cfd))
	{
		free(c->up.buf);
		refused++;
		close(cfd);
		close(ufd);
		return;
	}
	c->used = true;
	c->cfd = cfd;
	c->ufd = ufd;
	c->cmask = EPOLLIN;
	c->umask = EPOLLIN;
	ev.events = EPOLLIN;
	ev.data.u64 = (uint64_t) i * 2;
	epoll_ctl(epfd, EPOLL_CTL_ADD, cfd, &ev);
	ev.data.u64 = (uint64_t) i * 2 + 1;
	epoll_ctl(epfd, EPOLL_CTL_ADD, ufd, &ev);
	accepted++;
}

/*
 * arm_timer
 *		Set the timerfd to the earliest release time of a chunk still
 *		queued (and not waiting for its destination to take bytes);
 *		disarm it when there is none.
 */
static void
arm_timer(void)
{
	uint64_t	next = 0;
	struct itimerspec its;
	int			i;

	for (i = 0; i < MAX_CONNS; i++)
	{
		Pipe	   *ps[2] = {&conns[i].up, &conns[i].down};
		int			k;

		if (!conns[i].used)
			continue;
		for (k = 0; k < 2; k++)
		{
			Pipe	   *p = ps[k];

			if (p->ccount == 0 || p->blocked)
				continue;
			if (next == 0 || p->chunks[p->chead].release_us < next)
				next = p->chunks[p->chead].release_us;
		}
	}
	memset(&its, 0, sizeof(its));
	if (next != 0)
	{
		its.it_value.tv_sec = (time_t) (next / 1000000);
		its.it_value.tv_nsec = (long) (next % 1000000) * 1000;
	}
	timerfd_settime(timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/*
 * main
 *		Listen, relay until MAX_SECONDS or a signal, report.
 */
int
main(int argc, char **argv)
{
	struct sockaddr_in lsa;
	struct sockaddr_in usa;
	int			lfd;
	int			one = 1;
	double		max_seconds;
	uint64_t	end_us;
	struct epoll_event ev;
	struct sigaction sa;
	int			i;

	if (argc != 5 || !parse_addr(argv[1], &lsa) || !parse_addr(argv[2], &usa))
	{
		fprintf(stderr, "usage: %s LISTEN_IP:PORT UPSTREAM_IP:PORT DELAY_US MAX_SECONDS\n",
				argv[0]);
		return 2;
	}
	delay_us = strtoull(argv[3], NULL, 10);
	max_seconds = atof(argv[4]);
	if (max_seconds <= 0 || delay_us > 10000000)
	{
		fprintf(stderr, "delay_proxy: bad DELAY_US or MAX_SECONDS\n");
		return 2;
	}
	/* loopback only: never a listener on a real network */
	if ((ntohl(lsa.sin_addr.s_addr) >> 24) != 127)
	{
		fprintf(stderr, "delay_proxy: listens on 127.0.0.0/8 only, not %s\n", argv[1]);
		return 2;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* timers fire on time, not up to 50 us late */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0)
	{
		perror("delay_proxy: socket");
		return 1;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *) &lsa, sizeof(lsa)) != 0 ||
		listen(lfd, 64) != 0)
	{
		fprintf(stderr, "delay_proxy: cannot listen on %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	epfd = epoll_create1(0);
	timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	if (epfd < 0 || timerfd < 0)
	{
		perror("delay_proxy: epoll / timerfd");
		return 1;
	}
	ev.events = EPOLLIN;
	ev.data.u64 = TAG_LISTEN;
	epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
	ev.data.u64 = TAG_TIMER;
	epoll_ctl(epfd, EPOLL_CTL_ADD, timerfd, &ev);

	printf("READY\n");
	fflush(stdout);

	end_us = now_us() + (uint64_t) (max_seconds * 1e6);
	while (!stop_now)
	{
		struct epoll_event evs[64];
		uint64_t	now = now_us();
		int			n;
		int			k;

		if (now >= end_us)
			break;
		n = epoll_wait(epfd, evs, 64, (int) ((end_us - now) / 1000 < 1000 ? (end_us - now) / 1000 + 1 : 1000));
		if (n < 0 && errno != EINTR)
		{
			perror("delay_proxy: epoll_wait");
			break;
		}
		for (k = 0; k < n; k++)
		{
			uint64_t	tag = evs[k].data.u64;
			Conn	   *c;
			bool		ok = true;

			if (tag == TAG_LISTEN)
			{
				accept_one(lfd, &usa);
				continue;
			}
			if (tag == TAG_TIMER)
			{
				uint64_t	expirations;

				if (read(timerfd, &expirations, sizeof(expirations)) < 0)
				{
					/* nothing: spurious wake-up */
				}
				continue;
			}
			c = &conns[tag / 2];
			if (!c->used)
				continue;
			if (evs[k].events & EPOLLERR)
				ok = false;		/* reset: both ends go */
			else if (evs[k].events & (EPOLLIN | EPOLLHUP))
			{
				Pipe	   *p = tag % 2 == 0 ? &c->up : &c->down;

				/* a hang-up after the source's end ends the relay */
				if ((evs[k].events & EPOLLHUP) && p->eof)
					ok = false;
				else
					ok = pipe_read(p);
			}
			if (!ok)
				conn_close(c);
		}

		/* everything due goes out; then the connections' interests */
		now = now_us();
		for (i = 0; i < MAX_CONNS; i++)
		{
			Conn	   *c = &conns[i];

			if (!c->used)
				continue;
			if (!pipe_write(&c->up, now) || !pipe_write(&c->down, now) ||
				(c->up.shut && c->down.shut))
			{
				conn_close(c);
				continue;
			}
			conn_update_interest(c, (uint64_t) i);
		}
		arm_timer();
	}

	for (i = 0; i < MAX_CONNS; i++)
		conn_close(&conns[i]);
	close(lfd);
	fprintf(stderr, "delay_proxy: %s -> %s, delay %llu us: %ld connections (%ld refused), %llu bytes up, %llu down\n",
			argv[1], argv[2], (unsigned long long) delay_us, accepted, refused,
			(unsigned long long) total_up, (unsigned long long) total_down);
	return 0;
}
