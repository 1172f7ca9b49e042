/*
 * cmd_list.c - the list commands of tips-server (LPUSH, RPUSH, LPOP, RPOP, LRANGE, ...),
 * with Redis 7's replies and error texts.
 *
 * Layout (docs/server.md): a list is a meta record of type KS_LIST with hdr[0] = the
 * number of elements and hdr[1] = the index of the first one (int64), and one member
 * key 'c' gen index:8 -> element per element. Invariant: the elements occupy exactly
 * the indexes first .. first+count-1; LPUSH writes first-1, RPUSH first+count, pops take
 * from either end, and the meta record changes in the same transaction as the elements
 * (kc_store_count()); the pop that takes the last element deletes the key.
 */
#include <stdint.h>

#include "ks_collection.h"

static int64_t list_first(const struct ks_meta *m)
{
	return (int64_t)m->hdr[1];
}

/* The member key of the element at absolute index @index. */
static void element_key(struct ks_key *k, const struct ks_meta *m, int64_t index)
{
	unsigned char enc[8];

	ks_index_encode(index, enc);
	ks_member_key(k, m->gen, enc, sizeof(enc), NULL, 0);
}

/* LPUSH, RPUSH, LPUSHX, RPUSHX: the new length, or 0 for a missing key with @existing. */
static void push_generic(struct client *c, int left, int existing)
{
	struct ks_meta m;
	int64_t first;
	uint64_t n;
	int r;

	for (int i = 2; i < c->argc; i++)
		if (kc_check_size(c, &c->argv[i], KS_MAX_MEMBER_VALUE) < 0)
			return;
	r = lookup_typed(c, &c->argv[1], KS_LIST, &m);
	if (r < 0)
		return;
	if (r == 0) {
		if (existing) {
			add_reply_int(c, 0);
			return;
		}
		if (kc_create(c->txn, KS_LIST, &m) < 0)
			return;
	}
	first = list_first(&m);
	n = m.hdr[0];
	for (int i = 2; i < c->argc; i++) {
		struct ks_key k;

		if (left)
			first--;
		element_key(&k, &m, left ? first : first + (int64_t)n);
		if (ks_put(c->txn, &k, c->argv[i].ptr, c->argv[i].len) < 0)
			return;
		n++;
	}
	m.hdr[1] = (uint64_t)first;
	if (kc_store_count(c->txn, &c->argv[1], &m, n) == 0)
		add_reply_int(c, (long long)n);
}

static void lpush_command(struct client *c)
{
	push_generic(c, 1, 0);
}

static void rpush_command(struct client *c)
{
	push_generic(c, 0, 0);
}

static void lpushx_command(struct client *c)
{
	push_generic(c, 1, 1);
}

static void rpushx_command(struct client *c)
{
	push_generic(c, 0, 1);
}

/* Remove @n elements from one end of @m, replying each (as an array if @as_array). */
static void pop_elements(struct client *c, struct ks_meta *m, uint64_t n, int left,
			 int as_array)
{
	int64_t first = list_first(m);
	int64_t last = first + (int64_t)m->hdr[0] - 1;
	void *buf = kc_value_buf(c->txn);
	uint64_t left_over = m->hdr[0] - n;

	if (!buf)
		return;
	if (as_array)
		add_reply_array(c, (long long)n);
	for (uint64_t i = 0; i < n; i++) {
		int64_t index = left ? first + (int64_t)i : last - (int64_t)i;
		struct ks_key k;
		size_t vlen;
		int r;

		element_key(&k, m, index);
		r = ks_get(c->txn, &k, buf, KS_MAX_MEMBER_VALUE, &vlen);
		if (r < 0)
			return;
		/* The key is deleted whole when the list empties: no element deletes then. */
		if (left_over && ks_del(c->txn, &k) < 0)
			return;
		if (r == 1)
			add_reply_bulk(c, buf, vlen);
		else
			add_reply_nil(c);
	}
	if (left)
		m->hdr[1] = (uint64_t)(first + (int64_t)n);
	kc_store_count(c->txn, &c->argv[1], m, left_over);
}

/* LPOP / RPOP key [count]. */
static void pop_generic(struct client *c, int left)
{
	struct ks_meta m;
	long long count = 1;
	int r;

	if (c->argc > 3) {
		kc_reply_wrong_args(c);
		return;
	}
	if (c->argc == 3 && kc_parse_pop_count(c, &c->argv[2], &count) < 0)
		return;
	r = lookup_typed(c, &c->argv[1], KS_LIST, &m);
	if (r < 0)
		return;
	if (r == 0) {
		if (c->argc == 3)
			add_reply_null_array(c);
		else
			add_reply_nil(c);
		return;
	}
	if (count == 0) {
		add_reply_array(c, 0);
		return;
	}
	if ((uint64_t)count > m.hdr[0])
		count = (long long)m.hdr[0];
	pop_elements(c, &m, (uint64_t)count, left, c->argc == 3);
}

static void lpop_command(struct client *c)
{
	pop_generic(c, 1);
}

static void rpop_command(struct client *c)
{
	pop_generic(c, 0);
}

static void llen_command(struct client *c)
{
	kc_reply_card(c, KS_LIST);
}

/* @index (negative: from the end) as an absolute index of @m, or -1 if outside. */
static int absolute_index(const struct ks_meta *m, long long index, int64_t *out)
{
	long long n = (long long)m->hdr[0];

	if (index < 0)
		index += n;
	if (index < 0 || index >= n)
		return -1;
	*out = list_first(m) + index;
	return 0;
}

static void lindex_command(struct client *c)
{
	struct ks_meta m;
	struct ks_key k;
	long long index;
	int64_t at;
	size_t vlen;
	void *buf;
	int r = lookup_typed(c, &c->argv[1], KS_LIST, &m);

	if (r < 0)
		return;
	if (r == 0) {
		add_reply_nil(c);
		return;
	}
	if (get_ll_or_reply(c, &c->argv[2], &index) < 0)
		return;
	if (absolute_index(&m, index, &at) < 0) {
		add_reply_nil(c);
		return;
	}
	buf = kc_value_buf(c->txn);
	if (!buf)
		return;
	element_key(&k, &m, at);
	r = ks_get(c->txn, &k, buf, KS_MAX_MEMBER_VALUE, &vlen);
	if (r == 1)
		add_reply_bulk(c, buf, vlen);
	else if (r == 0)
		add_reply_nil(c);
}

static void lset_command(struct client *c)
{
	struct ks_meta m;
	struct ks_key k;
	long long index;
	int64_t at;
	int r;

	if (kc_check_size(c, &c->argv[3], KS_MAX_MEMBER_VALUE) < 0)
		return;
	r = lookup_typed(c, &c->argv[1], KS_LIST, &m);
	if (r < 0)
		return;
	if (r == 0) {
		add_reply_error(c, ERR_NO_SUCH_KEY);
		return;
	}
	if (get_ll_or_reply(c, &c->argv[2], &index) < 0)
		return;
	if (absolute_index(&m, index, &at) < 0) {
		add_reply_error(c, "ERR index out of range");
		return;
	}
	element_key(&k, &m, at);
	if (ks_put(c->txn, &k, c->argv[3].ptr, c->argv[3].len) == 0)
		add_reply_ok(c);
}

struct range_emit {
	struct client *c;
	uint64_t want;   /* elements in the range */
	uint64_t left;   /* of which still to reply */
};

static int range_emit_one(const void *suffix, size_t slen, const void *val, size_t vlen,
			  void *arg)
{
	struct range_emit *e = arg;

	(void)suffix;
	(void)slen;
	add_reply_bulk(e->c, val, vlen);
	return --e->left == 0;
}

static void lrange_command(struct client *c)
{
	struct ks_meta m;
	long long start, stop;
	unsigned char from[8];
	struct range_emit e = {.c = c};
	void *handle;
	int r;

	if (get_ll_or_reply(c, &c->argv[2], &start) < 0 ||
	    get_ll_or_reply(c, &c->argv[3], &stop) < 0)
		return;
	r = lookup_typed(c, &c->argv[1], KS_LIST, &m);
	if (r <= 0) {
		if (r == 0)
			add_reply_array(c, 0);
		return;
	}
	if (!kc_clip_range((long long)m.hdr[0], &start, &stop)) {
		add_reply_array(c, 0);
		return;
	}
	if (!need_ordered(c))
		return;
	e.want = e.left = (uint64_t)(stop - start + 1);
	handle = add_reply_deferred(c);
	ks_index_encode(list_first(&m) + start, from);
	if (kc_scan(c->txn, m.gen, from, sizeof(from), range_emit_one, &e) == 0)
		set_deferred_array(c, handle, (long long)(e.want - e.left));
}

/* ---- the table ---------------------------------------------------------------------- */

const struct command list_commands[] = {
	{"lpush", lpush_command, -3, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Prepend one or more elements to a list", "list", "key element [element ...]"},
	{"rpush", rpush_command, -3, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Append one or more elements to a list", "list", "key element [element ...]"},
	{"lpushx", lpushx_command, -3, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Prepend elements to a list only if it exists", "list", "key element [element ...]"},
	{"rpushx", rpushx_command, -3, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Append elements to a list only if it exists", "list", "key element [element ...]"},
	{"lpop", lpop_command, -2, KC_WRITE_FAST, 1, 1, 1, NULL,
	 "Remove and return the first elements of a list", "list", "key [count]"},
	{"rpop", rpop_command, -2, KC_WRITE_FAST, 1, 1, 1, NULL,
	 "Remove and return the last elements of a list", "list", "key [count]"},
	{"llen", llen_command, 2, KC_READ_FAST, 1, 1, 1, NULL, "Get the length of a list", "list", "key"},
	{"lrange", lrange_command, 4, KC_READ, 1, 1, 1, NULL, "Get a range of elements of a list",
	 "list", "key start stop"},
	{"lindex", lindex_command, 3, KC_READ, 1, 1, 1, NULL, "Get an element of a list by its index",
	 "list", "key index"},
	{"lset", lset_command, 4, KC_GROW, 1, 1, 1, NULL, "Set the element at an index of a list",
	 "list", "key index element"},
};
const size_t list_commands_count = sizeof(list_commands) / sizeof(list_commands[0]);
