/*
 * cmd_keys.c - commands on keys of any type: DEL, UNLINK, EXISTS, TYPE, KEYS, SCAN,
 * RENAME, RENAMENX, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL,
 * EXPIRETIME, PEXPIRETIME, PERSIST.
 *
 * SCAN's cursor. Keys are ordered, so a scan resumes at the smallest key after the last
 * one returned. Redis cursors are numbers (clients parse them), so the resume key is
 * kept in a table of SCAN_CURSORS slots and the cursor is its number; a cursor whose
 * slot was reused by later scans (more than SCAN_CURSORS scans in flight) is answered
 * with "ERR invalid cursor". Keys present for the whole scan are returned exactly once.
 */
#include "server.h"
#include "net.h"
#include "glob.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_CURSORS 1024u

struct cursor_slot {
	uint64_t id;                 /* 0: free */
	size_t len;
	unsigned char key[KS_MAX_USER_KEY + 1];
};

struct scan_cursors {
	pthread_mutex_t lock;
	uint64_t next_id;
	struct cursor_slot slots[SCAN_CURSORS];
};

struct scan_cursors *scan_cursors_new(void)
{
	struct scan_cursors *s = calloc(1, sizeof(*s));
	if (s)
		pthread_mutex_init(&s->lock, NULL);
	return s;
}

void scan_cursors_free(struct scan_cursors *s)
{
	if (s)
		pthread_mutex_destroy(&s->lock);
	free(s);
}

static const char *type_name(int type)
{
	switch (type) {
	case KS_STRING: return "string";
	case KS_LIST: return "list";
	case KS_SET: return "set";
	case KS_ZSET: return "zset";
	case KS_HASH: return "hash";
	default: return "none";
	}
}

static void del_cmd(struct client *c)
{
	long long n = 0;
	for (int i = 1; i < c->argc; i++) {
		int rc = ks_delete_key(c->txn, c->argv[i].ptr, c->argv[i].len);
		if (rc < 0)
			return;
		n += rc;
	}
	add_reply_int(c, n);
}

static void exists_cmd(struct client *c)
{
	long long n = 0;
	for (int i = 1; i < c->argc; i++) {
		int rc = ks_lookup(c->txn, c->argv[i].ptr, c->argv[i].len, NULL);
		if (rc < 0)
			return;
		n += rc;
	}
	add_reply_int(c, n);
}

static void type_cmd(struct client *c)
{
	struct ks_meta m;
	int rc = ks_lookup(c->txn, c->argv[1].ptr, c->argv[1].len, &m);
	if (rc >= 0)
		add_reply_simple(c, rc ? type_name(m.type) : "none");
}

struct keys_arg {
	struct client *c;
	const struct arg *pattern;   /* NULL: all */
	int type;                    /* 0: any */
	long long n;
	const unsigned char *last;   /* the last key visited */
	size_t last_len;
	unsigned char last_buf[KS_MAX_USER_KEY];
};

static int keys_cb(const void *key, size_t klen, const struct ks_meta *m, void *arg)
{
	struct keys_arg *a = arg;
	memcpy(a->last_buf, key, klen);
	a->last_len = klen;
	if (a->type && m->type != a->type)
		return 0;
	if (a->pattern && !(a->pattern->len == 1 && a->pattern->ptr[0] == '*') &&
	    !glob_match(a->pattern->ptr, a->pattern->len, key, klen, 0))
		return 0;
	add_reply_bulk(a->c, key, klen);
	a->n++;
	return 0;
}

static void keys_cmd(struct client *c)
{
	struct keys_arg *a = calloc(1, sizeof(*a));
	if (!a) {
		add_reply_error(c, "ERR out of memory");
		return;
	}
	a->c = c;
	a->pattern = &c->argv[1];
	void *len = add_reply_deferred(c);
	if (ks_scan_keys(c->txn, NULL, 0, SIZE_MAX, keys_cb, a) >= 0)
		set_deferred_array(c, len, a->n);
	free(a);
}

/* SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] */
static void scan_cmd(struct client *c)
{
	struct scan_cursors *sc = c->srv->cursors;
	long long cursor;
	if (arg_to_ll(&c->argv[1], &cursor) || cursor < 0) {
		add_reply_error(c, "ERR invalid cursor");
		return;
	}
	long long count = 10;
	struct keys_arg *a = calloc(1, sizeof(*a));
	if (!a) {
		add_reply_error(c, "ERR out of memory");
		return;
	}
	a->c = c;
	for (int i = 2; i < c->argc; i++) {
		int more = c->argc - i - 1;
		if (arg_is(&c->argv[i], "count") && more) {
			if (get_ll_or_reply(c, &c->argv[++i], &count))
				goto out;
			if (count < 1) {
				add_reply_error(c, ERR_SYNTAX);
				goto out;
			}
		} else if (arg_is(&c->argv[i], "match") && more) {
			a->pattern = &c->argv[++i];
		} else if (arg_is(&c->argv[i], "type") && more) {
			const struct arg *t = &c->argv[++i];
			static const int types[] = {KS_STRING, KS_LIST, KS_SET, KS_ZSET, KS_HASH};
			a->type = -1; /* an unknown type matches nothing, as in Redis */
			for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
				if (arg_is(t, type_name(types[k])))
					a->type = types[k];
		} else {
			add_reply_error(c, ERR_SYNTAX);
			goto out;
		}
	}
	unsigned char from[KS_MAX_USER_KEY + 1];
	size_t flen = 0;
	if (cursor) {
		pthread_mutex_lock(&sc->lock);
		struct cursor_slot *s = &sc->slots[(uint64_t)cursor % SCAN_CURSORS];
		int ok = s->id == (uint64_t)cursor;
		if (ok) {
			flen = s->len;
			memcpy(from, s->key, flen);
		}
		pthread_mutex_unlock(&sc->lock);
		if (!ok) {
			add_reply_error(c, "ERR invalid cursor");
			goto out;
		}
	}
	add_reply_array(c, 2);
	/* the cursor comes first in the reply but is known last: keys go to a deferred
	 * array, the cursor into a reply slot reserved before it */
	void *cursor_slot = add_reply_deferred(c);
	void *len = add_reply_deferred(c);
	long n = ks_scan_keys(c->txn, from, flen, (size_t)count, keys_cb, a);
	if (n < 0)
		goto out;
	uint64_t next = 0;
	if (n == count) {
		pthread_mutex_lock(&sc->lock);
		next = ++sc->next_id;
		struct cursor_slot *s = &sc->slots[next % SCAN_CURSORS];
		s->id = next;
		memcpy(s->key, a->last_buf, a->last_len);
		s->key[a->last_len] = 0; /* the smallest key after the last one */
		s->len = a->last_len + 1;
		pthread_mutex_unlock(&sc->lock);
	}
	set_deferred_bulk_ull(c, cursor_slot, next);
	set_deferred_array(c, len, a->n);
out:
	free(a);
}

static void rename_generic(struct client *c, int nx)
{
	const struct arg *src = &c->argv[1], *dst = &c->argv[2];
	int rc = ks_lookup(c->txn, src->ptr, src->len, NULL);
	if (rc < 0)
		return;
	if (!rc) {
		add_reply_error(c, ERR_NO_SUCH_KEY);
		return;
	}
	if (nx) {
		rc = ks_lookup(c->txn, dst->ptr, dst->len, NULL);
		if (rc < 0)
			return;
		if (rc) {
			add_reply_int(c, 0);
			return;
		}
	}
	if (ks_rename(c->txn, src->ptr, src->len, dst->ptr, dst->len) < 0)
		return;
	if (nx)
		add_reply_int(c, 1);
	else
		add_reply_ok(c);
}

static void rename_cmd(struct client *c)
{
	rename_generic(c, 0);
}

static void renamenx_cmd(struct client *c)
{
	rename_generic(c, 1);
}

#define EXPIRE_NX 1
#define EXPIRE_XX 2
#define EXPIRE_GT 4
#define EXPIRE_LT 8

/* EXPIRE key when [NX|XX|GT|LT]: @unit_ms 1000 for seconds; @absolute for *AT. */
static void expire_generic(struct client *c, long long unit_ms, int absolute)
{
	const struct arg *key = &c->argv[1];
	long long when;
	int flags = 0;
	for (int i = 3; i < c->argc; i++) {
		if (arg_is(&c->argv[i], "nx"))
			flags |= EXPIRE_NX;
		else if (arg_is(&c->argv[i], "xx"))
			flags |= EXPIRE_XX;
		else if (arg_is(&c->argv[i], "gt"))
			flags |= EXPIRE_GT;
		else if (arg_is(&c->argv[i], "lt"))
			flags |= EXPIRE_LT;
		else {
			add_reply_errorf(c, "ERR Unsupported option %.*s", (int)(c->argv[i].len > 64
					 ? 64 : c->argv[i].len), c->argv[i].ptr);
			return;
		}
	}
	if ((flags & EXPIRE_NX) && (flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT))) {
		add_reply_error(c, "ERR NX and XX, GT or LT options at the same time are not "
			"compatible");
		return;
	}
	if ((flags & EXPIRE_GT) && (flags & EXPIRE_LT)) {
		add_reply_error(c, "ERR GT and LT options at the same time are not compatible");
		return;
	}
	if (get_ll_or_reply(c, &c->argv[2], &when))
		return;
	int64_t now = ks_txn_now(c->txn);
	if ((when > 0 && when > INT64_MAX / unit_ms) || (when < 0 && when < INT64_MIN / unit_ms) ||
	    (when *= unit_ms, !absolute && ((now > 0 && when > INT64_MAX - now) ||
					    (now < 0 && when < INT64_MIN - now)))) {
		add_reply_errorf(c, "ERR invalid expire time in '%s' command", c->cmd->name);
		return;
	}
	if (!absolute)
		when += now;
	struct ks_meta m;
	int rc = ks_lookup(c->txn, key->ptr, key->len, &m);
	if (rc < 0)
		return;
	if (!rc) {
		add_reply_int(c, 0);
		return;
	}
	int has = m.expire_ms != 0;
	if (((flags & EXPIRE_NX) && has) || ((flags & EXPIRE_XX) && !has) ||
	    ((flags & EXPIRE_GT) && (!has || when <= m.expire_ms)) ||
	    ((flags & EXPIRE_LT) && has && when >= m.expire_ms)) {
		add_reply_int(c, 0);
		return;
	}
	if (when <= now) {
		if (ks_delete_key(c->txn, key->ptr, key->len) < 0)
			return;
		add_reply_int(c, 1);
		return;
	}
	m.expire_ms = when ? when : 1; /* 0 means "none" in the meta record */
	if (ks_write_meta(c->txn, key->ptr, key->len, &m) < 0)
		return;
	add_reply_int(c, 1);
}

static void expire_cmd(struct client *c)
{
	expire_generic(c, 1000, 0);
}

static void pexpire_cmd(struct client *c)
{
	expire_generic(c, 1, 0);
}

static void expireat_cmd(struct client *c)
{
	expire_generic(c, 1000, 1);
}

static void pexpireat_cmd(struct client *c)
{
	expire_generic(c, 1, 1);
}

/* TTL and friends: @ms: milliseconds; @abs: the expiry itself, not what is left. */
static void ttl_generic(struct client *c, int ms, int abs)
{
	struct ks_meta m;
	int rc = ks_lookup(c->txn, c->argv[1].ptr, c->argv[1].len, &m);
	if (rc < 0)
		return;
	if (!rc) {
		add_reply_int(c, -2);
		return;
	}
	if (!m.expire_ms) {
		add_reply_int(c, -1);
		return;
	}
	long long v = abs ? m.expire_ms : m.expire_ms - ks_txn_now(c->txn);
	if (v < 0)
		v = 0;
	add_reply_int(c, ms ? v : (abs ? v / 1000 : (v + 500) / 1000));
}

static void ttl_cmd(struct client *c)
{
	ttl_generic(c, 0, 0);
}

static void pttl_cmd(struct client *c)
{
	ttl_generic(c, 1, 0);
}

static void expiretime_cmd(struct client *c)
{
	ttl_generic(c, 0, 1);
}

static void pexpiretime_cmd(struct client *c)
{
	ttl_generic(c, 1, 1);
}

static void persist_cmd(struct client *c)
{
	struct ks_meta m;
	int rc = ks_lookup(c->txn, c->argv[1].ptr, c->argv[1].len, &m);
	if (rc < 0)
		return;
	if (!rc || !m.expire_ms) {
		add_reply_int(c, 0);
		return;
	}
	m.expire_ms = 0;
	if (ks_write_meta(c->txn, c->argv[1].ptr, c->argv[1].len, &m) < 0)
		return;
	add_reply_int(c, 1);
}

#define W (CMD_WRITE)
#define R (CMD_READONLY)
const struct command keys_commands[] = {
	{"del", del_cmd, -2, W, 1, -1, 1, NULL, "Deletes one or more keys.", "generic",
	 "key [key ...]"},
	{"unlink", del_cmd, -2, W | CMD_FAST, 1, -1, 1, NULL,
	 "Deletes one or more keys (members are swept in the background).", "generic",
	 "key [key ...]"},
	{"exists", exists_cmd, -2, R | CMD_FAST, 1, -1, 1, NULL,
	 "Determines whether one or more keys exist.", "generic",
	 "key [key ...]"},
	{"type", type_cmd, 2, R | CMD_FAST, 1, 1, 1, NULL,
	 "Determines the type of value stored at a key.", "generic",
	 "key"},
	{"keys", keys_cmd, 2, R | CMD_KEYSPACE_EXCLUSIVE, 0, 0, 0, NULL,
	 "Returns all key names that match a pattern.", "generic",
	 "pattern"},
	{"scan", scan_cmd, -2, R, 0, 0, 0, NULL, "Iterates over the key names in the database.",
	 "generic",
	 "cursor [MATCH pattern] [COUNT count] [TYPE type]"},
	{"rename", rename_cmd, 3, W, 1, 2, 1, NULL,
	 "Renames a key and overwrites the destination.",
	 "generic",
	 "key newkey"},
	{"renamenx", renamenx_cmd, 3, W | CMD_FAST, 1, 2, 1, NULL,
	 "Renames a key only when the target key name doesn't exist.", "generic",
	 "key newkey"},
	{"expire", expire_cmd, -3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Sets the expiration time of a key in seconds.", "generic",
	 "key seconds [NX|XX|GT|LT]"},
	{"pexpire", pexpire_cmd, -3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Sets the expiration time of a key in milliseconds.", "generic",
	 "key milliseconds [NX|XX|GT|LT]"},
	{"expireat", expireat_cmd, -3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Sets the expiration time of a key to a Unix timestamp.", "generic",
	 "key unix-time-seconds [NX|XX|GT|LT]"},
	{"pexpireat", pexpireat_cmd, -3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Sets the expiration time of a key to a Unix milliseconds timestamp.", "generic",
	 "key unix-time-milliseconds [NX|XX|GT|LT]"},
	{"ttl", ttl_cmd, 2, R | CMD_FAST, 1, 1, 1, NULL,
	 "Returns the expiration time in seconds of a key.", "generic",
	 "key"},
	{"pttl", pttl_cmd, 2, R | CMD_FAST, 1, 1, 1, NULL,
	 "Returns the expiration time in milliseconds of a key.", "generic",
	 "key"},
	{"expiretime", expiretime_cmd, 2, R | CMD_FAST, 1, 1, 1, NULL,
	 "Returns the expiration time of a key as a Unix timestamp.", "generic",
	 "key"},
	{"pexpiretime", pexpiretime_cmd, 2, R | CMD_FAST, 1, 1, 1, NULL,
	 "Returns the expiration time of a key as a Unix milliseconds timestamp.", "generic",
	 "key"},
	{"persist", persist_cmd, 2, W | CMD_FAST, 1, 1, 1, NULL,
	 "Removes the expiration time of a key.", "generic",
	 "key"},
};
const size_t keys_commands_count = sizeof(keys_commands) / sizeof(keys_commands[0]);
