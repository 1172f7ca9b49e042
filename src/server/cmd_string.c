/*
 * cmd_string.c - string commands: GET, SET, SETNX, SETEX, PSETEX, GETSET, GETDEL, MGET,
 * MSET, MSETNX, INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT, APPEND, STRLEN, GETRANGE,
 * SUBSTR, SETRANGE.
 *
 * A string up to KS_MAX_INLINE bytes sits inside its meta record; a longer one is
 * written in pieces under a new generation, made visible by the command's one batch
 * (keyspace.h, ks_string_set()). Strings are limited to ks_db_max_string() (512 MiB),
 * and commands that would pass it answer as Redis does past proto-max-bulk-len.
 */
#include "server.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_TOO_BIG "ERR string exceeds maximum allowed size (proto-max-bulk-len)"

/* The string at @key. Return: 1 (found: *val, *len), 0 (absent), -1 (replied/failed). */
static int get_string(struct client *c, const struct arg *key, struct ks_meta *m,
		      const char **val, size_t *len)
{
	int rc = lookup_typed(c, key, KS_STRING, m);
	if (rc <= 0)
		return rc;
	return ks_string_get(c->txn, m, val, len) ? -1 : 1;
}

static void get_cmd(struct client *c)
{
	struct ks_meta m;
	const char *v;
	size_t n;
	int rc = get_string(c, &c->argv[1], &m, &v, &n);
	if (rc == 1)
		add_reply_bulk(c, v, n);
	else if (rc == 0)
		add_reply_nil(c);
}

/* Stores @val at @key; Return: 0, or -1 (an error replied or recorded). */
static int set_value(struct client *c, const struct arg *key, const void *val, size_t len,
		     int64_t expire_ms)
{
	if (len > ks_db_max_string(ks_txn_db(c->txn))) {
		add_reply_error(c, ERR_TOO_BIG);
		return -1;
	}
	return ks_string_set(c->txn, key->ptr, key->len, val, len, expire_ms) ? -1 : 0;
}

#define SET_NX 1
#define SET_XX 2
#define SET_GET 4
#define SET_KEEPTTL 8
#define SET_EXPIRE 16

/* SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL] */
static void set_cmd(struct client *c)
{
	int flags = 0;
	int64_t expire = 0;
	int64_t now = ks_txn_now(c->txn);
	for (int i = 3; i < c->argc; i++) {
		const struct arg *a = &c->argv[i];
		int more = i + 1 < c->argc;
		long long unit = 0, absolute = 0;
		if (arg_is(a, "nx") && !(flags & SET_XX)) {
			flags |= SET_NX;
		} else if (arg_is(a, "xx") && !(flags & SET_NX)) {
			flags |= SET_XX;
		} else if (arg_is(a, "get")) {
			flags |= SET_GET;
		} else if (arg_is(a, "keepttl") && !(flags & SET_EXPIRE)) {
			flags |= SET_KEEPTTL;
		} else if (arg_is(a, "ex") && more) {
			unit = 1000;
		} else if (arg_is(a, "px") && more) {
			unit = 1;
		} else if (arg_is(a, "exat") && more) {
			unit = 1000;
			absolute = 1;
		} else if (arg_is(a, "pxat") && more) {
			unit = 1;
			absolute = 1;
		} else {
			add_reply_error(c, ERR_SYNTAX);
			return;
		}
		if (!unit)
			continue;
		if (flags & (SET_KEEPTTL | SET_EXPIRE)) {
			add_reply_error(c, ERR_SYNTAX);
			return;
		}
		flags |= SET_EXPIRE;
		long long v;
		if (get_ll_or_reply(c, &c->argv[++i], &v))
			return;
		if (v <= 0 || v > INT64_MAX / unit || (!absolute && v * unit > INT64_MAX - now)) {
			add_reply_error(c, "ERR invalid expire time in 'set' command");
			return;
		}
		expire = absolute ? v * unit : now + v * unit;
	}
	const struct arg *key = &c->argv[1];
	struct ks_meta m;
	int found = ks_lookup(c->txn, key->ptr, key->len, &m);
	if (found < 0)
		return;
	const char *old = NULL;
	size_t oldlen = 0;
	if (flags & SET_GET) {
		if (found && m.type != KS_STRING) {
			add_reply_error(c, ERR_WRONGTYPE);
			return;
		}
		if (found && ks_string_get(c->txn, &m, &old, &oldlen))
			return;
	}
	if (((flags & SET_NX) && found) || ((flags & SET_XX) && !found)) {
		if (flags & SET_GET) {
			if (old)
				add_reply_bulk(c, old, oldlen);
			else
				add_reply_nil(c);
		} else {
			add_reply_nil(c);
		}
		return;
	}
	if ((flags & SET_KEEPTTL) && found)
		expire = m.expire_ms;
	if (set_value(c, key, c->argv[2].ptr, c->argv[2].len, expire))
		return;
	if (flags & SET_GET) {
		if (old)
			add_reply_bulk(c, old, oldlen);
		else
			add_reply_nil(c);
	} else {
		add_reply_ok(c);
	}
}

static void setnx_cmd(struct client *c)
{
	int found = ks_lookup(c->txn, c->argv[1].ptr, c->argv[1].len, NULL);
	if (found < 0)
		return;
	if (found) {
		add_reply_int(c, 0);
		return;
	}
	if (set_value(c, &c->argv[1], c->argv[2].ptr, c->argv[2].len, 0) == 0)
		add_reply_int(c, 1);
}

/* SETEX key seconds value, PSETEX key ms value */
static void setex_generic(struct client *c, long long unit)
{
	long long v;
	if (get_ll_or_reply(c, &c->argv[2], &v))
		return;
	int64_t now = ks_txn_now(c->txn);
	if (v <= 0 || v > INT64_MAX / unit || v * unit > INT64_MAX - now) {
		add_reply_errorf(c, "ERR invalid expire time in '%s' command", c->cmd->name);
		return;
	}
	if (set_value(c, &c->argv[1], c->argv[3].ptr, c->argv[3].len, now + v * unit) == 0)
		add_reply_ok(c);
}

static void setex_cmd(struct client *c)
{
	setex_generic(c, 1000);
}

static void psetex_cmd(struct client *c)
{
	setex_generic(c, 1);
}

static void getset_cmd(struct client *c)
{
	struct ks_meta m;
	const char *v = NULL;
	size_t n = 0;
	int rc = get_string(c, &c->argv[1], &m, &v, &n);
	if (rc < 0 || set_value(c, &c->argv[1], c->argv[2].ptr, c->argv[2].len, 0))
		return;
	if (rc)
		add_reply_bulk(c, v, n);
	else
		add_reply_nil(c);
}

static void getdel_cmd(struct client *c)
{
	struct ks_meta m;
	const char *v;
	size_t n;
	int rc = get_string(c, &c->argv[1], &m, &v, &n);
	if (rc < 0)
		return;
	if (!rc) {
		add_reply_nil(c);
		return;
	}
	if (ks_delete_key(c->txn, c->argv[1].ptr, c->argv[1].len) < 0)
		return;
	add_reply_bulk(c, v, n);
}

static void mget_cmd(struct client *c)
{
	add_reply_array(c, c->argc - 1);
	for (int i = 1; i < c->argc; i++) {
		struct ks_meta m;
		const char *v;
		size_t n;
		int rc = ks_lookup(c->txn, c->argv[i].ptr, c->argv[i].len, &m);
		if (rc < 0)
			return;
		if (rc && m.type == KS_STRING) {
			if (ks_string_get(c->txn, &m, &v, &n))
				return;
			add_reply_bulk(c, v, n);
		} else {
			add_reply_nil(c);
		}
	}
}

static void mset_generic(struct client *c, int nx)
{
	if (c->argc % 2 == 0) {
		add_reply_errorf(c, "ERR wrong number of arguments for '%s' command", c->cmd->name);
		return;
	}
	if (nx) {
		for (int i = 1; i < c->argc; i += 2) {
			int rc = ks_lookup(c->txn, c->argv[i].ptr, c->argv[i].len, NULL);
			if (rc < 0)
				return;
			if (rc) {
				add_reply_int(c, 0);
				return;
			}
		}
	}
	for (int i = 1; i < c->argc; i += 2)
		if (set_value(c, &c->argv[i], c->argv[i + 1].ptr, c->argv[i + 1].len, 0))
			return;
	if (nx)
		add_reply_int(c, 1);
	else
		add_reply_ok(c);
}

static void mset_cmd(struct client *c)
{
	mset_generic(c, 0);
}

static void msetnx_cmd(struct client *c)
{
	mset_generic(c, 1);
}

/* Adds @by to the integer at @key (0 if absent), keeping its expiry. */
static void incr_generic(struct client *c, long long by)
{
	struct ks_meta m;
	const char *v;
	size_t n;
	int rc = get_string(c, &c->argv[1], &m, &v, &n);
	if (rc < 0)
		return;
	long long cur = 0;
	if (rc) {
		struct arg a = {v, n};
		if (arg_to_ll(&a, &cur)) {
			add_reply_error(c, ERR_NOT_INTEGER);
			return;
		}
	}
	if ((by > 0 && cur > LLONG_MAX - by) || (by < 0 && cur < LLONG_MIN - by)) {
		add_reply_error(c, ERR_OVERFLOW);
		return;
	}
	cur += by;
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%lld", cur);
	if (ks_string_set(c->txn, c->argv[1].ptr, c->argv[1].len, buf, (size_t)len,
			  rc ? m.expire_ms : 0))
		return;
	add_reply_int(c, cur);
}

static void incr_cmd(struct client *c)
{
	incr_generic(c, 1);
}

static void decr_cmd(struct client *c)
{
	incr_generic(c, -1);
}

static void incrby_cmd(struct client *c)
{
	long long by;
	if (get_ll_or_reply(c, &c->argv[2], &by) == 0)
		incr_generic(c, by);
}

static void decrby_cmd(struct client *c)
{
	long long by;
	if (get_ll_or_reply(c, &c->argv[2], &by))
		return;
	if (by == LLONG_MIN) {
		add_reply_error(c, "ERR decrement would overflow");
		return;
	}
	incr_generic(c, -by);
}

/* Parses a long double as Redis does for INCRBYFLOAT. Return: 0 or -1. */
static int parse_ld(const char *s, size_t n, long double *out)
{
	char buf[5120];
	if (n == 0 || n >= sizeof(buf) || isspace((unsigned char)s[0]))
		return -1;
	memcpy(buf, s, n);
	buf[n] = 0;
	char *end;
	errno = 0;
	long double v = strtold(buf, &end);
	if (end != buf + n || errno == ERANGE || isnan(v)) /* all of it: no NUL inside */
		return -1;
	*out = v;
	return 0;
}

static void incrbyfloat_cmd(struct client *c)
{
	long double by, cur = 0;
	if (parse_ld(c->argv[2].ptr, c->argv[2].len, &by)) {
		add_reply_error(c, ERR_NOT_FLOAT);
		return;
	}
	struct ks_meta m;
	const char *v;
	size_t n;
	int rc = get_string(c, &c->argv[1], &m, &v, &n);
	if (rc < 0)
		return;
	if (rc && parse_ld(v, n, &cur)) {
		add_reply_error(c, ERR_NOT_FLOAT);
		return;
	}
	cur += by;
	if (isnan(cur) || isinf(cur)) {
		add_reply_error(c, "ERR increment would produce NaN or Infinity");
		return;
	}
	/* Redis's human-friendly form: 17 decimals, trailing zeros and dot removed */
	char buf[5200];
	int len = snprintf(buf, sizeof(buf), "%.17Lf", cur);
	if (strchr(buf, '.')) {
		while (len > 0 && buf[len - 1] == '0')
			len--;
		if (len > 0 && buf[len - 1] == '.')
			len--;
	}
	if (len == 2 && !memcmp(buf, "-0", 2))
		buf[0] = '0', len = 1;
	if (ks_string_set(c->txn, c->argv[1].ptr, c->argv[1].len, buf, (size_t)len,
			  rc ? m.expire_ms : 0))
		return;
	add_reply_bulk(c, buf, (size_t)len);
}

static void append_cmd(struct client *c)
{
	struct ks_meta m;
	const char *v = "";
	size_t n = 0;
	int rc = get_string(c, &c->argv[1], &m, &v, &n);
	if (rc < 0)
		return;
	size_t add = c->argv[2].len;
	if (n + add > ks_db_max_string(ks_txn_db(c->txn))) {
		add_reply_error(c, ERR_TOO_BIG);
		return;
	}
	char *nv = ks_scratch(c->txn, n + add + 1);
	if (!nv)
		return;
	memcpy(nv, v, n);
	memcpy(nv + n, c->argv[2].ptr, add);
	if (ks_string_set(c->txn, c->argv[1].ptr, c->argv[1].len, nv, n + add,
			  rc ? m.expire_ms : 0))
		return;
	add_reply_int(c, (long long)(n + add));
}

static void strlen_cmd(struct client *c)
{
	struct ks_meta m;
	int rc = lookup_typed(c, &c->argv[1], KS_STRING, &m);
	if (rc < 0)
		return;
	if (!rc)
		add_reply_int(c, 0);
	else
		add_reply_int(c, (long long)(m.enc == KS_ENC_INLINE ? m.str_len : m.hdr[0]));
}

static void getrange_cmd(struct client *c)
{
	long long start, end;
	if (get_ll_or_reply(c, &c->argv[2], &start) || get_ll_or_reply(c, &c->argv[3], &end))
		return;
	struct ks_meta m;
	const char *v;
	size_t n;
	int rc = get_string(c, &c->argv[1], &m, &v, &n);
	if (rc < 0)
		return;
	if (!rc || n == 0 || (start < 0 && end < 0 && start > end)) {
		add_reply_bulk(c, "", 0);
		return;
	}
	long long len = (long long)n;
	if (start < 0)
		start += len;
	if (end < 0)
		end += len;
	if (start < 0)
		start = 0;
	if (end < 0)
		end = 0;
	if (end >= len)
		end = len - 1;
	if (start > end)
		add_reply_bulk(c, "", 0);
	else
		add_reply_bulk(c, v + start, (size_t)(end - start + 1));
}

static void setrange_cmd(struct client *c)
{
	long long off;
	if (get_ll_or_reply(c, &c->argv[2], &off))
		return;
	if (off < 0) {
		add_reply_error(c, "ERR offset is out of range");
		return;
	}
	const struct arg *val = &c->argv[3];
	struct ks_meta m;
	const char *v = "";
	size_t n = 0;
	int rc = get_string(c, &c->argv[1], &m, &v, &n);
	if (rc < 0)
		return;
	if (val->len == 0) {
		add_reply_int(c, (long long)n); /* nothing to write; an absent key stays absent */
		return;
	}
	if ((unsigned long long)off + val->len > ks_db_max_string(ks_txn_db(c->txn))) {
		add_reply_error(c, ERR_TOO_BIG);
		return;
	}
	size_t nl = (size_t)off + val->len > n ? (size_t)off + val->len : n;
	char *nv = ks_scratch(c->txn, nl);
	if (!nv)
		return;
	memcpy(nv, v, n);
	if ((size_t)off > n)
		memset(nv + n, 0, (size_t)off - n);
	memcpy(nv + off, val->ptr, val->len);
	if (ks_string_set(c->txn, c->argv[1].ptr, c->argv[1].len, nv, nl, rc ? m.expire_ms : 0))
		return;
	add_reply_int(c, (long long)nl);
}

#define W (CMD_WRITE | CMD_DENYOOM)
#define R (CMD_READONLY)
const struct command string_commands[] = {
	{"get", get_cmd, 2, R | CMD_FAST, 1, 1, 1, NULL, "Returns the string value of a key.",
	 "string",
	 "key"},
	{"set", set_cmd, -3, W, 1, 1, 1, NULL, "Sets the string value of a key.", "string",
	 "key value [NX|XX] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|"
	 "PXAT unix-time-milliseconds|KEEPTTL]"},
	{"setnx", setnx_cmd, 3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Set the string value of a key only when the key doesn't exist.", "string",
	 "key value"},
	{"setex", setex_cmd, 4, W, 1, 1, 1, NULL,
	 "Sets the string value and expiration time of a key.", "string",
	 "key seconds value"},
	{"psetex", psetex_cmd, 4, W, 1, 1, 1, NULL,
	 "Sets the string value and expiration time in milliseconds of a key.", "string",
	 "key milliseconds value"},
	{"getset", getset_cmd, 3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Returns the previous string value of a key after setting it to a new value.",
	 "string",
	 "key value"},
	{"getdel", getdel_cmd, 2, CMD_WRITE | CMD_FAST, 1, 1, 1, NULL,
	 "Returns the string value of a key after deleting the key.", "string",
	 "key"},
	{"mget", mget_cmd, -2, R | CMD_FAST, 1, -1, 1, NULL,
	 "Atomically returns the string values of one or more keys.", "string",
	 "key [key ...]"},
	{"mset", mset_cmd, -3, W, 1, -1, 2, NULL,
	 "Atomically creates or modifies the string values of one or more keys.", "string",
	 "key value [key value ...]"},
	{"msetnx", msetnx_cmd, -3, W, 1, -1, 2, NULL,
	 "Atomically sets several keys only when none of them exist.", "string",
	 "key value [key value ...]"},
	{"incr", incr_cmd, 2, W | CMD_FAST, 1, 1, 1, NULL,
	 "Increments the integer value of a key by one.", "string",
	 "key"},
	{"decr", decr_cmd, 2, W | CMD_FAST, 1, 1, 1, NULL,
	 "Decrements the integer value of a key by one.", "string",
	 "key"},
	{"incrby", incrby_cmd, 3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Increments the integer value of a key by a number.", "string",
	 "key increment"},
	{"decrby", decrby_cmd, 3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Decrements a number from the integer value of a key.", "string",
	 "key decrement"},
	{"incrbyfloat", incrbyfloat_cmd, 3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Increment the floating point value of a key by a number.", "string",
	 "key increment"},
	{"append", append_cmd, 3, W | CMD_FAST, 1, 1, 1, NULL,
	 "Appends a string to the value of a key.", "string",
	 "key value"},
	{"strlen", strlen_cmd, 2, R | CMD_FAST, 1, 1, 1, NULL,
	 "Returns the length of a string value.", "string",
	 "key"},
	{"getrange", getrange_cmd, 4, R, 1, 1, 1, NULL,
	 "Returns a substring of the string stored at a key.", "string",
	 "key start end"},
	{"substr", getrange_cmd, 4, R, 1, 1, 1, NULL,
	 "Returns a substring from a string value.", "string",
	 "key start end"},
	{"setrange", setrange_cmd, 4, W, 1, 1, 1, NULL,
	 "Overwrites a part of a string value with another by an offset.", "string",
	 "key offset value"},
};
const size_t string_commands_count = sizeof(string_commands) / sizeof(string_commands[0]);
