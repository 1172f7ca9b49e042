/*
 * ks_collection.c - the helpers the collection commands share (ks_collection.h):
 * creating a collection and storing its member count (deleting the key at 0), member
 * scans, copied member lists, random sampling, size checks and count arguments.
 *
 * Invariant: a collection's meta record is written only through kc_store_count(), with
 * the count the caller derived from the members it added and removed in the same
 * transaction; a count of 0 deletes the key (empty collections do not exist).
 */
#include "ks_collection.h"
#include "net.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <tips/errors.h>

int kc_create(struct ks_txn *t, int type, struct ks_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->type = (uint8_t)type;
	m->gen = ks_new_gen(t);
	if (m->gen == 0) {
		int err = ks_txn_error(t);
		return err < 0 ? err : TIPS_ENOMEM;
	}
	return 0;
}

int kc_store_count(struct ks_txn *t, const struct arg *key, struct ks_meta *m, uint64_t n)
{
	int r;

	m->hdr[0] = n;
	if (n == 0)
		r = ks_delete_key(t, key->ptr, key->len);
	else
		r = ks_write_meta(t, key->ptr, key->len, m);
	return r < 0 ? r : 0;
}

/* ---- scans ------------------------------------------------------------------------ */

int kc_scan(struct ks_txn *t, uint64_t gen, const void *from, size_t flen, ks_member_fn fn,
	    void *arg)
{
	long r = ks_scan_members(t, gen, from, flen, SIZE_MAX, fn, arg);

	return r < 0 ? (int)r : 0;
}

/* ---- copied members ----------------------------------------------------------------- */

void kc_items_init(struct kc_items *l, struct ks_txn *t)
{
	memset(l, 0, sizeof(*l));
	l->t = t;
}

static const char *kc_copy(struct ks_txn *t, const void *p, size_t len)
{
	char *d;

	if (len == 0)
		return "";
	d = ks_scratch(t, len);
	if (d)
		memcpy(d, p, len);
	return d;
}

int kc_items_push(struct kc_items *l, const void *a, size_t alen, const void *b, size_t blen,
		  double score)
{
	struct kc_item *it;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct kc_item *v = ks_scratch(l->t, cap * sizeof(*v));

		if (!v)
			return TIPS_ENOMEM;
		if (l->n)
			memcpy(v, l->v, l->n * sizeof(*v));
		l->v = v;
		l->cap = cap;
	}
	it = &l->v[l->n];
	it->a = kc_copy(l->t, a, alen);
	it->b = kc_copy(l->t, b, blen);
	if (!it->a || !it->b)
		return TIPS_ENOMEM;
	it->alen = alen;
	it->blen = blen;
	it->score = score;
	l->n++;
	return 0;
}

/* Put the items in a random order (Fisher-Yates). */
static void kc_items_shuffle(struct kc_items *l)
{
	for (size_t i = l->n; i > 1; i--) {
		size_t j = (size_t)kc_random_below(i);
		struct kc_item tmp = l->v[i - 1];

		l->v[i - 1] = l->v[j];
		l->v[j] = tmp;
	}
}

/* Selection sampling (Knuth's algorithm S): member i of total is taken with
 * probability (still wanted) / (still to see), so exactly `want` are taken. */
struct kc_sample_state {
	struct kc_items *out;
	uint64_t seen, total, want;
	int with_value;
	int err;
};

static int kc_sample_one(const void *suffix, size_t slen, const void *val, size_t vlen,
			 void *arg)
{
	struct kc_sample_state *st = arg;
	uint64_t left = st->total > st->seen ? st->total - st->seen : 1;
	uint64_t need = st->want - st->out->n;

	st->seen++;
	if (kc_random_below(left) < need) {
		st->err = kc_items_push(st->out, suffix, slen, st->with_value ? val : NULL,
					st->with_value ? vlen : 0, 0);
		if (st->err || st->out->n == st->want)
			return 1;
	}
	return 0;
}

int kc_sample(struct ks_txn *t, uint64_t gen, uint64_t total, uint64_t want, int with_value,
	      struct kc_items *out)
{
	struct kc_sample_state st = {.out = out, .total = total, .with_value = with_value};
	int r;

	st.want = want < total ? want : total;
	if (st.want == 0)
		return 0;
	r = kc_scan(t, gen, "", 0, kc_sample_one, &st);
	if (r < 0)
		return r;
	if (st.err)
		return st.err;
	kc_items_shuffle(out);
	return 0;
}

struct kc_collect_state {
	struct kc_items *out;
	int with_value;
	int err;
};

static int kc_collect_one(const void *suffix, size_t slen, const void *val, size_t vlen,
			  void *arg)
{
	struct kc_collect_state *st = arg;

	st->err = kc_items_push(st->out, suffix, slen, st->with_value ? val : NULL,
				st->with_value ? vlen : 0, 0);
	return st->err != 0;
}

int kc_collect(struct ks_txn *t, uint64_t gen, int with_value, struct kc_items *out)
{
	struct kc_collect_state st = {.out = out, .with_value = with_value};
	int r = kc_scan(t, gen, "", 0, kc_collect_one, &st);

	return r < 0 ? r : st.err;
}

int kc_clip_range(long long n, long long *start, long long *stop)
{
	if (*start < 0)
		*start = *start < -n ? 0 : *start + n;
	if (*stop < 0)
		*stop += n;
	if (*stop >= n)
		*stop = n - 1;
	return *start <= *stop;
}

/* ---- whole-collection replies ------------------------------------------------------ */

void kc_reply_card(struct client *c, int type)
{
	struct ks_meta m;
	int r = lookup_typed(c, &c->argv[1], type, &m);

	if (r >= 0)
		add_reply_int(c, r == 1 ? (long long)m.hdr[0] : 0);
}

struct kc_emit {
	struct client *c;
	int what;        /* KC_EMIT_MEMBER | KC_EMIT_VALUE */
	long long n;     /* replies added */
};

static int kc_emit_one(const void *suffix, size_t slen, const void *val, size_t vlen,
		       void *arg)
{
	struct kc_emit *e = arg;

	if (e->what & KC_EMIT_MEMBER) {
		add_reply_bulk(e->c, suffix, slen);
		e->n++;
	}
	if (e->what & KC_EMIT_VALUE) {
		add_reply_bulk(e->c, val, vlen);
		e->n++;
	}
	return 0;
}

int kc_lookup_scan(struct client *c, int type, struct ks_meta *m, enum kc_absent absent,
		   int scan)
{
	int r = lookup_typed(c, &c->argv[1], type, m);

	if (r < 0)
		return -1;
	if (r == 0 || !scan) {
		if (absent == KC_ABSENT_EMPTY)
			add_reply_array(c, 0);
		else if (absent == KC_ABSENT_NIL)
			add_reply_nil(c);
		else
			add_reply_int(c, 0);
		return 0;
	}
	return need_ordered(c) ? 1 : -1;
}

void kc_reply_all(struct client *c, int type, int what)
{
	struct kc_emit e = {.c = c, .what = what};
	struct ks_meta m;
	void *handle;

	if (kc_lookup_scan(c, type, &m, KC_ABSENT_EMPTY, 1) != 1)
		return;
	handle = add_reply_deferred(c);
	if (kc_scan(c->txn, m.gen, "", 0, kc_emit_one, &e) == 0)
		set_deferred_array(c, handle, e.n);
}

/* ---- random numbers ----------------------------------------------------------------- */

/* splitmix64, one state per thread, seeded from the time and the state's address. */
static uint64_t kc_random(void)
{
	static __thread uint64_t state;
	uint64_t z;

	if (state == 0)
		state = ((uint64_t)time(NULL) << 20) ^ (uint64_t)(uintptr_t)&state;
	state += 0x9e3779b97f4a7c15ULL;
	z = state;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t kc_random_below(uint64_t n)
{
	/* Rejection of the short last stretch keeps every value equally likely. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;

	do
		x = kc_random();
	while (x >= limit);
	return x % n;
}

/* ---- arguments ---------------------------------------------------------------------- */

int kc_check_size(struct client *c, const struct arg *a, size_t max)
{
	if (a->len <= max)
		return 0;
	reply_store_error(c, TIPS_ETOOBIG);
	return -1;
}

void kc_reply_wrong_args(struct client *c)
{
	add_reply_errorf(c, "ERR wrong number of arguments for '%s' command", c->cmd->name);
}

void *kc_value_buf(struct ks_txn *t)
{
	return ks_scratch(t, KS_MAX_MEMBER_VALUE);
}

int kc_parse_pop_count(struct client *c, const struct arg *a, long long *out)
{
	if (arg_to_ll(a, out) < 0 || *out < 0) {
		add_reply_error(c, "ERR value is out of range, must be positive");
		return -1;
	}
	return 0;
}

int kc_parse_rand_count(struct client *c, const struct arg *a, long long *out)
{
	if (get_ll_or_reply(c, a, out) < 0)
		return -1;
	if (*out == LLONG_MIN) {
		add_reply_error(c, "ERR value is out of range, value must between "
				   "-9223372036854775807 and 9223372036854775807");
		return -1;
	}
	return 0;
}
