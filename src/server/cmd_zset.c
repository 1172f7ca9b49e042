/*
 * cmd_zset.c - the sorted set commands of tips-server (ZADD, ZRANGE, ZRANGEBYSCORE,
 * ZRANGEBYLEX, ZPOPMIN, ...), with Redis 7's replies and error texts.
 *
 * Layout (docs/server.md): a sorted set is a meta record of type KS_ZSET whose hdr[0]
 * is the number of members, and two member keys per member under its generation:
 *   'm' member          -> score (8 bytes, ks_score_encode)   point lookups (ZSCORE)
 *   's' score:8 member  -> (empty)                            score order (ranges)
 * Invariants: a member's 'm' and 's' entries always agree (zs_set() and zs_remove()
 * write or delete both in the same transaction), and the count equals the members
 * (kc_store_count(); the command that removes the last member deletes the key).
 *
 * Ranges walk the 's' family forwards (there is no reverse scan): a reverse range is
 * the mirror of a forward window, found by rank from the member count, or by counting
 * the members of a score or lex range first. A lex range (BYLEX) walks from the lowest
 * score, which is Redis's order when all scores are equal, as BYLEX requires.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ks_collection.h"

#define ZS_MAX_MEMBER (KS_MAX_SUFFIX - 9)

/* ---- members ------------------------------------------------------------------------ */

static int member_key(struct ks_key *k, uint64_t gen, const void *member, size_t len)
{
	return ks_member_key(k, gen, "m", 1, member, len);
}

static int score_key(struct ks_key *k, uint64_t gen, double score, const void *member,
		     size_t len)
{
	unsigned char s[9];

	s[0] = 's';
	ks_score_encode(score, s + 1);
	return ks_member_key(k, gen, s, sizeof(s), member, len);
}

/* The score of @member: 1 (*@score set), 0 absent, -1 (error recorded or replied). */
static int zs_score(struct client *c, const struct ks_meta *m, const void *member,
		    size_t len, double *score)
{
	unsigned char v[16];
	struct ks_key k;
	size_t vlen;
	int r;

	if (member_key(&k, m->gen, member, len) < 0)
		return 0; /* too long to be stored, so absent */
	r = ks_get(c->txn, &k, v, sizeof(v), &vlen);
	if (r < 0)
		return -1;
	if (r == 1 && vlen != 8) {
		add_reply_error(c, "ERR damaged sorted set member (score is not 8 bytes)");
		return -1;
	}
	if (r == 1)
		*score = ks_score_decode(v);
	return r;
}

/* Give @member the score @score (replacing @old if @had). Return: 0 or < 0. */
static int zs_set(struct ks_txn *t, const struct ks_meta *m, const void *member, size_t len,
		  int had, double old, double score)
{
	unsigned char enc[8];
	struct ks_key k;

	if (had && old == score)
		return 0;
	if (had && (score_key(&k, m->gen, old, member, len) < 0 || ks_del(t, &k) < 0))
		return -1;
	ks_score_encode(score, enc);
	if (score_key(&k, m->gen, score, member, len) < 0 || ks_put(t, &k, NULL, 0) < 0 ||
	    member_key(&k, m->gen, member, len) < 0 || ks_put(t, &k, enc, sizeof(enc)) < 0)
		return -1;
	return 0;
}

/* Delete both entries of @member (score @score). Return: 0 or < 0. */
static int zs_remove(struct ks_txn *t, const struct ks_meta *m, const void *member,
		     size_t len, double score)
{
	struct ks_key k;

	if (score_key(&k, m->gen, score, member, len) < 0 || ks_del(t, &k) < 0 ||
	    member_key(&k, m->gen, member, len) < 0 || ks_del(t, &k) < 0)
		return -1;
	return 0;
}

/* The sorted set at argv[1] for writing: existing (1), a new empty one (0), -1. */
static int zset_for_write(struct client *c, struct ks_meta *m)
{
	int r = lookup_typed(c, &c->argv[1], KS_ZSET, m);

	if (r != 0)
		return r;
	return kc_create(c->txn, KS_ZSET, m) < 0 ? -1 : 0;
}

/* ---- walks over the score order ----------------------------------------------------- */

struct zs_range {
	double min, max;
	int minex, maxex;   /* exclusive bounds: "(" */
};

/* One bound of a lexicographic range: "-", "+", "[member" or "(member". */
enum lex_kind { LEX_MIN, LEX_MAX, LEX_INCL, LEX_EXCL };
struct zs_lex_bound {
	enum lex_kind kind;
	const char *p;
	size_t len;
};
struct zs_lex {
	struct zs_lex_bound min, max;
};

/* Which members a walk passes: a score range, a lexicographic range, or all. */
struct zs_filter {
	const struct zs_range *score;
	const struct zs_lex *lex;
};

struct zs_walk {
	struct zs_filter f;
	int started;                  /* a lex walk reached its minimum */
	uint64_t skip, take;          /* copy the walk's positions [skip, skip + take) */
	uint64_t pos;                 /* members in range passed so far */
	struct kc_items *out;         /* NULL: only count */
	int err;
};

/* @member against lex bound @b: < 0, 0, > 0 (member order: bytes, then length). */
static int lex_cmp(const void *member, size_t len, const struct zs_lex_bound *b)
{
	int cmp;

	if (b->kind == LEX_MIN || b->kind == LEX_MAX)
		return b->kind == LEX_MIN ? 1 : -1;
	cmp = memcmp(member, b->p, len < b->len ? len : b->len);
	return cmp ? cmp : (len > b->len) - (len < b->len);
}

static int lex_above_min(const void *member, size_t len, const struct zs_lex_bound *b)
{
	int cmp = lex_cmp(member, len, b);

	return b->kind == LEX_EXCL ? cmp > 0 : cmp >= 0;
}

static int lex_below_max(const void *member, size_t len, const struct zs_lex_bound *b)
{
	int cmp = lex_cmp(member, len, b);

	return b->kind == LEX_EXCL ? cmp < 0 : cmp <= 0;
}

/* 1 if the walk passes the member (*@stop: the range is over). A lex walk, as Redis's
 * skip list, starts at the first member at or above its minimum and ends at the first
 * one above its maximum (exact when the scores are equal, as BYLEX expects). */
static int zs_in_range(struct zs_walk *w, double score, const void *member, size_t len,
		       int *stop)
{
	const struct zs_range *r = w->f.score;
	const struct zs_lex *x = w->f.lex;

	*stop = 0;
	if (r && (score < r->min || (r->minex && score == r->min)))
		return 0;
	if (r && (score > r->max || (r->maxex && score == r->max)))
		return !(*stop = 1);
	if (x && !w->started && !lex_above_min(member, len, &x->min))
		return 0;
	w->started = 1;
	if (x && !lex_below_max(member, len, &x->max))
		return !(*stop = 1);
	return 1;
}

static int zs_walk_one(const void *suffix, size_t slen, const void *val, size_t vlen,
		       void *arg)
{
	const unsigned char *s = suffix;
	struct zs_walk *w = arg;
	double score;
	int stop;

	(void)val;
	(void)vlen;
	if (slen < 9 || s[0] != 's')
		return 1;
	score = ks_score_decode(s + 1);
	if (!zs_in_range(w, score, s + 9, slen - 9, &stop))
		return stop;
	if (w->pos++ < w->skip || !w->out)
		return 0;
	w->err = kc_items_push(w->out, s + 9, slen - 9, NULL, 0, score);
	return w->err || w->out->n >= w->take;
}

/* Walk the members (those @w->f passes) in score order; see struct zs_walk. */
static int zs_walk(struct ks_txn *t, const struct ks_meta *m, struct zs_walk *w)
{
	unsigned char from[9];
	int r;

	if (w->out && w->take == 0)
		return 0;
	from[0] = 's';
	if (w->f.score)
		ks_score_encode(w->f.score->min, from + 1);
	r = kc_scan(t, m->gen, from, w->f.score ? sizeof(from) : 1, zs_walk_one, w);
	return r < 0 ? r : w->err;
}

/* Copy @take members from forward position @skip of those @f passes into @out. */
static int zs_window(struct ks_txn *t, const struct ks_meta *m, struct zs_filter f,
		     uint64_t skip, uint64_t take, struct kc_items *out)
{
	struct zs_walk w = {.f = f, .skip = skip, .take = take, .out = out};

	kc_items_init(out, t);
	return zs_walk(t, m, &w);
}

/* The number of members @f passes: >= 0, or < 0 on error. */
static long long zs_count(struct ks_txn *t, const struct ks_meta *m, struct zs_filter f)
{
	struct zs_walk w = {.f = f};
	int err = zs_walk(t, m, &w);

	return err < 0 ? err : (long long)w.pos;
}

static void reply_items(struct client *c, const struct kc_items *l, int reverse,
			int withscores)
{
	add_reply_array(c, (long long)l->n * (withscores ? 2 : 1));
	for (size_t i = 0; i < l->n; i++) {
		const struct kc_item *it = &l->v[reverse ? l->n - 1 - i : i];

		add_reply_bulk(c, it->a, it->alen);
		if (withscores)
			add_reply_double(c, it->score);
	}
}

/* ---- writes ------------------------------------------------------------------------- */

enum { ZADD_NX = 1, ZADD_XX = 2, ZADD_GT = 4, ZADD_LT = 8, ZADD_CH = 16, ZADD_INCR = 32 };

/* The ZADD options from argv[2]: the flags, and *@first the index of the first score.
 * Return: 0, or -1 after replying. */
static int zadd_options(struct client *c, unsigned *flags, int *first)
{
	static const struct {
		const char *word;
		unsigned flag;
	} words[] = {{"nx", ZADD_NX}, {"xx", ZADD_XX}, {"gt", ZADD_GT},
		     {"lt", ZADD_LT}, {"ch", ZADD_CH}, {"incr", ZADD_INCR}};
	int i = 2, elements;

	*flags = 0;
	for (; i < c->argc; i++) {
		size_t w = 0;

		while (w < sizeof(words) / sizeof(words[0]) && !arg_is(&c->argv[i], words[w].word))
			w++;
		if (w == sizeof(words) / sizeof(words[0]))
			break;
		*flags |= words[w].flag;
	}
	elements = c->argc - i;
	if (elements == 0 || elements % 2) {
		add_reply_error(c, ERR_SYNTAX);
		return -1;
	}
	if ((*flags & ZADD_NX) && (*flags & ZADD_XX)) {
		add_reply_error(c, "ERR XX and NX options at the same time are not compatible");
		return -1;
	}
	if (((*flags & ZADD_NX) && (*flags & (ZADD_GT | ZADD_LT))) ||
	    ((*flags & ZADD_GT) && (*flags & ZADD_LT))) {
		add_reply_error(c,
				"ERR GT, LT, and/or NX options at the same time are not compatible");
		return -1;
	}
	if ((*flags & ZADD_INCR) && elements > 2) {
		add_reply_error(c, "ERR INCR option supports a single increment-element pair");
		return -1;
	}
	*first = i;
	return 0;
}

/* Every score of argv[first..] (pairs) parses and every member fits; else replied. */
static int zadd_check(struct client *c, int first)
{
	double score = 0;

	for (int i = first; i < c->argc; i += 2)
		if (get_double_or_reply(c, &c->argv[i], &score) < 0)
			return -1;
	for (int i = first + 1; i < c->argc; i += 2)
		if (kc_check_size(c, &c->argv[i], ZS_MAX_MEMBER) < 0)
			return -1;
	return 0;
}

struct zadd_tally {
	uint64_t added, updated, processed;
	double score;       /* the last member's score (INCR's reply) */
};

/* Apply one score/member pair of ZADD with @flags. Return: 0, or -1 (replied or
 * recorded). */
static int zadd_one(struct client *c, const struct ks_meta *m, unsigned flags, double score,
		    const struct arg *member, struct zadd_tally *t)
{
	double cur = 0;
	int had = zs_score(c, m, member->ptr, member->len, &cur);

	if (had < 0)
		return -1;
	if ((had && (flags & ZADD_NX)) || (!had && (flags & ZADD_XX)))
		return 0;
	if (had && (flags & ZADD_INCR)) {
		score += cur;
		if (isnan(score)) {
			add_reply_error(c, "ERR resulting score is not a number (NaN)");
			return -1;
		}
	}
	if (had && (((flags & ZADD_LT) && score >= cur) || ((flags & ZADD_GT) && score <= cur)))
		return 0;
	if (zs_set(c->txn, m, member->ptr, member->len, had, cur, score) < 0)
		return -1;
	t->processed++;
	t->added += !had;
	t->updated += had && score != cur;
	t->score = score;
	return 0;
}

static void zadd_command(struct client *c)
{
	struct zadd_tally t = {0};
	struct ks_meta m;
	unsigned flags;
	int first, r;

	if (zadd_options(c, &flags, &first) < 0 || zadd_check(c, first) < 0)
		return;
	r = lookup_typed(c, &c->argv[1], KS_ZSET, &m);
	if (r < 0)
		return;
	if (r == 1 || !(flags & ZADD_XX)) {
		if (r == 0 && kc_create(c->txn, KS_ZSET, &m) < 0)
			return;
		for (int i = first; i < c->argc; i += 2) {
			double score;

			arg_to_double(&c->argv[i], &score);
			if (zadd_one(c, &m, flags, score, &c->argv[i + 1], &t) < 0)
				return;
		}
		if (t.added && kc_store_count(c->txn, &c->argv[1], &m, m.hdr[0] + t.added) < 0)
			return;
	}
	if (!(flags & ZADD_INCR))
		add_reply_int(c, (long long)(t.added + ((flags & ZADD_CH) ? t.updated : 0)));
	else if (t.processed)
		add_reply_double(c, t.score);
	else
		add_reply_nil(c);
}

static void zincrby_command(struct client *c)
{
	struct ks_meta m;
	double incr, cur = 0;
	int had;

	if (get_double_or_reply(c, &c->argv[2], &incr) < 0 ||
	    kc_check_size(c, &c->argv[3], ZS_MAX_MEMBER) < 0 ||
	    zset_for_write(c, &m) < 0)
		return;
	had = zs_score(c, &m, c->argv[3].ptr, c->argv[3].len, &cur);
	if (had < 0)
		return;
	incr += cur;
	if (isnan(incr)) {
		add_reply_error(c, "ERR resulting score is not a number (NaN)");
		return;
	}
	if (zs_set(c->txn, &m, c->argv[3].ptr, c->argv[3].len, had, cur, incr) < 0 ||
	    (!had && kc_store_count(c->txn, &c->argv[1], &m, m.hdr[0] + 1) < 0))
		return;
	add_reply_double(c, incr);
}

static void zrem_command(struct client *c)
{
	struct ks_meta m;
	uint64_t removed = 0;
	int r = lookup_typed(c, &c->argv[1], KS_ZSET, &m);

	if (r <= 0) {
		if (r == 0)
			add_reply_int(c, 0);
		return;
	}
	for (int i = 2; i < c->argc; i++) {
		double score = 0;

		r = zs_score(c, &m, c->argv[i].ptr, c->argv[i].len, &score);
		if (r < 0)
			return;
		if (r == 1) {
			if (zs_remove(c->txn, &m, c->argv[i].ptr, c->argv[i].len, score) < 0)
				return;
			removed++;
		}
	}
	if (removed && kc_store_count(c->txn, &c->argv[1], &m, m.hdr[0] - removed) < 0)
		return;
	add_reply_int(c, (long long)removed);
}

/* ZPOPMIN / ZPOPMAX key [count]: the lowest (highest) members with their scores. */
static void zpop_generic(struct client *c, int max)
{
	struct ks_meta m;
	struct kc_items l;
	long long count = 1;
	uint64_t n;

	if (c->argc > 3) {
		add_reply_error(c, ERR_SYNTAX);
		return;
	}
	if (c->argc == 3 && kc_parse_pop_count(c, &c->argv[2], &count) < 0)
		return;
	if (kc_lookup_scan(c, KS_ZSET, &m, KC_ABSENT_EMPTY, count != 0) != 1)
		return;
	n = (uint64_t)count < m.hdr[0] ? (uint64_t)count : m.hdr[0];
	if (zs_window(c->txn, &m, (struct zs_filter){0}, max ? m.hdr[0] - n : 0, n, &l) < 0)
		return;
	if (l.n < m.hdr[0]) {
		for (size_t i = 0; i < l.n; i++)
			if (zs_remove(c->txn, &m, l.v[i].a, l.v[i].alen, l.v[i].score) < 0)
				return;
	}
	if (kc_store_count(c->txn, &c->argv[1], &m, m.hdr[0] - l.n) < 0)
		return;
	reply_items(c, &l, max, 1);
}

static void zpopmin_command(struct client *c)
{
	zpop_generic(c, 0);
}

static void zpopmax_command(struct client *c)
{
	zpop_generic(c, 1);
}

/* ---- reads -------------------------------------------------------------------------- */

static void zscore_command(struct client *c)
{
	struct ks_meta m;
	double score = 0;
	int r = lookup_typed(c, &c->argv[1], KS_ZSET, &m);

	if (r == 1)
		r = zs_score(c, &m, c->argv[2].ptr, c->argv[2].len, &score);
	if (r == 1)
		add_reply_double(c, score);
	else if (r == 0)
		add_reply_nil(c);
}

static void zcard_command(struct client *c)
{
	kc_reply_card(c, KS_ZSET);
}

/* Counts the 's' entries before the target suffix (a member's rank). */
struct zs_rank {
	const unsigned char *target;
	size_t tlen;
	uint64_t rank;
};

static int zs_rank_one(const void *suffix, size_t slen, const void *val, size_t vlen,
		       void *arg)
{
	struct zs_rank *z = arg;
	size_t n = slen < z->tlen ? slen : z->tlen;
	int cmp = memcmp(suffix, z->target, n);

	(void)val;
	(void)vlen;
	if (cmp > 0 || (cmp == 0 && slen >= z->tlen))
		return 1;
	z->rank++;
	return 0;
}

/* ZRANK / ZREVRANK key member. */
static void zrank_generic(struct client *c, int reverse)
{
	struct ks_meta m;
	struct ks_key k;
	struct zs_rank z = {0};
	double score = 0;
	int r;

	r = lookup_typed(c, &c->argv[1], KS_ZSET, &m);
	if (r == 1)
		r = zs_score(c, &m, c->argv[2].ptr, c->argv[2].len, &score);
	if (r < 0)
		return;
	if (r == 0) {
		add_reply_nil(c);
		return;
	}
	if (!need_ordered(c))
		return;
	score_key(&k, m.gen, score, c->argv[2].ptr, c->argv[2].len);
	z.target = k.b + KS_MEMBER_KEY_PREFIX;
	z.tlen = k.len - KS_MEMBER_KEY_PREFIX;
	if (kc_scan(c->txn, m.gen, "s", 1, zs_rank_one, &z) < 0)
		return;
	add_reply_int(c, (long long)(reverse ? m.hdr[0] - 1 - z.rank : z.rank));
}

static void zrank_command(struct client *c)
{
	zrank_generic(c, 0);
}

static void zrevrank_command(struct client *c)
{
	zrank_generic(c, 1);
}

/* One bound of a score range as Redis reads it: "(" for exclusive, then all that
 * strtod() takes (so "inf", "-inf", " 1" and "" too), never NaN. Return: 0 or -1. */
static int parse_bound(struct client *c, const struct arg *a, double *v, int *ex)
{
	char *text = ks_scratch(c->txn, a->len + 1);
	char *p, *end;

	if (!text)
		return -1;
	memcpy(text, a->ptr, a->len);
	text[a->len] = '\0';
	p = text;
	*ex = p[0] == '(';
	p += *ex;
	*v = strtod(p, &end);
	return *end != '\0' || isnan(*v) ? -1 : 0;
}

/* The score range of argv[@min], argv[@max]; -1 after replying. */
static int parse_range(struct client *c, int min, int max, struct zs_range *r)
{
	if (parse_bound(c, &c->argv[min], &r->min, &r->minex) < 0 ||
	    parse_bound(c, &c->argv[max], &r->max, &r->maxex) < 0) {
		add_reply_error(c, "ERR min or max is not a float");
		return -1;
	}
	return 0;
}

/* One bound of a lex range: "-", "+", "[member" or "(member". Return: 0 or -1. */
static int parse_lex_bound(const struct arg *a, struct zs_lex_bound *b)
{
	if (a->len == 1 && (a->ptr[0] == '-' || a->ptr[0] == '+')) {
		b->kind = a->ptr[0] == '-' ? LEX_MIN : LEX_MAX;
		return 0;
	}
	if (a->len == 0 || (a->ptr[0] != '[' && a->ptr[0] != '('))
		return -1;
	b->kind = a->ptr[0] == '[' ? LEX_INCL : LEX_EXCL;
	b->p = a->ptr + 1;
	b->len = a->len - 1;
	return 0;
}

/* The lex range of argv[@min], argv[@max]; -1 after replying. */
static int parse_lex_range(struct client *c, int min, int max, struct zs_lex *x)
{
	if (parse_lex_bound(&c->argv[min], &x->min) < 0 ||
	    parse_lex_bound(&c->argv[max], &x->max) < 0) {
		add_reply_error(c, "ERR min or max not valid string range item");
		return -1;
	}
	return 0;
}

/* ZCOUNT / ZLEXCOUNT: the members of a score (lex) range. */
static void zcount_generic(struct client *c, int lex)
{
	struct zs_range range;
	struct zs_lex x;
	struct zs_filter f = {0};
	struct ks_meta m;
	long long n;

	if (lex ? parse_lex_range(c, 2, 3, &x) : parse_range(c, 2, 3, &range))
		return;
	if (lex)
		f.lex = &x;
	else
		f.score = &range;
	if (kc_lookup_scan(c, KS_ZSET, &m, KC_ABSENT_ZERO, 1) != 1)
		return;
	n = zs_count(c->txn, &m, f);
	if (n >= 0)
		add_reply_int(c, n);
}

static void zcount_command(struct client *c)
{
	zcount_generic(c, 0);
}

static void zlexcount_command(struct client *c)
{
	zcount_generic(c, 1);
}

/* ---- ZRANGE and its older forms ------------------------------------------------------ */

enum zrange_type { ZR_AUTO, ZR_RANK, ZR_SCORE, ZR_LEX };
enum zrange_dir { ZR_DIR_AUTO, ZR_FORWARD, ZR_REVERSE };

struct zrange_req {
	enum zrange_type type;
	enum zrange_dir dir;
	int withscores;
	long long offset, limit;   /* LIMIT; limit -1: none (as Redis, "LIMIT 0 -1" too) */
	long long start, stop;     /* by rank */
	struct zs_range range;     /* by score */
	struct zs_lex lex;         /* by lex */
};

/* The options after key, min and max. Return: 0, or -1 after replying. */
static int zrange_options(struct client *c, struct zrange_req *q)
{
	for (int j = 4; j < c->argc; j++) {
		const struct arg *a = &c->argv[j];

		if (arg_is(a, "withscores")) {
			q->withscores = 1;
		} else if (arg_is(a, "limit") && c->argc - j - 1 >= 2) {
			if (get_ll_or_reply(c, &c->argv[j + 1], &q->offset) < 0 ||
			    get_ll_or_reply(c, &c->argv[j + 2], &q->limit) < 0)
				return -1;
			j += 2;
		} else if (q->dir == ZR_DIR_AUTO && arg_is(a, "rev")) {
			q->dir = ZR_REVERSE;
		} else if (q->type == ZR_AUTO && arg_is(a, "bylex")) {
			q->type = ZR_LEX;
		} else if (q->type == ZR_AUTO && arg_is(a, "byscore")) {
			q->type = ZR_SCORE;
		} else {
			add_reply_error(c, ERR_SYNTAX);
			return -1;
		}
	}
	return 0;
}

/* Parse a ZRANGE-family request whose fixed type and direction are @type, @dir (AUTO:
 * chosen by the options). Return: 0, or -1 after replying. */
static int zrange_parse(struct client *c, struct zrange_req *q)
{
	int min = 2, max = 3;

	if (zrange_options(c, q) < 0)
		return -1;
	if (q->dir == ZR_DIR_AUTO)
		q->dir = ZR_FORWARD;
	if (q->type == ZR_AUTO)
		q->type = ZR_RANK;
	if (q->limit != -1 && q->type == ZR_RANK) {
		add_reply_error(c, "ERR syntax error, LIMIT is only supported in combination "
				   "with either BYSCORE or BYLEX");
		return -1;
	}
	if (q->withscores && q->type == ZR_LEX) {
		add_reply_error(c, "ERR syntax error, WITHSCORES not supported in combination "
				   "with BYLEX");
		return -1;
	}
	if (q->dir == ZR_REVERSE && q->type != ZR_RANK) {
		min = 3;
		max = 2;
	}
	if (q->type == ZR_SCORE)
		return parse_range(c, min, max, &q->range);
	if (q->type == ZR_LEX)
		return parse_lex_range(c, min, max, &q->lex);
	if (get_ll_or_reply(c, &c->argv[min], &q->start) < 0 ||
	    get_ll_or_reply(c, &c->argv[max], &q->stop) < 0)
		return -1;
	return 0;
}

/* Ranks start..stop (negative: from the end; reversed order if @q->dir). */
static void zrange_by_rank(struct client *c, const struct ks_meta *m,
			   const struct zrange_req *q)
{
	long long n = (long long)m->hdr[0], start = q->start, stop = q->stop;
	struct kc_items l;

	if (!kc_clip_range(n, &start, &stop)) {
		add_reply_array(c, 0);
		return;
	}
	/* A reverse rank r is the forward rank n - 1 - r. */
	if (zs_window(c->txn, m, (struct zs_filter){0},
		      (uint64_t)(q->dir == ZR_REVERSE ? n - 1 - stop : start),
		      (uint64_t)(stop - start + 1), &l) == 0)
		reply_items(c, &l, q->dir == ZR_REVERSE, q->withscores);
}

/* The members of the score or lex range, after LIMIT's offset and count. */
static void zrange_by_range(struct client *c, const struct ks_meta *m,
			    const struct zrange_req *q)
{
	uint64_t skip = (uint64_t)q->offset, take = q->limit < 0 ? UINT64_MAX : (uint64_t)q->limit;
	struct zs_filter f = {0};
	struct kc_items l;

	if (q->type == ZR_SCORE)
		f.score = &q->range;
	else
		f.lex = &q->lex;

	if (q->offset < 0) {
		add_reply_array(c, 0);
		return;
	}
	if (q->dir == ZR_REVERSE) {
		/* The reverse window [offset, offset + take) is the forward window ending
		 * offset members before the range's end. */
		long long total = zs_count(c->txn, m, f);

		if (total < 0)
			return;
		if (skip >= (uint64_t)total) {
			add_reply_array(c, 0);
			return;
		}
		if (take > (uint64_t)total - skip)
			take = (uint64_t)total - skip;
		skip = (uint64_t)total - skip - take;
	}
	if (zs_window(c->txn, m, f, skip, take, &l) == 0)
		reply_items(c, &l, q->dir == ZR_REVERSE, q->withscores);
}

static void zrange_generic(struct client *c, enum zrange_type type, enum zrange_dir dir)
{
	struct zrange_req q = {.type = type, .dir = dir, .limit = -1};
	struct ks_meta m;

	if (zrange_parse(c, &q) < 0 || kc_lookup_scan(c, KS_ZSET, &m, KC_ABSENT_EMPTY, 1) != 1)
		return;
	if (q.type == ZR_RANK)
		zrange_by_rank(c, &m, &q);
	else
		zrange_by_range(c, &m, &q);
}

static void zrange_command(struct client *c)
{
	zrange_generic(c, ZR_AUTO, ZR_DIR_AUTO);
}

static void zrevrange_command(struct client *c)
{
	zrange_generic(c, ZR_RANK, ZR_REVERSE);
}

static void zrangebyscore_command(struct client *c)
{
	zrange_generic(c, ZR_SCORE, ZR_FORWARD);
}

static void zrevrangebyscore_command(struct client *c)
{
	zrange_generic(c, ZR_SCORE, ZR_REVERSE);
}

static void zrangebylex_command(struct client *c)
{
	zrange_generic(c, ZR_LEX, ZR_FORWARD);
}

static void zrevrangebylex_command(struct client *c)
{
	zrange_generic(c, ZR_LEX, ZR_REVERSE);
}

/* ---- the table ---------------------------------------------------------------------- */

const struct command zset_commands[] = {
	{"zadd", zadd_command, -4, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Add members to a sorted set, or update their scores", "sorted-set", "key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]"},
	{"zincrby", zincrby_command, 4, KC_GROW_FAST, 1, 1, 1, NULL,
	 "Increment the score of a member of a sorted set", "sorted-set", "key increment member"},
	{"zrem", zrem_command, -3, KC_WRITE_FAST, 1, 1, 1, NULL,
	 "Remove one or more members of a sorted set", "sorted-set", "key member [member ...]"},
	{"zscore", zscore_command, 3, KC_READ_FAST, 1, 1, 1, NULL,
	 "Get the score of a member of a sorted set", "sorted-set", "key member"},
	{"zcard", zcard_command, 2, KC_READ_FAST, 1, 1, 1, NULL,
	 "Get the number of members of a sorted set", "sorted-set", "key"},
	{"zcount", zcount_command, 4, KC_READ_FAST, 1, 1, 1, NULL,
	 "Count the members of a sorted set within a score range", "sorted-set", "key min max"},
	{"zlexcount", zlexcount_command, 4, KC_READ_FAST, 1, 1, 1, NULL,
	 "Count the members of a sorted set within a lexicographical range", "sorted-set", "key min max"},
	{"zrank", zrank_command, 3, KC_READ_FAST, 1, 1, 1, NULL,
	 "Get the rank of a member of a sorted set, lowest score first", "sorted-set", "key member"},
	{"zrevrank", zrevrank_command, 3, KC_READ_FAST, 1, 1, 1, NULL,
	 "Get the rank of a member of a sorted set, highest score first", "sorted-set", "key member"},
	{"zrange", zrange_command, -4, KC_READ, 1, 1, 1, NULL,
	 "Get a range of members of a sorted set by rank or score", "sorted-set", "key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]"},
	{"zrevrange", zrevrange_command, -4, KC_READ, 1, 1, 1, NULL,
	 "Get a range of members of a sorted set by rank, highest score first", "sorted-set", "key start stop [WITHSCORES]"},
	{"zrangebyscore", zrangebyscore_command, -4, KC_READ, 1, 1, 1, NULL,
	 "Get the members of a sorted set within a score range", "sorted-set", "key min max [WITHSCORES] [LIMIT offset count]"},
	{"zrevrangebyscore", zrevrangebyscore_command, -4, KC_READ, 1, 1, 1, NULL,
	 "Get the members of a sorted set within a score range, highest first", "sorted-set", "key max min [WITHSCORES] [LIMIT offset count]"},
	{"zrangebylex", zrangebylex_command, -4, KC_READ, 1, 1, 1, NULL,
	 "Get the members of a sorted set within a lexicographical range", "sorted-set", "key min max [LIMIT offset count]"},
	{"zrevrangebylex", zrevrangebylex_command, -4, KC_READ, 1, 1, 1, NULL,
	 "Get the members of a sorted set within a lexicographical range, highest first",
	 "sorted-set", "key max min [LIMIT offset count]"},
	{"zpopmin", zpopmin_command, -2, KC_WRITE_FAST, 1, 1, 1, NULL,
	 "Remove and return the members with the lowest scores", "sorted-set", "key [count]"},
	{"zpopmax", zpopmax_command, -2, KC_WRITE_FAST, 1, 1, 1, NULL,
	 "Remove and return the members with the highest scores", "sorted-set", "key [count]"},
};
const size_t zset_commands_count = sizeof(zset_commands) / sizeof(zset_commands[0]);
