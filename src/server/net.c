/*
 * net.c - the event loops of tips-server (net.h): accepting connections, reading and
 * parsing requests, running them through the dispatcher, writing replies.
 *
 * Each loop is one thread with its own epoll set, level-triggered. A readable client
 * is read once, every complete command in its buffer is run (pipelining), and the
 * replies are written with as few writev() calls as the socket allows. While a client
 * has reply bytes the socket would not take, the loop waits for it to become writable
 * and reads nothing more from it, so a client that does not read its replies cannot
 * make the server buffer without bound; one huge reply is bounded by
 * client-output-buffer-limit, one huge request by client-query-buffer-limit (the client
 * is dropped past either, as Redis does).
 */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK (16u * 1024u)
#define MAX_EVENTS 128
#define MAX_IOV 64

void server_log(char level, const char *fmt, ...)
{
	char msg[1024], when[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	localtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(when, sizeof(when), "%d %b %Y %H:%M:%S", &tm);
	snprintf(when + n, sizeof(when) - n, ".%03ld", ts.tv_nsec / 1000000);
	fprintf(stdout, "%d:M %s %c %s\n", (int)getpid(), when, level, msg);
	fflush(stdout);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int net_listen(struct server *srv, char *err, size_t errlen)
{
	srv->tcp_fd = srv->unix_fd = -1;
	if (srv->cfg.port) {
		struct addrinfo hints = {0}, *res = NULL;
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
		char port[16];
		snprintf(port, sizeof(port), "%d", srv->cfg.port);
		int rc = getaddrinfo(srv->cfg.bind, port, &hints, &res);
		if (rc) {
			snprintf(err, errlen, "cannot bind to '%s': %s", srv->cfg.bind,
				 gai_strerror(rc));
			return -1;
		}
		int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int one = 1;
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
		    bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 511) ||
		    set_nonblock(fd)) {
			snprintf(err, errlen, "cannot listen on %s:%d: %s", srv->cfg.bind,
				 srv->cfg.port, strerror(errno));
			if (fd >= 0)
				close(fd);
			freeaddrinfo(res);
			return -1;
		}
		freeaddrinfo(res);
		srv->tcp_fd = fd;
	}
	if (srv->cfg.unixsocket[0]) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (strlen(srv->cfg.unixsocket) >= sizeof(sa.sun_path)) {
			snprintf(err, errlen, "unixsocket path too long: %s", srv->cfg.unixsocket);
			goto fail;
		}
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", srv->cfg.unixsocket);
		unlink(sa.sun_path);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 511) ||
		    set_nonblock(fd)) {
			snprintf(err, errlen, "cannot listen on unix socket %s: %s",
				 srv->cfg.unixsocket, strerror(errno));
			if (fd >= 0)
				close(fd);
			goto fail;
		}
		srv->unix_fd = fd;
	}
	if (srv->tcp_fd < 0 && srv->unix_fd < 0) {
		snprintf(err, errlen, "nothing to listen on: port is 0 and no unixsocket");
		return -1;
	}
	return 0;
fail:
	if (srv->tcp_fd >= 0)
		close(srv->tcp_fd);
	srv->tcp_fd = -1;
	return -1;
}

/* ---- clients ------------------------------------------------------------------------ */

static void free_client(struct client *c)
{
	struct loop *l = c->loop;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		l->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	reply_free(c);
	resp_parser_free(&c->parser);
	for (size_t i = 0; i < c->mcount; i++)
		free((void *)c->mstate[i].argv);
	free(c->mstate);
	free(c->watched);
	free(c->qbuf);
	free(c->name);
	free(c);
	atomic_fetch_sub(&l->srv->connected, 1);
}

static void add_client(struct loop *l, int fd)
{
	struct server *srv = l->srv;
	struct client *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		atomic_fetch_sub(&srv->connected, 1);
		return;
	}
	c->fd = fd;
	c->srv = srv;
	c->loop = l;
	c->id = atomic_fetch_add(&srv->next_client_id, 1) + 1;
	c->ctime_ms = server_now_ms();
	pthread_mutex_lock(&srv->cfg.lock);
	c->authenticated = srv->cfg.requirepass[0] == 0;
	pthread_mutex_unlock(&srv->cfg.lock);
	resp_parser_init(&c->parser, __atomic_load_n(&srv->cfg.proto_max_bulk_len,
						     __ATOMIC_RELAXED), 1024 * 1024);
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.ss_family != AF_UNIX) {
		char host[INET6_ADDRSTRLEN] = "?";
		int port = 0;
		if (sa.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&sa;
			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
			port = ntohs(in->sin_port);
		} else {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&sa;
			inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
			port = ntohs(in6->sin6_port);
		}
		snprintf(c->addr, sizeof(c->addr), "%s:%d", host, port);
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	} else {
		c->flags |= CLIENT_UNIX;
		snprintf(c->addr, sizeof(c->addr), "%s:0", srv->cfg.unixsocket);
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		resp_parser_free(&c->parser);
		free(c);
		close(fd);
		atomic_fetch_sub(&srv->connected, 1);
		return;
	}
	c->next = l->clients;
	if (c->next)
		c->next->prev = c;
	l->clients = c;
}

int net_output_limit_passed(struct client *c, size_t add)
{
	uint64_t limit = __atomic_load_n(&c->srv->cfg.output_buffer_limit, __ATOMIC_RELAXED);
	return c->reply_bytes + add > limit;
}

void net_count_error(struct client *c)
{
	atomic_fetch_add(&c->srv->total_errors, 1);
}

/* Writes as much of the reply as the socket takes. Return: 0, or -1 to drop @c. */
static int write_reply(struct client *c)
{
	while (c->reply_head) {
		struct iovec iov[MAX_IOV];
		int n = 0;
		size_t off = c->reply_sent;
		for (struct reply_chunk *ch = c->reply_head; ch && n < MAX_IOV; ch = ch->next) {
			if (ch->len > off) {
				iov[n].iov_base = ch->data + off;
				iov[n].iov_len = ch->len - off;
				n++;
			}
			off = 0;
		}
		if (!n) {
			reply_free(c);
			break;
		}
		ssize_t w = writev(c->fd, iov, n);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -1;
		}
		atomic_fetch_add(&c->srv->net_output, (uint64_t)w);
		size_t left = (size_t)w;
		c->reply_bytes -= left;
		while (c->reply_head) {
			struct reply_chunk *ch = c->reply_head;
			size_t avail = ch->len - c->reply_sent;
			if (left < avail) {
				c->reply_sent += left;
				break;
			}
			left -= avail;
			c->reply_head = ch->next;
			c->reply_sent = 0;
			free(ch);
		}
		if (!c->reply_head)
			c->reply_tail = NULL;
	}
	return 0;
}

/* Runs every complete command in the query buffer. */
static void process_input(struct client *c)
{
	while (c->qpos < c->qlen &&
	       !(c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP))) {
		/* CONFIG SET proto-max-bulk-len applies at once; a client that has not
		 * authenticated may send only small requests (as Redis: 10 arguments, 16 KiB) */
		if (c->authenticated) {
			c->parser.max_bulk = __atomic_load_n(&c->srv->cfg.proto_max_bulk_len,
							     __ATOMIC_RELAXED);
			c->parser.max_args = 1024 * 1024;
		} else {
			c->parser.max_bulk = 16384;
			c->parser.max_args = 10;
		}
		int rc = resp_parse(&c->parser, c->qbuf + c->qpos, c->qlen - c->qpos);
		if (rc == RESP_MORE)
			break;
		if (rc == RESP_ERROR) {
			group_run(c, &c->loop->group); /* the commands before it reply first */
			add_reply_errorf(c, "ERR %s", c->parser.err);
			c->flags |= CLIENT_CLOSE_AFTER_REPLY;
			break;
		}
		c->qpos += c->parser.used;
		if (c->parser.argc == 0)
			continue;
		c->argc = c->parser.argc;
		c->argv = c->parser.argv;
		if (group_add(c, &c->loop->group)) {
			if (c->loop->group.n == GROUP_MAX)
				group_run(c, &c->loop->group);
		} else {
			group_run(c, &c->loop->group);
			dispatch_command(c);
		}
		c->argc = 0;
		c->argv = NULL;
	}
	/* the grouped commands' arguments live in the query buffer: run them before it
	 * moves */
	group_run(c, &c->loop->group);
	if (c->qpos == c->qlen) {
		c->qpos = c->qlen = 0;
		if (c->qcap > 1024 * 1024) { /* a big request is done: give its room back */
			free(c->qbuf);
			c->qbuf = NULL;
			c->qcap = 0;
		}
	} else if (c->qpos) {
		memmove(c->qbuf, c->qbuf + c->qpos, c->qlen - c->qpos);
		c->qlen -= c->qpos;
		c->qpos = 0;
	}
}

/* Makes room to read. Return: 0, or -1 if the request passes the query buffer limit. */
static int reserve_input(struct client *c)
{
	uint64_t limit = __atomic_load_n(&c->srv->cfg.query_buffer_limit, __ATOMIC_RELAXED);
	size_t want = resp_command_min_size(&c->parser);
	if (want > limit || c->qlen > limit)
		return -1;
	/* grow with the bytes that arrive (doubling), never to a length only announced */
	size_t need = c->qlen + READ_CHUNK;
	if (want > need && 2 * c->qcap > need)
		need = want < 2 * c->qcap ? want : 2 * c->qcap;
	if (need <= c->qcap)
		return 0;
	size_t cap = c->qcap ? c->qcap : READ_CHUNK;
	while (cap < need)
		cap *= 2;
	char *b = realloc(c->qbuf, cap);
	if (!b)
		return -1;
	c->qbuf = b;
	c->qcap = cap;
	return 0;
}

static void handle_client(struct client *c, uint32_t events)
{
	if (events & EPOLLIN) {
		if (reserve_input(c)) {
			server_log('#', "Closing client %s: request larger than "
				   "client-query-buffer-limit", c->addr);
			free_client(c);
			return;
		}
		ssize_t n = read(c->fd, c->qbuf + c->qlen, c->qcap - c->qlen);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			free_client(c);
			return;
		}
		if (n > 0) {
			c->qlen += (size_t)n;
			atomic_fetch_add(&c->srv->net_input, (uint64_t)n);
			process_input(c);
		}
	} else if (!(events & EPOLLOUT)) {
		free_client(c); /* EPOLLERR or EPOLLHUP alone */
		return;
	}
	if (c->flags & CLIENT_CLOSE_ASAP) {
		server_log('#', "Closing client %s: reply larger than client-output-buffer-limit",
			   c->addr);
		free_client(c);
		return;
	}
	if (write_reply(c) || (!c->reply_bytes && (c->flags & CLIENT_CLOSE_AFTER_REPLY))) {
		free_client(c);
		return;
	}
	/* while a reply waits for the socket, read nothing more (back-pressure) */
	int want_write = c->reply_bytes != 0;
	if (want_write != c->want_write) {
		struct epoll_event ev = {.events = want_write ? EPOLLOUT : EPOLLIN, .data.ptr = c};
		epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
		c->want_write = want_write;
	}
}

/* ---- accepting ---------------------------------------------------------------------- */

static void hand_over(struct server *srv, int fd)
{
	struct loop *l = &srv->loops[atomic_fetch_add(&srv->next_loop, 1) % srv->nloops];
	pthread_mutex_lock(&l->inbox_lock);
	if (l->ninbox == l->inbox_cap) {
		size_t cap = l->inbox_cap ? 2 * l->inbox_cap : 16;
		int *in = realloc(l->inbox, cap * sizeof(*in));
		if (!in) {
			pthread_mutex_unlock(&l->inbox_lock);
			close(fd);
			atomic_fetch_sub(&srv->connected, 1);
			return;
		}
		l->inbox = in;
		l->inbox_cap = cap;
	}
	l->inbox[l->ninbox++] = fd;
	pthread_mutex_unlock(&l->inbox_lock);
	uint64_t one = 1;
	if (write(l->wake_fd, &one, sizeof(one)) < 0)
		server_log('#', "cannot wake event loop %u: %s", l->id, strerror(errno));
}

static void accept_all(struct server *srv, int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				server_log('#', "accept: %s", strerror(errno));
			return;
		}
		unsigned max = __atomic_load_n(&srv->cfg.maxclients, __ATOMIC_RELAXED);
		if (atomic_fetch_add(&srv->connected, 1) >= max) {
			atomic_fetch_sub(&srv->connected, 1);
			atomic_fetch_add(&srv->rejected_connections, 1);
			static const char msg[] = "-ERR max number of clients reached\r\n";
			if (write(fd, msg, sizeof(msg) - 1) < 0) {
				/* the client is refused either way */
			}
			close(fd);
			continue;
		}
		atomic_fetch_add(&srv->total_connections, 1);
		hand_over(srv, fd);
	}
}

static void take_inbox(struct loop *l)
{
	uint64_t v;
	if (read(l->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		server_log('#', "event loop %u: eventfd: %s", l->id, strerror(errno));
	pthread_mutex_lock(&l->inbox_lock);
	int *fds = l->inbox;
	size_t n = l->ninbox;
	l->inbox = NULL;
	l->ninbox = l->inbox_cap = 0;
	pthread_mutex_unlock(&l->inbox_lock);
	for (size_t i = 0; i < n; i++)
		add_client(l, fds[i]);
	free(fds);
}

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	struct server *srv = l->srv;
	struct epoll_event evs[MAX_EVENTS];
	while (!atomic_load(&srv->stopping)) {
		int n = epoll_wait(l->epfd, evs, MAX_EVENTS, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			server_log('#', "event loop %u: epoll_wait: %s", l->id, strerror(errno));
			break;
		}
		for (int i = 0; i < n && !atomic_load(&srv->stopping); i++) {
			void *p = evs[i].data.ptr;
			if (p == &l->wake_fd)
				take_inbox(l);
			else if (p == &srv->tcp_fd)
				accept_all(srv, srv->tcp_fd);
			else if (p == &srv->unix_fd)
				accept_all(srv, srv->unix_fd);
			else
				handle_client(p, evs[i].events);
		}
	}
	return NULL;
}

int net_start(struct server *srv, char *err, size_t errlen)
{
	srv->nloops = srv->cfg.threads;
	srv->loops = calloc(srv->nloops, sizeof(*srv->loops));
	if (!srv->loops) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (unsigned i = 0; i < srv->nloops; i++)
		srv->loops[i].epfd = srv->loops[i].wake_fd = -1;
	for (unsigned i = 0; i < srv->nloops; i++) {
		struct loop *l = &srv->loops[i];
		l->srv = srv;
		l->id = i;
		pthread_mutex_init(&l->inbox_lock, NULL);
		l->epfd = epoll_create1(EPOLL_CLOEXEC);
		l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->wake_fd};
		if (l->epfd < 0 || l->wake_fd < 0 ||
		    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wake_fd, &ev)) {
			snprintf(err, errlen, "cannot create event loop: %s", strerror(errno));
			return -1;
		}
		if (ks_txn_new(srv->db, &l->txn)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	struct loop *l0 = &srv->loops[0];
	if (srv->tcp_fd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &srv->tcp_fd};
		epoll_ctl(l0->epfd, EPOLL_CTL_ADD, srv->tcp_fd, &ev);
	}
	if (srv->unix_fd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &srv->unix_fd};
		epoll_ctl(l0->epfd, EPOLL_CTL_ADD, srv->unix_fd, &ev);
	}
	for (unsigned i = 0; i < srv->nloops; i++) {
		if (pthread_create(&srv->loops[i].thread, NULL, loop_main, &srv->loops[i])) {
			snprintf(err, errlen, "cannot start event loop thread %u", i);
			return -1;
		}
		srv->loops[i].started = 1;
	}
	return 0;
}

void net_stop(struct server *srv)
{
	atomic_store(&srv->stopping, 1);
	for (unsigned i = 0; i < srv->nloops; i++) {
		uint64_t one = 1;
		if (srv->loops[i].wake_fd >= 0 && write(srv->loops[i].wake_fd, &one, 8) < 0)
			server_log('#', "cannot wake event loop %u: %s", i, strerror(errno));
	}
	for (unsigned i = 0; i < srv->nloops; i++) {
		struct loop *l = &srv->loops[i];
		if (l->started)
			pthread_join(l->thread, NULL);
		while (l->clients)
			free_client(l->clients);
		for (size_t j = 0; j < l->ninbox; j++)
			close(l->inbox[j]);
		free(l->inbox);
		ks_txn_free(&l->txn);
		free(l->group.args);
		free(l->group.inline_bytes);
		if (l->epfd >= 0)
			close(l->epfd);
		if (l->wake_fd >= 0)
			close(l->wake_fd);
		pthread_mutex_destroy(&l->inbox_lock);
	}
	free(srv->loops);
	srv->loops = NULL;
	if (srv->tcp_fd >= 0)
		close(srv->tcp_fd);
	if (srv->unix_fd >= 0) {
		close(srv->unix_fd);
		unlink(srv->cfg.unixsocket);
	}
	srv->tcp_fd = srv->unix_fd = -1;
}

void net_ask_shutdown(struct server *srv)
{
	atomic_store(&srv->shutdown_asked, 1);
	kill(getpid(), SIGUSR1);
}
