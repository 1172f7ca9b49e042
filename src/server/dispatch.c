/*
 * dispatch.c - how one command runs (server.h, "How a command runs"): lookup, arity,
 * authentication, MULTI queueing, key locks, the transaction and its commit, and the
 * error reply when the keyspace fails; plus the argument helpers handlers share.
 *
 * Invariant: a handler runs with the stripes of all its keys held and c->txn begun; the
 * transaction is committed (or abandoned) and the locks released before the next
 * command of any client on this thread runs, and before any reply byte is written.
 */
#include "server.h"
#include "net.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t server_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int command_keys(const struct command *cmd, int argc, const struct arg *argv,
		 struct lockset *ls)
{
	if (cmd->getkeys) {
		int small[16], *pos = small, max = 16;
		int n = cmd->getkeys(argc, argv, pos, max);
		if (n > max) {
			pos = malloc((size_t)n * sizeof(*pos));
			if (!pos)
				return -1;
			max = n;
			n = cmd->getkeys(argc, argv, pos, max);
		}
		for (int i = 0; i < n && i < max; i++)
			if (pos[i] > 0 && pos[i] < argc)
				lockset_add(ls, argv[pos[i]].ptr, argv[pos[i]].len);
		if (pos != small)
			free(pos);
		return n;
	}
	if (cmd->first_key <= 0 || cmd->first_key >= argc)
		return 0;
	int last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
	if (last >= argc)
		last = argc - 1;
	int step = cmd->step > 0 ? cmd->step : 1, n = 0;
	for (int i = cmd->first_key; i <= last; i += step, n++)
		lockset_add(ls, argv[i].ptr, argv[i].len);
	return n;
}

void reply_store_error(struct client *c, int rc)
{
	struct store_info si;
	size_t ops, bytes;
	switch (rc) {
	case KS_EUNORDERED:
		store_info(ks_db_store(c->srv->db), &si);
		add_reply_errorf(c, "ERR this command needs an ordered index (tips-art, "
			"tips-bptree, tips-bst, tips-lfbst, listdb); this server runs %s", si.index);
		break;
	case TIPS_ETOOBIG:
		ks_db_max_txn(c->srv->db, &ops, &bytes);
		add_reply_errorf(c, "ERR request too large for one atomic write of this server "
			"(keys up to %u bytes, members up to %u, values up to %u; at most %zu index "
			"writes and %zu bytes per command); nothing was written",
			KS_MAX_USER_KEY, KS_MAX_SUFFIX, KS_MAX_MEMBER_VALUE, ops, bytes);
		break;
	case TIPS_ENOSPC:
	case TIPS_ENOMEM:
		add_reply_errorf(c, "OOM command not allowed: the pool is full (%s); delete keys "
			"or grow the pool (tips pool grow)", tips_strerror(rc));
		break;
	default:
		add_reply_errorf(c, "ERR storage error: %s", tips_strerror(rc));
		break;
	}
}

void unwatch(struct client *c)
{
	c->nwatched = 0;
}

/* 1 if a watched stripe changed since WATCH (call with them held). */
static int watch_changed(struct client *c, struct locks *locks)
{
	if (c->nwatched && atomic_load(&locks->flushes) != c->watch_flushes)
		return 1;
	for (size_t i = 0; i < c->nwatched; i++)
		if (atomic_load(&locks->version[c->watched[i].stripe]) != c->watched[i].version)
			return 1;
	return 0;
}

int run_commands(struct client *c, const struct queued_cmd *cmds, size_t n,
		 int check_watch)
{
	struct lockset ls, written;
	lockset_clear(&ls);
	lockset_clear(&written);
	int excl = 0;
	for (size_t i = 0; i < n; i++)
		excl |= (cmds[i].cmd->flags & CMD_KEYSPACE_EXCLUSIVE) != 0;
	if (!excl) {
		for (size_t i = 0; i < n; i++)
			command_keys(cmds[i].cmd, cmds[i].argc, cmds[i].argv, &ls);
		if (check_watch)
			for (size_t i = 0; i < c->nwatched; i++)
				lockset_add_stripe(&ls, c->watched[i].stripe);
	}
	for (size_t i = 0; i < n; i++)
		if (cmds[i].cmd->flags & CMD_WRITE)
			command_keys(cmds[i].cmd, cmds[i].argc, cmds[i].argv, &written);
	struct locks *locks = ks_db_locks(c->srv->db);
	locks_acquire(locks, &ls, excl);
	if (check_watch && watch_changed(c, locks)) {
		locks_release(locks, &ls);
		return 1;
	}
	struct reply_mark mark = reply_mark(c);
	c->txn = c->loop->txn;
	ks_txn_begin(c->txn, server_now_ms());
	int argc = c->argc;
	const struct arg *argv = c->argv;
	const struct command *cmd = c->cmd;
	for (size_t i = 0; i < n && !ks_txn_error(c->txn); i++) {
		c->argc = cmds[i].argc;
		c->argv = cmds[i].argv;
		c->cmd = cmds[i].cmd;
		c->cmd->proc(c);
	}
	c->argc = argc;
	c->argv = argv;
	c->cmd = cmd;
	int wrote = ks_txn_writes(c->txn) != 0;
	int rc = ks_txn_error(c->txn);
	if (rc)
		ks_txn_abort(c->txn);
	else
		rc = ks_txn_commit(c->txn);
	if (!rc && wrote)
		locks_bump(locks, &written);
	locks_release(locks, &ls);
	c->txn = NULL;
	if (rc)
		reply_truncate(c, mark);
	return rc;
}

/* 1 if @cmd may create keys (denyoom) and one of its keys is longer than a key can be
 * here (reads and deletes of such a key just find nothing). */
static int key_too_long(const struct command *cmd, int argc, const struct arg *argv)
{
	if (!(cmd->flags & CMD_DENYOOM) || cmd->getkeys || cmd->first_key <= 0)
		return 0;
	int last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
	int step = cmd->step > 0 ? cmd->step : 1;
	for (int i = cmd->first_key; i <= last && i < argc; i += step)
		if (argv[i].len > KS_MAX_USER_KEY)
			return 1;
	return 0;
}

/* Runs @cmd (in c->argc/c->argv) in a transaction of its own, its keys locked. */
static void call(struct client *c, const struct command *cmd)
{
	c->cmd = cmd;
	if (cmd->flags & CMD_NO_TXN) {
		cmd->proc(c);
		return;
	}
	if (key_too_long(cmd, c->argc, c->argv)) {
		add_reply_errorf(c, "ERR key too long for tips-server (at most %u bytes)",
				 KS_MAX_USER_KEY);
		return;
	}
	struct queued_cmd one = {cmd, c->argc, c->argv};
	int rc = run_commands(c, &one, 1, 0);
	if (rc)
		reply_store_error(c, rc);
}

static void queue_command(struct client *c, const struct command *cmd)
{
	if (c->mcount == c->mcap) {
		size_t cap = c->mcap ? 2 * c->mcap : 8;
		struct queued_cmd *m = realloc(c->mstate, cap * sizeof(*m));
		if (!m) {
			c->flags |= CLIENT_CLOSE_ASAP;
			return;
		}
		c->mstate = m;
		c->mcap = cap;
	}
	size_t bytes = (size_t)c->argc * sizeof(struct arg);
	for (int i = 0; i < c->argc; i++)
		bytes += c->argv[i].len;
	struct arg *argv = malloc(bytes ? bytes : 1); /* the array, then the bytes */
	if (!argv) {
		c->flags |= CLIENT_CLOSE_ASAP;
		return;
	}
	char *p = (char *)(argv + c->argc);
	for (int i = 0; i < c->argc; i++) {
		memcpy(p, c->argv[i].ptr, c->argv[i].len);
		argv[i].ptr = p;
		argv[i].len = c->argv[i].len;
		p += c->argv[i].len;
	}
	struct queued_cmd *q = &c->mstate[c->mcount++];
	q->cmd = cmd;
	q->argc = c->argc;
	q->argv = argv;
	add_reply_simple(c, "QUEUED");
}

/* A command refused before it ran: inside MULTI it also dooms the EXEC. */
static void reject(struct client *c, const char *msg)
{
	if (c->flags & CLIENT_MULTI)
		c->flags |= CLIENT_DIRTY_EXEC;
	add_reply_error(c, msg);
}

void dispatch_command(struct client *c)
{
	struct server *srv = c->srv;
	atomic_fetch_add(&srv->total_commands, 1);
	const struct command *cmd = command_lookup(c->argv[0].ptr, c->argv[0].len);
	char msg[512];
	if (!cmd) {
		char args[160] = "";
		size_t n = 0;
		for (int i = 1; i < c->argc && n < 128; i++) {
			int room = 128 - (int)n;
			int len = c->argv[i].len < (size_t)room ? (int)c->argv[i].len : room;
			n += (size_t)snprintf(args + n, sizeof(args) - n, "'%.*s' ", len,
					      c->argv[i].ptr);
		}
		int len = c->argv[0].len < 128 ? (int)c->argv[0].len : 128;
		snprintf(msg, sizeof(msg), "ERR unknown command '%.*s', with args beginning "
			 "with: %s", len, c->argv[0].ptr, args);
		reject(c, msg);
		return;
	}
	if ((cmd->arity > 0 && c->argc != cmd->arity) || c->argc < -cmd->arity) {
		snprintf(msg, sizeof(msg), "wrong number of arguments for '%s' command", cmd->name);
		if (!strcmp(cmd->name, "exec")) {
			multi_abort(c, msg); /* a rejected EXEC ends any transaction, as Redis */
			return;
		}
		char err[sizeof(msg) + 4];
		snprintf(err, sizeof(err), "ERR %s", msg);
		reject(c, err);
		return;
	}
	if (!c->authenticated && !(cmd->flags & CMD_NO_AUTH)) {
		reject(c, "NOAUTH Authentication required.");
		return;
	}
	if ((c->flags & CLIENT_MULTI) && strcmp(cmd->name, "exec") &&
	    strcmp(cmd->name, "discard") && strcmp(cmd->name, "multi") &&
	    strcmp(cmd->name, "watch") && strcmp(cmd->name, "quit")) {
		if (cmd->flags & CMD_NO_MULTI) {
			snprintf(msg, sizeof(msg), "ERR Command not allowed inside a transaction");
			reject(c, msg);
			return;
		}
		queue_command(c, cmd);
		return;
	}
	call(c, cmd);
}

/* ---- group commit ------------------------------------------------------------------- */

int group_add(struct client *c, struct group *g)
{
	if (!c->authenticated || (c->flags & CLIENT_MULTI) || g->n == GROUP_MAX)
		return 0;
	/* multibulk arguments point into the query buffer, which stays put until the
	 * group runs; inline ones are in the parser's scratch, reused by the next parse,
	 * so they are copied */
	size_t copy = 0;
	if (c->argv[0].ptr < c->qbuf || c->argv[0].ptr >= c->qbuf + c->qlen) {
		for (int i = 0; i < c->argc; i++)
			copy += c->argv[i].len;
		if (!g->inline_bytes && !(g->inline_bytes = malloc(GROUP_INLINE_BYTES)))
			return 0;
		if (copy > GROUP_INLINE_BYTES - g->inline_used)
			return 0;
	}
	const struct command *cmd = command_lookup(c->argv[0].ptr, c->argv[0].len);
	if (!cmd || (cmd->flags & (CMD_NO_TXN | CMD_KEYSPACE_EXCLUSIVE)) ||
	    (cmd->arity > 0 && c->argc != cmd->arity) || c->argc < -cmd->arity ||
	    key_too_long(cmd, c->argc, c->argv))
		return 0;
	if (g->nargs + (size_t)c->argc > g->cap) {
		size_t cap = g->cap ? g->cap : 1024;
		while (cap < g->nargs + (size_t)c->argc)
			cap *= 2;
		struct arg *a = realloc(g->args, cap * sizeof(*a));
		if (!a)
			return 0;
		g->args = a;
		g->cap = cap;
	}
	struct group_item *it = &g->items[g->n++];
	it->cmd = cmd;
	it->argc = c->argc;
	it->first = g->nargs;
	memcpy(g->args + g->nargs, c->argv, (size_t)c->argc * sizeof(*c->argv));
	if (copy) {
		for (int i = 0; i < c->argc; i++) {
			struct arg *a = &g->args[g->nargs + (size_t)i];
			char *to = g->inline_bytes + g->inline_used;
			if (a->len)
				memcpy(to, a->ptr, a->len);
			a->ptr = to;
			g->inline_used += a->len;
		}
	}
	g->nargs += (size_t)c->argc;
	return 1;
}

void group_run(struct client *c, struct group *g)
{
	size_t n = g->n;
	g->n = 0;
	g->nargs = 0;
	g->inline_used = 0;
	if (!n)
		return;
	atomic_fetch_add(&c->srv->total_commands, n);
	struct queued_cmd cmds[GROUP_MAX];
	for (size_t i = 0; i < n; i++) {
		cmds[i].cmd = g->items[i].cmd;
		cmds[i].argc = g->items[i].argc;
		cmds[i].argv = g->args + g->items[i].first;
	}
	if (run_commands(c, cmds, n, 0) == 0)
		return;
	/* nothing was applied: run them one by one, each with its own outcome */
	int argc = c->argc;
	const struct arg *argv = c->argv;
	for (size_t i = 0; i < n; i++) {
		c->argc = cmds[i].argc;
		c->argv = cmds[i].argv;
		call(c, cmds[i].cmd);
	}
	c->argc = argc;
	c->argv = argv;
}

/* ---- argument helpers --------------------------------------------------------------- */

int arg_is(const struct arg *a, const char *word)
{
	size_t n = strlen(word);
	if (a->len != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (tolower((unsigned char)a->ptr[i]) != word[i])
			return 0;
	return 1;
}

int arg_to_ll(const struct arg *a, long long *out)
{
	return resp_parse_ll(a->ptr, a->len, out);
}

int arg_to_double(const struct arg *a, double *out)
{
	char buf[128];
	if (a->len == 0 || a->len >= sizeof(buf))
		return -1;
	memcpy(buf, a->ptr, a->len);
	buf[a->len] = 0;
	if (isspace((unsigned char)buf[0]))
		return -1;
	char *end;
	errno = 0;
	double d = strtod(buf, &end);
	if (end != buf + a->len || isnan(d) || (errno == ERANGE && (isinf(d) || d == 0)))
		return -1;
	*out = d;
	return 0;
}

int get_ll_or_reply(struct client *c, const struct arg *a, long long *out)
{
	if (arg_to_ll(a, out) == 0)
		return 0;
	add_reply_error(c, ERR_NOT_INTEGER);
	return -1;
}

int get_double_or_reply(struct client *c, const struct arg *a, double *out)
{
	if (arg_to_double(a, out) == 0)
		return 0;
	add_reply_error(c, ERR_NOT_FLOAT);
	return -1;
}

int lookup_typed(struct client *c, const struct arg *key, int type, struct ks_meta *m)
{
	int rc = ks_lookup(c->txn, key->ptr, key->len, m);
	if (rc < 0)
		return -1;
	if (rc == 1 && m->type != type) {
		add_reply_error(c, ERR_WRONGTYPE);
		return -1;
	}
	return rc;
}

int need_ordered(struct client *c)
{
	if (ks_db_ordered(c->srv->db))
		return 1;
	reply_store_error(c, KS_EUNORDERED);
	return 0;
}
