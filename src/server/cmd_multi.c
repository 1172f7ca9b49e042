/*
 * cmd_multi.c - MULTI, EXEC, DISCARD.
 *
 * MULTI queues the following commands (dispatch.c copies their arguments). EXEC takes
 * the locks of every key of every queued command at once (in the one fixed order, so it
 * cannot deadlock), runs them in one transaction, and commits all their writes as ONE
 * batch: after a crash either every write of the EXEC is there or none is. A command
 * that fails with an error reply (WRONGTYPE, ...) does not stop the others, as in Redis;
 * a failure of the store (pool full, batch too large) abandons the whole EXEC and is
 * its only reply.
 *
 * WATCH records the version of each watched key's lock stripe (locks.h); EXEC locks
 * those stripes with its own and, if a version moved (a write to a key of that stripe
 * committed, or a FLUSHDB), runs nothing and answers a null array, as Redis does. Two
 * keys can share a stripe, so a write to another key can abort an EXEC too (safe: the
 * client retries); expiry alone does not count as a change.
 */
#include "server.h"
#include "net.h"

#include <stdatomic.h>
#include <stdlib.h>

static void discard_queue(struct client *c)
{
	unwatch(c);
	for (size_t i = 0; i < c->mcount; i++)
		free((void *)c->mstate[i].argv);
	c->mcount = 0;
	c->flags &= ~(CLIENT_MULTI | CLIENT_DIRTY_EXEC);
}

static void multi_cmd(struct client *c)
{
	if (c->flags & CLIENT_MULTI) {
		add_reply_error(c, "ERR MULTI calls can not be nested");
		return;
	}
	c->flags |= CLIENT_MULTI;
	add_reply_ok(c);
}

void multi_abort(struct client *c, const char *why)
{
	discard_queue(c);
	add_reply_errorf(c, "EXECABORT Transaction discarded because of: %s", why);
}

static void discard_cmd(struct client *c)
{
	if (!(c->flags & CLIENT_MULTI)) {
		add_reply_error(c, "ERR DISCARD without MULTI");
		return;
	}
	discard_queue(c);
	add_reply_ok(c);
}

static void exec_cmd(struct client *c)
{
	if (!(c->flags & CLIENT_MULTI)) {
		add_reply_error(c, "ERR EXEC without MULTI");
		return;
	}
	if (c->flags & CLIENT_DIRTY_EXEC) {
		discard_queue(c);
		add_reply_error(c, "EXECABORT Transaction discarded because of previous errors.");
		return;
	}
	struct reply_mark mark = reply_mark(c);
	add_reply_array(c, (long long)c->mcount);
	int rc = run_commands(c, c->mstate, c->mcount, 1);
	discard_queue(c);
	if (rc) {
		reply_truncate(c, mark); /* the array's header too */
		if (rc == 1)
			add_reply_null_array(c); /* a watched key changed */
		else
			reply_store_error(c, rc);
	}
}

static void watch_cmd(struct client *c)
{
	if (c->flags & CLIENT_MULTI) {
		add_reply_error(c, "ERR WATCH inside MULTI is not allowed");
		return;
	}
	struct locks *locks = ks_db_locks(c->srv->db);
	if (!c->nwatched)
		c->watch_flushes = atomic_load(&locks->flushes);
	for (int i = 1; i < c->argc; i++) {
		if (c->nwatched == c->wcap) {
			size_t cap = c->wcap ? 2 * c->wcap : 8;
			struct watched_stripe *w = realloc(c->watched, cap * sizeof(*w));
			if (!w) {
				add_reply_error(c, "ERR out of memory");
				return;
			}
			c->watched = w;
			c->wcap = cap;
		}
		unsigned s = lock_stripe(c->argv[i].ptr, c->argv[i].len);
		c->watched[c->nwatched].stripe = s;
		c->watched[c->nwatched++].version = atomic_load(&locks->version[s]);
	}
	add_reply_ok(c);
}

static void unwatch_cmd(struct client *c)
{
	unwatch(c);
	add_reply_ok(c);
}

#define F (CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NO_TXN)
const struct command multi_commands[] = {
	{"multi", multi_cmd, 1, F | CMD_FAST, 0, 0, 0, NULL,
	 "Starts a transaction.", "transactions", NULL},
	{"exec", exec_cmd, 1, F, 0, 0, 0, NULL,
	 "Executes all commands in a transaction, committed as one batch.", "transactions", NULL},
	{"watch", watch_cmd, -2, F | CMD_FAST, 1, -1, 1, NULL,
	 "Monitors changes to keys to determine the execution of a transaction.",
	 "transactions", "key [key ...]"},
	{"unwatch", unwatch_cmd, 1, F | CMD_FAST, 0, 0, 0, NULL,
	 "Forgets about watched keys of a transaction.", "transactions", NULL},
	{"discard", discard_cmd, 1, F | CMD_FAST, 0, 0, 0, NULL,
	 "Discards a transaction.", "transactions", NULL},
};
const size_t multi_commands_count = sizeof(multi_commands) / sizeof(multi_commands[0]);
