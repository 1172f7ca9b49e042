/*
 * net.h - the server object, its event loops, and what the loops offer the rest of
 * tips-server (reply marks for the dispatcher, output limits, counters).
 *
 * Threads. net_start() runs N event loops (epoll), one thread each. Loop 0 also watches
 * the listening sockets and hands each new connection to the loops in turn, so
 * connections spread evenly. A client lives and dies on its loop: every read, parse,
 * command and write of it happens on that thread. Invariant: a client's reply bytes are
 * written only after the commands that produced them have returned from the dispatcher
 * (so after their commit), and in the order the commands arrived.
 */
#ifndef TIPS_SERVER_NET_H
#define TIPS_SERVER_NET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "config.h"
#include "server.h"

struct server {
	struct server_config cfg;
	struct ks_db *db;
	int tcp_fd, unix_fd;          /* -1 if not listening there */
	struct loop *loops;
	unsigned nloops;
	atomic_uint next_loop;        /* round robin of new connections */
	int64_t start_ms;
	char run_id[41];
	_Atomic uint64_t next_client_id;
	_Atomic uint64_t connected, total_connections, rejected_connections;
	_Atomic uint64_t total_commands, total_errors, net_input, net_output;
	_Atomic int64_t lastsave;     /* Unix s of the last SAVE / start */
	atomic_int stopping;          /* loops leave their wait and exit */
	atomic_int shutdown_asked;    /* SHUTDOWN ran: main stops the server */
	struct scan_cursors *cursors; /* SCAN's cursor table (cmd_keys.c) */
};

/* Pipelined commands of one client run as one transaction (group commit). */
#define GROUP_MAX 256u
struct group_item {
	const struct command *cmd;
	int argc;
	size_t first;                 /* index of its first argument in args */
};
#define GROUP_INLINE_BYTES (128u * 1024u)
struct group {
	struct group_item items[GROUP_MAX];
	size_t n;
	struct arg *args;             /* argument arrays: multibulk bytes stay in the query
	                                 buffer, inline ones are copied to inline_bytes */
	size_t nargs, cap;
	char *inline_bytes;           /* GROUP_INLINE_BYTES, never moved while grouped */
	size_t inline_used;
};

struct loop {
	struct server *srv;
	unsigned id;
	int epfd;
	int wake_fd;                  /* eventfd: new connections, stop */
	pthread_t thread;
	int started;
	struct ks_txn *txn;           /* the transaction of every command run here */
	struct group group;           /* the pipelined commands waiting to run together */
	struct client *clients;       /* list of this loop's clients */
	pthread_mutex_t inbox_lock;   /* connections handed over by loop 0 */
	int *inbox;
	size_t ninbox, inbox_cap;
};

/** net_listen() - open the listening sockets (before the pool is opened, so a busy
 * port leaves the pool untouched). Return: 0 or -1 with a one-line message in @err. */
int net_listen(struct server *srv, char *err, size_t errlen);
/** net_start() - start the event loops. Return: 0 or -1 with a message in @err. */
int net_start(struct server *srv, char *err, size_t errlen);
/** net_stop() - stop the loops (each finishes the command it runs), close every client
 * and the listening sockets. */
void net_stop(struct server *srv);
/** net_ask_shutdown() - SHUTDOWN: tell the main thread to stop the server. */
void net_ask_shutdown(struct server *srv);

/** server_log() - one line on the log, Redis style: "pid:M date time LEVEL message"
 * (@level: '.' debug, '-' verbose, '*' notice, '#' warning). Thread-safe. */
void server_log(char level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** net_output_limit_passed() - 1 if adding @add bytes to @c's reply passes the
 * client-output-buffer-limit (then the client is dropped). */
int net_output_limit_passed(struct client *c, size_t add);
/** net_count_error() - count an error reply (INFO total_error_replies). */
void net_count_error(struct client *c);

/** scan_cursors_new(), scan_cursors_free() - SCAN's cursor table (cmd_keys.c). */
struct scan_cursors *scan_cursors_new(void);
void scan_cursors_free(struct scan_cursors *s);

/* ---- reply internals (reply.c), for the dispatcher ---------------------------------- */

/* A position in a client's reply, to take back what a failed command added. */
struct reply_mark {
	struct reply_chunk *tail;
	size_t tail_len, bytes;
};
struct reply_mark reply_mark(struct client *c);
void reply_truncate(struct client *c, struct reply_mark m);
void reply_free(struct client *c);

/* ---- the dispatcher (dispatch.c) ----------------------------------------------------- */

/** dispatch_command() - run the command in c->argc/c->argv (server.h, "How a command
 * runs"); its reply is appended to c's reply. */
void dispatch_command(struct client *c);
/**
 * group_add() - if the command in c->argc/c->argv may share a transaction with the
 * client's next pipelined commands (an ordinary keyed or keyless command, the client
 * authenticated and not in MULTI, room left in @g), add it to @g and return 1; else
 * return 0 and leave @g as it is. Its reply comes when @g runs.
 */
int group_add(struct client *c, struct group *g);
/**
 * group_run() - run the commands of @g (from one client, in order) as ONE transaction:
 * the stripes of all their keys taken at once, one batch commit, then their replies in
 * order. If the commit fails (e.g. the group is past the batch limits) nothing was
 * applied and each command runs again alone. Empties @g.
 */
void group_run(struct client *c, struct group *g);
/** command_keys() - add the stripes of @cmd's keys in @argv to @ls.
 * Return: the number of keys. */
int command_keys(const struct command *cmd, int argc, const struct arg *argv,
		 struct lockset *ls);
/**
 * run_commands() - run @cmds[0..@n) of @c in order as ONE transaction: the stripes of
 * all their keys (or the keyspace lock exclusive, if one of them needs it) held from
 * the first read to after the one batch commit. The run stops at the transaction's
 * first error. After the commit the stripes of the keys the write commands named get a
 * new version (WATCH). With @check_watch, the client's watched stripes are locked too
 * and, if one changed since WATCH, nothing runs.
 * Return: 0; 1 (a watched key changed: nothing ran); or the failure's code: then
 * nothing was applied and the replies the commands added are taken back (the caller
 * replies or retries).
 */
int run_commands(struct client *c, const struct queued_cmd *cmds, size_t n,
		 int check_watch);
/** unwatch() - forget the client's watched keys. */
void unwatch(struct client *c);
/** reply_store_error() - the reply for a negative code from the keyspace. */
void reply_store_error(struct client *c, int rc);
#endif /* TIPS_SERVER_NET_H */
