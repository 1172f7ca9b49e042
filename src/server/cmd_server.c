/*
 * cmd_server.c - connection and server commands: PING, ECHO, QUIT, AUTH, SELECT, HELLO,
 * CLIENT, COMMAND, CONFIG, INFO, DBSIZE, FLUSHDB, FLUSHALL, SAVE, BGSAVE, LASTSAVE,
 * SHUTDOWN, TIME.
 *
 * Every write is durable before its reply, so SAVE and BGSAVE have nothing left to do
 * and say so the way Redis does; SHUTDOWN closes the store cleanly (tips_close) from
 * the main thread, so the next start replays nothing.
 */
#include "server.h"

#include <ctype.h>
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void ping_cmd(struct client *c)
{
	if (c->argc > 2) {
		add_reply_error(c, "ERR wrong number of arguments for 'ping' command");
		return;
	}
	if (c->argc == 2)
		add_reply_bulk(c, c->argv[1].ptr, c->argv[1].len);
	else
		add_reply_simple(c, "PONG");
}

static void echo_cmd(struct client *c)
{
	add_reply_bulk(c, c->argv[1].ptr, c->argv[1].len);
}

static void quit_cmd(struct client *c)
{
	add_reply_ok(c);
	c->flags |= CLIENT_CLOSE_AFTER_REPLY;
}

/* Checks @user/@pass against requirepass. Return: 1 ok, 0 refused (reply added). */
static int check_auth(struct client *c, const struct arg *user, const struct arg *pass)
{
	struct server_config *cfg = &c->srv->cfg;
	pthread_mutex_lock(&cfg->lock);
	int ok = (!user || arg_is(user, "default")) && pass->len == strlen(cfg->requirepass) &&
		 !memcmp(pass->ptr, cfg->requirepass, pass->len) && cfg->requirepass[0];
	int none = cfg->requirepass[0] == 0;
	pthread_mutex_unlock(&cfg->lock);
	if (none && !user) {
		add_reply_error(c, "ERR AUTH <password> called without any password configured "
			"for the default user. Are you sure your configuration is correct?");
		return 0;
	}
	if (none && arg_is(user, "default"))
		ok = 1; /* the default user without a password accepts any */
	if (!ok) {
		add_reply_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
		return 0;
	}
	c->authenticated = 1;
	return 1;
}

static void auth_cmd(struct client *c)
{
	if (c->argc > 3) {
		add_reply_error(c, ERR_SYNTAX);
		return;
	}
	if (check_auth(c, c->argc == 3 ? &c->argv[1] : NULL, &c->argv[c->argc - 1]))
		add_reply_ok(c);
}

static void select_cmd(struct client *c)
{
	long long db;
	if (get_ll_or_reply(c, &c->argv[1], &db))
		return;
	if (db != 0)
		add_reply_error(c, "ERR DB index is out of range");
	else
		add_reply_ok(c);
}

static int valid_client_name(const struct arg *a)
{
	for (size_t i = 0; i < a->len; i++)
		if (a->ptr[i] < '!' || a->ptr[i] > '~')
			return 0;
	return 1;
}

static int set_name(struct client *c, const struct arg *a)
{
	if (!valid_client_name(a)) {
		add_reply_error(c, "ERR Client names cannot contain spaces, newlines or special "
			"characters.");
		return -1;
	}
	free(c->name);
	c->name = NULL;
	if (a->len) {
		c->name = malloc(a->len + 1);
		if (c->name) {
			memcpy(c->name, a->ptr, a->len);
			c->name[a->len] = 0;
		}
	}
	return 0;
}

static void hello_cmd(struct client *c)
{
	int i = 1;
	if (c->argc >= 2) {
		long long ver;
		if (arg_to_ll(&c->argv[1], &ver)) {
			add_reply_error(c, "ERR Protocol version is not an integer or out of range");
			return;
		}
		if (ver != 2) {
			add_reply_error(c, "NOPROTO unsupported protocol version");
			return;
		}
		i = 2;
	}
	for (; i < c->argc; i++) {
		int more = c->argc - i - 1;
		if (arg_is(&c->argv[i], "auth") && more >= 2) {
			if (!check_auth(c, &c->argv[i + 1], &c->argv[i + 2]))
				return;
			i += 2;
		} else if (arg_is(&c->argv[i], "setname") && more >= 1) {
			if (set_name(c, &c->argv[i + 1]))
				return;
			i++;
		} else {
			add_reply_errorf(c, "ERR Syntax error in HELLO option '%.*s'",
					 (int)(c->argv[i].len > 128 ? 128 : c->argv[i].len),
					 c->argv[i].ptr);
			return;
		}
	}
	if (!c->authenticated) {
		add_reply_error(c, "NOAUTH HELLO must be called with the client already "
			"authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be "
			"used to authenticate the client and select the RESP protocol version at the "
			"same time");
		return;
	}
	add_reply_array(c, 14);
	add_reply_bulk_cstr(c, "server");
	add_reply_bulk_cstr(c, "redis");
	add_reply_bulk_cstr(c, "version");
	add_reply_bulk_cstr(c, TIPS_SERVER_REDIS_VERSION);
	add_reply_bulk_cstr(c, "proto");
	add_reply_int(c, 2);
	add_reply_bulk_cstr(c, "id");
	add_reply_int(c, (long long)c->id);
	add_reply_bulk_cstr(c, "mode");
	add_reply_bulk_cstr(c, "standalone");
	add_reply_bulk_cstr(c, "role");
	add_reply_bulk_cstr(c, "master");
	add_reply_bulk_cstr(c, "modules");
	add_reply_array(c, 0);
}

static void client_cmd(struct client *c)
{
	const struct arg *sub = &c->argv[1];
	if (arg_is(sub, "id") && c->argc == 2) {
		add_reply_int(c, (long long)c->id);
	} else if (arg_is(sub, "setname") && c->argc == 3) {
		if (!set_name(c, &c->argv[2]))
			add_reply_ok(c);
	} else if (arg_is(sub, "getname") && c->argc == 2) {
		if (c->name)
			add_reply_bulk_cstr(c, c->name);
		else
			add_reply_nil(c);
	} else if (arg_is(sub, "setinfo") && c->argc == 4) {
		add_reply_ok(c);
	} else if (arg_is(sub, "info") && c->argc == 2) {
		char buf[512];
		snprintf(buf, sizeof(buf), "id=%llu addr=%s name=%s age=%lld db=0 multi=%d\n",
			 (unsigned long long)c->id, c->addr, c->name ? c->name : "",
			 (long long)((server_now_ms() - c->ctime_ms) / 1000),
			 (c->flags & CLIENT_MULTI) ? (int)c->mcount : -1);
		add_reply_bulk_cstr(c, buf);
	} else if (arg_is(sub, "id") || arg_is(sub, "setname") || arg_is(sub, "getname") ||
		   arg_is(sub, "info") || arg_is(sub, "setinfo")) {
		char name[16]; /* the subcommand in lower case, as Redis names it */
		size_t n = sub->len < sizeof(name) - 1 ? sub->len : sizeof(name) - 1;
		for (size_t i = 0; i < n; i++)
			name[i] = (char)tolower((unsigned char)sub->ptr[i]);
		name[n] = 0;
		add_reply_errorf(c, "ERR wrong number of arguments for 'client|%s' command", name);
	} else {
		add_reply_errorf(c, "ERR unknown subcommand '%.*s'. Try CLIENT HELP.",
				 (int)(sub->len > 128 ? 128 : sub->len), sub->ptr);
	}
}

static void command_cmd(struct client *c)
{
	size_t n = command_count();
	if (c->argc == 1) {
		add_reply_array(c, (long long)n);
		for (size_t i = 0; i < n; i++)
			add_reply_command_info(c, command_at(i));
		return;
	}
	const struct arg *sub = &c->argv[1];
	if (arg_is(sub, "count") && c->argc == 2) {
		add_reply_int(c, (long long)n);
	} else if (arg_is(sub, "info")) {
		if (c->argc == 2) {
			add_reply_array(c, (long long)n);
			for (size_t i = 0; i < n; i++)
				add_reply_command_info(c, command_at(i));
			return;
		}
		add_reply_array(c, c->argc - 2);
		for (int i = 2; i < c->argc; i++) {
			const struct command *cmd = command_lookup(c->argv[i].ptr, c->argv[i].len);
			if (cmd)
				add_reply_command_info(c, cmd);
			else
				add_reply_null_array(c);
		}
	} else if (arg_is(sub, "docs")) {
		if (c->argc == 2) {
			add_reply_array(c, 2 * (long long)n);
			for (size_t i = 0; i < n; i++)
				add_reply_command_docs(c, command_at(i));
			return;
		}
		void *len = add_reply_deferred(c);
		long long found = 0;
		for (int i = 2; i < c->argc; i++) {
			const struct command *cmd = command_lookup(c->argv[i].ptr, c->argv[i].len);
			if (cmd) {
				add_reply_command_docs(c, cmd);
				found += 2;
			}
		}
		set_deferred_array(c, len, found);
	} else if (arg_is(sub, "list") && c->argc == 2) {
		add_reply_array(c, (long long)n);
		for (size_t i = 0; i < n; i++)
			add_reply_bulk_cstr(c, command_at(i)->name);
	} else {
		add_reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for "
				 "'%.*s'. Try COMMAND HELP.", (int)(sub->len > 128 ? 128 : sub->len),
				 sub->ptr);
	}
}

struct config_reply {
	struct client *c;
	long long n;
};

static void config_get_one(const char *name, const char *value, void *arg)
{
	struct config_reply *r = arg;
	add_reply_bulk_cstr(r->c, name);
	add_reply_bulk_cstr(r->c, value);
	r->n += 2;
}

static void config_cmd(struct client *c)
{
	struct server_config *cfg = &c->srv->cfg;
	const struct arg *sub = &c->argv[1];
	if (arg_is(sub, "get") && c->argc >= 3) {
		void *len = add_reply_deferred(c);
		struct config_reply r = {c, 0};
		for (int i = 2; i < c->argc; i++)
			config_get(cfg, c->argv[i].ptr, c->argv[i].len, config_get_one, &r);
		set_deferred_array(c, len, r.n);
	} else if (arg_is(sub, "set") && c->argc >= 4 && c->argc % 2 == 0) {
		for (int i = 2; i < c->argc; i += 2) {
			char name[128], value[4096], err[512];
			if (c->argv[i].len >= sizeof(name) || c->argv[i + 1].len >= sizeof(value)) {
				add_reply_errorf(c, "ERR CONFIG SET failed (possibly related to "
						 "argument '%.*s') - value too long", 64, c->argv[i].ptr);
				return;
			}
			memcpy(name, c->argv[i].ptr, c->argv[i].len);
			name[c->argv[i].len] = 0;
			memcpy(value, c->argv[i + 1].ptr, c->argv[i + 1].len);
			value[c->argv[i + 1].len] = 0;
			if (config_set(cfg, name, value, 1, err, sizeof(err))) {
				add_reply_errorf(c, "ERR %s", err);
				return;
			}
		}
		add_reply_ok(c);
	} else if (arg_is(sub, "resetstat") && c->argc == 2) {
		add_reply_ok(c);
	} else if (arg_is(sub, "get") || arg_is(sub, "set") || arg_is(sub, "resetstat")) {
		add_reply_errorf(c, "ERR wrong number of arguments for 'config|%.*s' command",
				 (int)sub->len, sub->ptr);
	} else {
		add_reply_errorf(c, "ERR unknown subcommand '%.*s'. Try CONFIG HELP.",
				 (int)(sub->len > 128 ? 128 : sub->len), sub->ptr);
	}
}

/* ---- INFO --------------------------------------------------------------------------- */

struct text {
	char *buf;
	size_t len, cap;
};

static void tprintf(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void tprintf(struct text *t, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0,
				  fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (t->buf && t->len + (size_t)n < t->cap) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap ? t->cap * 2 : 4096;
		while (cap < t->len + (size_t)n + 1)
			cap *= 2;
		char *b = realloc(t->buf, cap);
		if (!b)
			return;
		t->buf = b;
		t->cap = cap;
	}
}

static long long rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long long pages = 0, rss = 0;
	if (f) {
		if (fscanf(f, "%lld %lld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * sysconf(_SC_PAGESIZE);
}

static int want(int argc, const struct arg *argv, const char *section, int in_default)
{
	if (argc == 1)
		return in_default;
	for (int i = 1; i < argc; i++)
		if (arg_is(&argv[i], section) || arg_is(&argv[i], "all") ||
		    arg_is(&argv[i], "everything") || (in_default && arg_is(&argv[i], "default")))
			return 1;
	return 0;
}

static void info_cmd(struct client *c)
{
	struct server *srv = c->srv;
	struct text t = {0};
	struct ks_stats ks;
	ks_db_stats(srv->db, &ks);
	struct store_info si;
	store_info(ks_db_store(srv->db), &si);
	int64_t now = server_now_ms();
	if (want(c->argc, c->argv, "server", 1)) {
		struct utsname u;
		uname(&u);
		tprintf(&t, "# Server\r\nredis_version:%s\r\ntips_server_version:%s\r\n"
			"redis_mode:standalone\r\nos:%s %s %s\r\narch_bits:%d\r\n"
			"multiplexing_api:epoll\r\nevent_loop_threads:%u\r\nprocess_id:%d\r\n"
			"run_id:%s\r\ntcp_port:%d\r\nserver_time_usec:%lld\r\n"
			"uptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\nhz:%u\r\n"
			"config_file:%s\r\n\r\n",
			TIPS_SERVER_REDIS_VERSION, TIPS_SERVER_VERSION, u.sysname, u.release,
			u.machine, (int)(8 * sizeof(void *)), srv->nloops, (int)getpid(), srv->run_id,
			srv->cfg.port, (long long)now * 1000, (long long)(now - srv->start_ms) / 1000,
			(long long)(now - srv->start_ms) / 86400000, srv->cfg.hz, srv->cfg.config_file);
	}
	if (want(c->argc, c->argv, "clients", 1))
		tprintf(&t, "# Clients\r\nconnected_clients:%llu\r\nmaxclients:%u\r\n"
			"blocked_clients:0\r\n\r\n",
			(unsigned long long)atomic_load(&srv->connected),
			__atomic_load_n(&srv->cfg.maxclients, __ATOMIC_RELAXED));
	if (want(c->argc, c->argv, "memory", 1)) {
		long long rss = rss_bytes();
		tprintf(&t, "# Memory\r\nused_memory:%lld\r\nused_memory_rss:%lld\r\n"
			"maxmemory:0\r\nmaxmemory_policy:noeviction\r\npool_size:%llu\r\n\r\n",
			rss, rss, (unsigned long long)si.pool_size);
	}
	if (want(c->argc, c->argv, "persistence", 1))
		tprintf(&t, "# Persistence\r\nloading:0\r\nasync_loading:0\r\n"
			"rdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\n"
			"rdb_last_save_time:%lld\r\nrdb_last_bgsave_status:ok\r\naof_enabled:0\r\n"
			"durable_before_reply:1\r\npool:%s\r\npool_media:%s\r\n"
			"pool_media_reason:%s\r\nindex:%s\r\nindex_ordered:%d\r\n"
			"recovered:%d\r\nrecovery_ms:%.3f\r\nstart_count_ms:%.3f\r\n\r\n",
			(long long)atomic_load(&srv->lastsave), srv->cfg.pool, si.media,
			si.media_reason, si.index, si.ordered, si.recovered, si.recovery_ms,
			ks.start_scan_ms);
	if (want(c->argc, c->argv, "stats", 1))
		tprintf(&t, "# Stats\r\ntotal_connections_received:%llu\r\n"
			"total_commands_processed:%llu\r\ntotal_net_input_bytes:%llu\r\n"
			"total_net_output_bytes:%llu\r\nrejected_connections:%llu\r\n"
			"expired_keys:%llu\r\ntotal_error_replies:%llu\r\n"
			"batches_committed:%llu\r\nbatch_index_writes:%llu\r\n"
			"swept_members:%llu\r\nswept_flushed_keys:%llu\r\n"
			"garbage_generations_pending:%llu\r\n\r\n",
			(unsigned long long)atomic_load(&srv->total_connections),
			(unsigned long long)atomic_load(&srv->total_commands),
			(unsigned long long)atomic_load(&srv->net_input),
			(unsigned long long)atomic_load(&srv->net_output),
			(unsigned long long)atomic_load(&srv->rejected_connections),
			(unsigned long long)ks.expired_keys,
			(unsigned long long)atomic_load(&srv->total_errors),
			(unsigned long long)ks.commits, (unsigned long long)ks.commit_ops,
			(unsigned long long)ks.swept_members, (unsigned long long)ks.swept_keys,
			(unsigned long long)ks.garbage_pending);
	if (want(c->argc, c->argv, "tips", 1)) {
		struct tips_stats ts;
		struct tips_listdb_stats ls;
		store_stats(ks_db_store(srv->db), &ts, &ls);
		struct tips_pm_counters pm;
		tips_pm_counters_total(&pm);
		tprintf(&t, "# Tips\r\nindex:%s\r\nfences:%llu\r\nlines_flushed:%llu\r\n"
			"bytes_persisted:%llu\r\nfences_per_commit:%.2f\r\n",
			si.index, (unsigned long long)pm.fences, (unsigned long long)pm.lines_flushed,
			(unsigned long long)pm.bytes_persisted,
			ks.commits ? (double)pm.fences / (double)ks.commits : 0.0);
		if (strcmp(si.index, "listdb"))
			tprintf(&t, "cache_hits:%llu\r\ncache_misses:%llu\r\ncache_entries:%llu\r\n"
				"olog_records:%llu\r\nolog_bytes:%llu\r\nfences_per_write:%.2f\r\n"
				"ulog_bytes:%llu\r\nulog_values:%llu\r\nreplayed:%llu\r\n"
				"replay_workers:%u\r\n"
				"replay_workers_avg:%.2f\r\nreclamations:%llu\r\n"
				"reclaim_graces:%llu\r\nwriter_waits:%llu\r\n"
				"writes_refused:%llu\r\nheap_room:%llu\r\n",
				(unsigned long long)ts.cache_hits, (unsigned long long)ts.cache_misses,
				(unsigned long long)ts.cache_entries, (unsigned long long)ts.writes,
				(unsigned long long)ts.olog_bytes,
				ts.writes ? (double)pm.fences / (double)ts.writes : 0.0,
				(unsigned long long)ts.ulog_bytes, (unsigned long long)ts.ulog_values,
				(unsigned long long)ts.replayed,
				ts.workers_now, ts.workers_avg, (unsigned long long)ts.reclamations,
				(unsigned long long)ts.reclaim_graces, (unsigned long long)ts.writer_waits,
				(unsigned long long)ts.writes_refused, (unsigned long long)ts.heap_room);
		else
			tprintf(&t, "puts:%llu\r\ndeletes:%llu\r\ngets:%llu\r\n"
				"memtables_flushed:%llu\r\ncompactions:%llu\r\ncache_hits:%llu\r\n"
				"cache_lookups:%llu\r\nchunks_reclaimed:%llu\r\n",
				(unsigned long long)ls.puts, (unsigned long long)ls.deletes,
				(unsigned long long)ls.gets, (unsigned long long)ls.memtables_flushed,
				(unsigned long long)ls.compactions, (unsigned long long)ls.cache_hits,
				(unsigned long long)ls.cache_lookups,
				(unsigned long long)ls.chunks_reclaimed);
		tprintf(&t, "\r\n");
	}
	if (want(c->argc, c->argv, "keyspace", 1)) {
		tprintf(&t, "# Keyspace\r\n");
		if (ks.keys)
			tprintf(&t, "db0:keys=%llu,expires=%llu,avg_ttl=0\r\n",
				(unsigned long long)ks.keys, (unsigned long long)ks.expires);
	}
	if (t.buf && t.len >= 2 && !strcmp(t.buf + t.len - 4, "\r\n\r\n"))
		t.len -= 2;
	add_reply_bulk(c, t.buf ? t.buf : "", t.len);
	free(t.buf);
}

/* ---- keyspace and lifecycle --------------------------------------------------------- */

static void dbsize_cmd(struct client *c)
{
	struct ks_stats ks;
	ks_db_stats(c->srv->db, &ks);
	/* a pipelined group's earlier writes are this client's, not yet committed */
	add_reply_int(c, (long long)ks.keys + (long long)ks_txn_pending_keys(c->txn));
}

static void flush_cmd(struct client *c)
{
	if (c->argc > 2 || (c->argc == 2 && !arg_is(&c->argv[1], "async") &&
			    !arg_is(&c->argv[1], "sync"))) {
		add_reply_error(c, ERR_SYNTAX);
		return;
	}
	if (ks_flush(c->txn) == 0) {
		atomic_fetch_add(&ks_db_locks(c->srv->db)->flushes, 1); /* WATCH sees it */
		add_reply_ok(c);
	}
}

static void save_cmd(struct client *c)
{
	atomic_store(&c->srv->lastsave, server_now_ms() / 1000);
	add_reply_ok(c);
}

static void bgsave_cmd(struct client *c)
{
	atomic_store(&c->srv->lastsave, server_now_ms() / 1000);
	add_reply_simple(c, "Background saving started");
}

static void lastsave_cmd(struct client *c)
{
	add_reply_int(c, (long long)atomic_load(&c->srv->lastsave));
}

static void shutdown_cmd(struct client *c)
{
	for (int i = 1; i < c->argc; i++) {
		if (arg_is(&c->argv[i], "abort")) {
			add_reply_error(c, "ERR No shutdown in progress.");
			return;
		}
		if (!arg_is(&c->argv[i], "nosave") && !arg_is(&c->argv[i], "save") &&
		    !arg_is(&c->argv[i], "now") && !arg_is(&c->argv[i], "force")) {
			add_reply_error(c, ERR_SYNTAX);
			return;
		}
	}
	server_log('#', "User requested shutdown...");
	c->flags |= CLIENT_CLOSE_AFTER_REPLY; /* as Redis: no reply, the connection closes */
	net_ask_shutdown(c->srv);
}

static void time_cmd(struct client *c)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	add_reply_array(c, 2);
	add_reply_bulk_ll(c, (long long)ts.tv_sec);
	add_reply_bulk_ll(c, ts.tv_nsec / 1000);
}

#define CONN (CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_FAST)
const struct command server_commands[] = {
	{"ping", ping_cmd, -1, CMD_FAST | CMD_STALE, 0, 0, 0, NULL,
	 "Returns the server's liveliness response.", "connection",
	 "[message]"},
	{"echo", echo_cmd, 2, CMD_FAST, 0, 0, 0, NULL, "Returns the given string.",
	 "connection",
	 "message"},
	{"quit", quit_cmd, -1, CONN | CMD_NO_AUTH | CMD_NO_TXN, 0, 0, 0, NULL,
	 "Closes the connection.", "connection", NULL},
	{"auth", auth_cmd, -2, CONN | CMD_NO_AUTH, 0, 0, 0, NULL,
	 "Authenticates the connection.", "connection",
	 "[username] password"},
	{"select", select_cmd, 2, CMD_LOADING | CMD_STALE | CMD_FAST, 0, 0, 0, NULL,
	 "Changes the selected database (only 0 exists).", "connection",
	 "index"},
	{"hello", hello_cmd, -1, CONN | CMD_NO_AUTH, 0, 0, 0, NULL,
	 "Handshakes with the server (RESP2 only).", "connection",
	 "[protover [AUTH username password] [SETNAME clientname]]"},
	{"client", client_cmd, -2, CMD_NOSCRIPT | CMD_LOADING | CMD_STALE, 0, 0, 0, NULL,
	 "CLIENT ID, SETNAME, GETNAME, INFO.", "connection",
	 "ID|SETNAME connection-name|GETNAME|INFO|SETINFO attr value"},
	{"command", command_cmd, -1, CMD_LOADING | CMD_STALE, 0, 0, 0, NULL,
	 "Returns detailed information about all commands.", "server",
	 "[COUNT|LIST|INFO [command-name ...]|DOCS [command-name ...]]"},
	{"config", config_cmd, -2, CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE, 0, 0, 0,
	 NULL, "CONFIG GET, SET, RESETSTAT.", "server",
	 "GET parameter [parameter ...]|SET parameter value [parameter value ...]|RESETSTAT"},
	{"info", info_cmd, -1, CMD_LOADING | CMD_STALE, 0, 0, 0, NULL,
	 "Returns information and statistics about the server.", "server",
	 "[section [section ...]]"},
	{"dbsize", dbsize_cmd, 1, CMD_READONLY | CMD_FAST, 0, 0, 0, NULL,
	 "Returns the number of keys in the database.", "server", NULL},
	{"flushdb", flush_cmd, -1, CMD_WRITE | CMD_KEYSPACE_EXCLUSIVE, 0, 0, 0, NULL,
	 "Removes all keys from the current database.", "server",
	 "[ASYNC|SYNC]"},
	{"flushall", flush_cmd, -1, CMD_WRITE | CMD_KEYSPACE_EXCLUSIVE, 0, 0, 0, NULL,
	 "Removes all keys from all databases.", "server",
	 "[ASYNC|SYNC]"},
	{"save", save_cmd, 1, CMD_ADMIN | CMD_NOSCRIPT | CMD_NO_MULTI, 0, 0, 0, NULL,
	 "Every write is already durable: returns OK.", "server", NULL},
	{"bgsave", bgsave_cmd, -1, CMD_ADMIN | CMD_NOSCRIPT, 0, 0, 0, NULL,
	 "Every write is already durable: returns at once.", "server",
	 "[SCHEDULE]"},
	{"lastsave", lastsave_cmd, 1, CMD_LOADING | CMD_STALE | CMD_FAST, 0, 0, 0, NULL,
	 "Returns the Unix time of the last SAVE (or of the start).", "server", NULL},
	{"shutdown", shutdown_cmd, -1, CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE |
	 CMD_NO_MULTI | CMD_NO_TXN, 0, 0, 0, NULL,
	 "Closes the pool cleanly and stops the server.", "server",
	 "[NOSAVE|SAVE] [NOW] [FORCE] [ABORT]"},
	{"time", time_cmd, 1, CMD_LOADING | CMD_STALE | CMD_FAST, 0, 0, 0, NULL,
	 "Returns the server time.", "server", NULL},
};
const size_t server_commands_count = sizeof(server_commands) / sizeof(server_commands[0]);
