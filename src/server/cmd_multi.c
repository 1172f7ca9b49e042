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
 */
#include "server.h"
#include "net.h"

#include <stdlib.h>

static void discard_queue(struct client *c)
{
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
	int rc = run_commands(c, c->mstate, c->mcount);
	discard_queue(c);
	if (rc) {
		reply_truncate(c, mark); /* the array's header too */
		reply_store_error(c, rc);
	}
}

#define F (CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NO_TXN)
const struct command multi_commands[] = {
	{"multi", multi_cmd, 1, F | CMD_FAST, 0, 0, 0, NULL,
	 "Starts a transaction.", "transactions", NULL},
	{"exec", exec_cmd, 1, F, 0, 0, 0, NULL,
	 "Executes all commands in a transaction, committed as one batch.", "transactions", NULL},
	{"discard", discard_cmd, 1, F | CMD_FAST, 0, 0, 0, NULL,
	 "Discards a transaction.", "transactions", NULL},
};
const size_t multi_commands_count = sizeof(multi_commands) / sizeof(multi_commands[0]);
