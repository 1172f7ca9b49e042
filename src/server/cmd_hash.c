/*
 * cmd_hash.c - the hash commands of tips-server (HSET, HGET, HGETALL, HINCRBY, ...),
 * with Redis 7's replies and error texts.
 *
 * Layout (docs/server.md): a hash is a meta record of type KS_HASH whose hdr[0] is the
 * number of fields, and one member key 'c' gen field -> value per field. Invariant: the
 * count equals the fields stored under the generation; every command that adds or
 * removes fields writes the new count in the same transaction (kc_store_count()), and
 * the one that removes the last field deletes the key.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_collection.h"

#define HASH_MAX_FIELD KS_MAX_SUFFIX
/* Longest text of a long double HINCRBYFLOAT accepts or stores (Redis's limit). */
#define HASH_MAX_LD_CHARS (5 * 1024)

/* The member key of @field; 0, or -1 if the field is too long to exist. */
static int field_key(struct ks_key *k, uint64_t gen, const struct arg *field)
{
	return ks_member_key(k, gen, field->ptr, field->len, NULL, 0) == 0 ? 0 : -1;
}

/* Value of @field into @buf (KS_MAX_MEMBER_VALUE bytes): 1 found, 0 absent, or < 0. */
static int field_get(struct client *c, const struct ks_meta *m, const struct arg *field,
		     void *buf, size_t *vlen)
{
	struct ks_key k;

	if (field_key(&k, m->gen, field) < 0)
		return 0;
	return ks_get(c->txn, &k, buf, KS_MAX_MEMBER_VALUE, vlen);
}

/* Write @field = @val; *@added counts a new field. Return: 0 or < 0. */
static int field_put(struct client *c, const struct ks_meta *m, const struct arg *field,
		     const void *val, size_t vlen, void *buf, uint64_t *added)
{
	struct ks_key k;
	size_t old;
	int r;

	if (ks_member_key(&k, m->gen, field->ptr, field->len, NULL, 0) < 0)
		return TIPS_ETOOBIG;
	r = ks_get(c->txn, &k, buf, KS_MAX_MEMBER_VALUE, &old);
	if (r < 0)
		return r;
	if (r == 0)
		(*added)++;
	return ks_put(c->txn, &k, val, vlen);
}

/* The hash at argv[1] for writing: existing (1), or a new empty one (0); -1 replied. */
static int hash_for_write(struct client *c, struct ks_meta *m)
{
	int r = lookup_typed(c, &c->argv[1], KS_HASH, m);

	if (r != 0)
		return r;
	return kc_create(c->txn, KS_HASH, m) < 0 ? -1 : 0;
}

/* Every field and value of argv[first..] (pairs) fits the layout; else replied. */
static int check_pairs(struct client *c, int first)
{
	for (int i = first; i + 1 < c->argc; i += 2) {
		if (kc_check_size(c, &c->argv[i], HASH_MAX_FIELD) < 0 ||
		    kc_check_size(c, &c->argv[i + 1], KS_MAX_MEMBER_VALUE) < 0)
			return -1;
	}
	return 0;
}

/* HSET / HMSET: store the pairs; the number of new fields or -1. */
static long long hset_pairs(struct client *c)
{
	struct ks_meta m;
	uint64_t added = 0;
	void *buf;

	if (c->argc % 2 != 0) {
		kc_reply_wrong_args(c);
		return -1;
	}
	if (check_pairs(c, 2) < 0 || hash_for_write(c, &m) < 0)
		return -1;
	buf = kc_value_buf(c->txn);
	if (!buf)
		return -1;
	for (int i = 2; i < c->argc; i += 2) {
		if (field_put(c, &m, &c->argv[i], c->argv[i + 1].ptr, c->argv[i + 1].len, buf,
			      &added) < 0)
			return -1;
	}
	if (kc_store_count(c->txn, &c->argv[1], &m, m.hdr[0] + added) < 0)
		return -1;
	return (long long)added;
}

static void hset_command(struct client *c)
{
	long long added = hset_pairs(c);

	if (added >= 0)
		add_reply_int(c, added);
}

static void hmset_command(struct client *c)
{
	if (hset_pairs(c) >= 0)
		add_reply_ok(c);
}

static void hsetnx_command(struct client *c)
{
	struct ks_meta m;
	uint64_t added = 0;
	size_t vlen;
	void *buf;
	int r;

	if (check_pairs(c, 2) < 0 || hash_for_write(c, &m) < 0)
		return;
	buf = kc_value_buf(c->txn);
	if (!buf)
		return;
	r = field_get(c, &m, &c->argv[2], buf, &vlen);
	if (r < 0)
		return;
	if (r == 1) {
		add_reply_int(c, 0);
		return;
	}
	if (field_put(c, &m, &c->argv[2], c->argv[3].ptr, c->argv[3].len, buf, &added) < 0 ||
	    kc_store_count(c->txn, &c->argv[1], &m, m.hdr[0] + added) < 0)
		return;
	add_reply_int(c, 1);
}

/* The field argv[2] of the hash argv[1] into a value buffer *@buf: 1 found, 0 absent
 * (field or key), -1 (replied or recorded). */
static int hash_field(struct client *c, void **buf, size_t *vlen)
{
	struct ks_meta m;
	int r = lookup_typed(c, &c->argv[1], KS_HASH, &m);

	if (r <= 0)
		return r;
	*buf = kc_value_buf(c->txn);
	if (!*buf)
		return -1;
	r = field_get(c, &m, &c->argv[2], *buf, vlen);
	return r < 0 ? -1 : r;
}

static void hget_command(struct client *c)
{
	size_t vlen;
	void *buf;
	int r = hash_field(c, &buf, &vlen);

	if (r == 1)
		add_reply_bulk(c, buf, vlen);
	else if (r == 0)
		add_reply_nil(c);
}

static void hmget_command(struct client *c)
{
	struct ks_meta m;
	size_t vlen;
	void *buf = NULL;
	int r = lookup_typed(c, &c->argv[1], KS_HASH, &m);

	if (r < 0)
		return;
	if (r == 1 && !(buf = kc_value_buf(c->txn)))
		return;
	add_reply_array(c, c->argc - 2);
	for (int i = 2; i < c->argc; i++) {
		int found = 0;

		if (buf) {
			found = field_get(c, &m, &c->argv[i], buf, &vlen);
			if (found < 0)
				return;
		}
		if (found)
			add_reply_bulk(c, buf, vlen);
		else
			add_reply_nil(c);
	}
}

static void hstrlen_command(struct client *c)
{
	size_t vlen;
	void *buf;
	int r = hash_field(c, &buf, &vlen);

	if (r >= 0)
		add_reply_int(c, r == 1 ? (long long)vlen : 0);
}

static void hexists_command(struct client *c)
{
	size_t vlen;
	void *buf;
	int r = hash_field(c, &buf, &vlen);

	if (r >= 0)
		add_reply_int(c, r);
}

static void hlen_command(struct client *c)
{
	kc_reply_card(c, KS_HASH);
}

static void hdel_command(struct client *c)
{
	struct ks_meta m;
	uint64_t removed = 0;
	size_t vlen;
	void *buf;
	int r = lookup_typed(c, &c->argv[1], KS_HASH, &m);

	if (r <= 0) {
		if (r == 0)
			add_reply_int(c, 0);
		return;
	}
	buf = kc_value_buf(c->txn);
	if (!buf)
		return;
	for (int i = 2; i < c->argc; i++) {
		struct ks_key k;

		if (field_key(&k, m.gen, &c->argv[i]) < 0)
			continue;
		r = ks_get(c->txn, &k, buf, KS_MAX_MEMBER_VALUE, &vlen);
		if (r < 0)
			return;
		if (r == 1) {
			if (ks_del(c->txn, &k) < 0)
				return;
			removed++;
		}
	}
	if (removed && kc_store_count(c->txn, &c->argv[1], &m, m.hdr[0] - removed) < 0)
		return;
	add_reply_int(c, (long long)removed);
}

/* ---- whole-hash reads --------------------------------------------------------------- */

static void hgetall_command(struct client *c)
{
	kc_reply_all(c, KS_HASH, KC_EMIT_MEMBER | KC_EMIT_VALUE);
}

static void hkeys_command(struct client *c)
{
	kc_reply_all(c, KS_HASH, KC_EMIT_MEMBER);
}

static void hvals_command(struct client *c)
{
	kc_reply_all(c, KS_HASH, KC_EMIT_VALUE);
}

/* ---- increments --------------------------------------------------------------------- */

/* The field argv[2] of the hash argv[1] for an increment: *@found, its value in @buf. */
static int incr_target(struct client *c, struct ks_meta *m, void **buf, size_t *vlen,
		       int *found)
{
	if (kc_check_size(c, &c->argv[2], HASH_MAX_FIELD) < 0 ||
	    hash_for_write(c, m) < 0)
		return -1;
	*buf = kc_value_buf(c->txn);
	if (!*buf)
		return -1;
	*found = field_get(c, m, &c->argv[2], *buf, vlen);
	return *found < 0 ? -1 : 0;
}

/* Store the new value of argv[2] (and the count if the field is new). */
static int incr_store(struct client *c, struct ks_meta *m, const char *val, size_t len,
		      void *buf)
{
	uint64_t added = 0;

	if (field_put(c, m, &c->argv[2], val, len, buf, &added) < 0)
		return -1;
	if (added && kc_store_count(c->txn, &c->argv[1], m, m->hdr[0] + added) < 0)
		return -1;
	return 0;
}

static void hincrby_command(struct client *c)
{
	struct ks_meta m;
	long long incr, cur = 0;
	size_t vlen;
	char text[32];
	void *buf;
	int found, n;

	if (get_ll_or_reply(c, &c->argv[3], &incr) < 0 ||
	    incr_target(c, &m, &buf, &vlen, &found) < 0)
		return;
	if (found) {
		struct arg v = {.ptr = buf, .len = vlen};

		if (arg_to_ll(&v, &cur) < 0) {
			add_reply_error(c, "ERR hash value is not an integer");
			return;
		}
	}
	if ((incr < 0 && cur < 0 && incr < LLONG_MIN - cur) ||
	    (incr > 0 && cur > 0 && incr > LLONG_MAX - cur)) {
		add_reply_error(c, ERR_OVERFLOW);
		return;
	}
	cur += incr;
	n = snprintf(text, sizeof(text), "%lld", cur);
	if (incr_store(c, &m, text, (size_t)n, buf) == 0)
		add_reply_int(c, cur);
}

/* Parse a long double as Redis's string2ld(): the whole text, no leading space, no
 * NaN, no overflow. Return: 0 or -1. */
static int parse_long_double(const char *p, size_t len, long double *out)
{
	char text[HASH_MAX_LD_CHARS + 1];
	char *end;
	long double v;

	if (len == 0 || len > HASH_MAX_LD_CHARS)
		return -1;
	memcpy(text, p, len);
	text[len] = '\0';
	errno = 0;
	v = strtold(text, &end);
	if (text[0] == ' ' || (text[0] >= '\t' && text[0] <= '\r') || (size_t)(end - text) != len ||
	    (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)) || isnan(v))
		return -1;
	*out = v;
	return 0;
}

/* Format as Redis's human-friendly long double: "%.17Lf", trailing zeros (and a bare
 * point) dropped, "-0" as "0". Return: the length, or 0 if it does not fit. */
static size_t format_long_double(long double v, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%.17Lf", v);

	if (n <= 0 || (size_t)n >= cap)
		return 0;
	if (strchr(out, '.')) {
		while (out[n - 1] == '0')
			n--;
		if (out[n - 1] == '.')
			n--;
	}
	if (n == 2 && out[0] == '-' && out[1] == '0') {
		out[0] = '0';
		n = 1;
	}
	out[n] = '\0';
	return (size_t)n;
}

static void hincrbyfloat_command(struct client *c)
{
	struct ks_meta m;
	long double incr, cur = 0;
	char text[HASH_MAX_LD_CHARS + 64];
	size_t vlen, n;
	void *buf;
	int found;

	if (parse_long_double(c->argv[3].ptr, c->argv[3].len, &incr) < 0) {
		add_reply_error(c, ERR_NOT_FLOAT);
		return;
	}
	if (isinf(incr)) {
		add_reply_error(c, "ERR value is NaN or Infinity");
		return;
	}
	if (incr_target(c, &m, &buf, &vlen, &found) < 0)
		return;
	if (found && parse_long_double(buf, vlen, &cur) < 0) {
		add_reply_error(c, "ERR hash value is not a float");
		return;
	}
	cur += incr;
	n = isnan(cur) || isinf(cur) ? 0 : format_long_double(cur, text, sizeof(text));
	if (n == 0) {
		add_reply_error(c, "ERR increment would produce NaN or Infinity");
		return;
	}
	if (incr_store(c, &m, text, n, buf) == 0)
		add_reply_bulk(c, text, n);
}

/* ---- HRANDFIELD --------------------------------------------------------------------- */

static void reply_fields(struct client *c, const struct kc_items *l, int withvalues)
{
	add_reply_array(c, (long long)l->n * (withvalues ? 2 : 1));
	for (size_t i = 0; i < l->n; i++) {
		add_reply_bulk(c, l->v[i].a, l->v[i].alen);
		if (withvalues)
			add_reply_bulk(c, l->v[i].b, l->v[i].blen);
	}
}

/* HRANDFIELD key count [WITHVALUES]: distinct fields for count > 0, repeats for < 0. */
static void hrandfield_count(struct client *c, const struct ks_meta *m, long long count,
			     int withvalues)
{
	struct kc_items l, all;

	kc_items_init(&l, c->txn);
	if (count > 0) {
		if (kc_sample(c->txn, m->gen, m->hdr[0], (uint64_t)count, 1, &l) == 0)
			reply_fields(c, &l, withvalues);
		return;
	}
	kc_items_init(&all, c->txn);
	if (kc_collect(c->txn, m->gen, 1, &all) < 0)
		return;
	if (all.n == 0) {
		add_reply_array(c, 0);
		return;
	}
	add_reply_array(c, -count * (withvalues ? 2 : 1));
	/* A client dropped for its output limit stops a huge reply early. */
	for (long long i = 0; i < -count && !(c->flags & CLIENT_CLOSE_ASAP); i++) {
		const struct kc_item *it = &all.v[kc_random_below(all.n)];

		add_reply_bulk(c, it->a, it->alen);
		if (withvalues)
			add_reply_bulk(c, it->b, it->blen);
	}
}

static void hrandfield_command(struct client *c)
{
	struct ks_meta m;
	struct kc_items l;
	long long count = 0;
	int withvalues = 0;

	if (c->argc >= 3 && kc_parse_rand_count(c, &c->argv[2], &count) < 0)
		return;
	if (c->argc > 4 || (c->argc == 4 && !arg_is(&c->argv[3], "withvalues"))) {
		add_reply_error(c, ERR_SYNTAX);
		return;
	}
	withvalues = c->argc == 4;
	if (withvalues && (count < -LLONG_MAX / 2 || count > LLONG_MAX / 2)) {
		add_reply_error(c, "ERR value is out of range");
		return;
	}
	if (kc_lookup_scan(c, KS_HASH, &m, c->argc >= 3 ? KC_ABSENT_EMPTY : KC_ABSENT_NIL,
			   c->argc < 3 || count != 0) != 1)
		return;
	if (c->argc >= 3) {
		hrandfield_count(c, &m, count, withvalues);
		return;
	}
	kc_items_init(&l, c->txn);
	if (kc_sample(c->txn, m.gen, m.hdr[0], 1, 0, &l) < 0)
		return;
	if (l.n == 1)
		add_reply_bulk(c, l.v[0].a, l.v[0].alen);
	else
		add_reply_nil(c);
}

/* ---- the table ---------------------------------------------------------------------- */

const struct command hash_commands[] = {
	{"hset", hset_command, -4, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Set the value of one or more fields of a hash", "hash", "key field value [field value ...]"},
	{"hsetnx", hsetnx_command, 4, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Set the value of a field only if it does not exist", "hash", "key field value"},
	{"hmset", hmset_command, -4, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Set the values of several fields of a hash", "hash", "key field value [field value ...]"},
	{"hget", hget_command, 3, KC_READ_FAST, 1, 1, 1, NULL, "Get the value of a hash field", "hash", "key field"},
	{"hmget", hmget_command, -3, KC_READ_FAST, 1, 1, 1, NULL,
	 "Get the values of several hash fields", "hash", "key field [field ...]"},
	{"hgetall", hgetall_command, 2, KC_READ, 1, 1, 1, NULL,
	 "Get all the fields and values of a hash", "hash", "key"},
	{"hdel", hdel_command, -3, KC_WRITE_FAST, 1, 1, 1, NULL, "Delete one or more hash fields", "hash", "key field [field ...]"},
	{"hlen", hlen_command, 2, KC_READ_FAST, 1, 1, 1, NULL, "Get the number of fields of a hash",
	 "hash", "key"},
	{"hexists", hexists_command, 3, KC_READ_FAST, 1, 1, 1, NULL, "Tell whether a hash field exists",
	 "hash", "key field"},
	{"hkeys", hkeys_command, 2, KC_READ, 1, 1, 1, NULL, "Get all the fields of a hash", "hash", "key"},
	{"hvals", hvals_command, 2, KC_READ, 1, 1, 1, NULL, "Get all the values of a hash", "hash", "key"},
	{"hincrby", hincrby_command, 4, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Increment the integer value of a hash field", "hash", "key field increment"},
	{"hincrbyfloat", hincrbyfloat_command, 4, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Increment the float value of a hash field", "hash", "key field increment"},
	{"hstrlen", hstrlen_command, 3, KC_READ_FAST, 1, 1, 1, NULL,
	 "Get the length of the value of a hash field", "hash", "key field"},
	{"hrandfield", hrandfield_command, -2, KC_READ, 1, 1, 1, NULL,
	 "Get one or more random fields of a hash", "hash", "key [count [WITHVALUES]]"},
};
const size_t hash_commands_count = sizeof(hash_commands) / sizeof(hash_commands[0]);
