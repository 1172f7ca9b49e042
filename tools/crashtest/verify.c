/*
 * verify.c - the verifier child: recovers the pool, checks block ownership and the
 * heap before anything else touches the index, looks up every key and scans the whole
 * index, and hands what it found to the parent through the shared mapping.
 * Invariant: a bad block is counted once over the campaign (the known lists the parent
 * keeps); every lookup and the scan are compared, so a key the scan misses or invents
 * is a violation.
 */
#define _GNU_SOURCE
#include "crashtest.h"

/* ---- the verifier child ---------------------------------------------------------------- */

void addr_push(struct addr_list *l, uint64_t a)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			_exit(CHILD_CHECK_FAILED);
	}
	l->v[l->n++] = a;
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static bool addr_find(const struct addr_list *l, uint64_t a, size_t *at)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->v[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return lo < l->n && l->v[lo] == a;
}

struct ownership_check {
	struct shared *sh;
	uint64_t crash;
	const struct known_bad *known;
	unsigned details;
};

/* One problem block from the store's check (tips_db_check, pmdk_hash_check); a block in
 * the known lists was counted by an earlier check and is not counted again. */
static void ownership_problem(enum tips_block_problem what, uint64_t a, size_t size,
			      void *arg)
{
	struct ownership_check *c = arg;
	struct shared *sh = c->sh;
	size_t k;
	const char *why;
	if (what == TIPS_BLOCK_LEAKED) {
		if (addr_find(&c->known->leaks, a, &k))
			return;
		if (sh->n_new_leaks < MAX_NEW_BLOCKS)
			sh->new_leaks[sh->n_new_leaks++] = a;
		sh->leaked++;
		why = "leaked: allocated, owned by nobody";
	} else if (what == TIPS_BLOCK_FREE_BUT_OWNED) {
		if (addr_find(&c->known->free_owned, a, &k))
			return;
		if (sh->n_new_unowned_free < MAX_NEW_BLOCKS)
			sh->new_unowned_free[sh->n_new_unowned_free++] = a;
		sh->double_free++;
		why = "double_free: owned by the database, free in the heap";
	} else {
		sh->double_free++;
		why = "double_free: owned twice by the database";
	}
	if (c->details++ < MAX_DETAILS)
		fprintf(stderr, "crash %llu: %s: block %#llx (%zu bytes)\n",
			(unsigned long long)c->crash, why, (unsigned long long)a, size);
}

/* Heap blocks against owned blocks, and the heap's own check; counts into @sh. */
static void check_ownership(struct bench_index *db, struct shared *sh,
			    uint64_t crash, const struct known_bad *known)
{
	struct ownership_check c = { sh, crash, known, 0 };
	struct bench_check_report rep;
	int rc = bench_index_check(db, ownership_problem, &c, &rep);
	if (rc && rc != TIPS_ECORRUPT) {
		fprintf(stderr, "crash %llu: ownership check: %s\n", (unsigned long long)crash,
			tips_errormsg());
		_exit(CHILD_CHECK_FAILED);
	}
	sh->heap_blocks = rep.allocated;
	sh->owned_blocks = rep.owned;
	if (c.details > MAX_DETAILS)
		fprintf(stderr, "crash %llu: ... %u more ownership violation(s)\n",
			(unsigned long long)crash, c.details - MAX_DETAILS);
	if (rep.heap_errors) {
		fprintf(stderr, "crash %llu: double_free: the heap check found %llu error(s), "
			"first: %s\n", (unsigned long long)crash, (unsigned long long)rep.heap_errors,
			rep.first_error);
		sh->double_free += rep.heap_errors;
	}
}

struct scan_state {
	struct shared *sh;
	uint64_t keys, crash, seen;
	unsigned char *returned; /* [keys] */
	unsigned details;
};

static int scan_visit(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct scan_state *s = arg;
	s->seen++;
	uint64_t k = klen == 8 ? key_decode(key) : UINT64_MAX;
	if (klen != 8 || k >= s->keys) {
		if (s->details++ < MAX_DETAILS)
			fprintf(stderr, "crash %llu: phantom: the scan returned a key of %zu bytes "
				"(%#llx as 8 bytes), outside [0, %llu)\n",
				(unsigned long long)s->crash, klen,
				(unsigned long long)(klen == 8 ? k : 0), (unsigned long long)s->keys);
		s->sh->scan_phantom++;
		return 0;
	}
	const struct found_key *f = &s->sh->found[k];
	if (s->returned[k]++) {
		if (s->details++ < MAX_DETAILS)
			fprintf(stderr, "crash %llu: phantom: the scan returned key %llu twice\n",
				(unsigned long long)s->crash, (unsigned long long)k);
		s->sh->scan_phantom++;
	} else if (f->rc != 0 || f->vlen != vlen ||
		   memcmp(f->val, val, vlen < VAL_MAX ? vlen : VAL_MAX) != 0) {
		if (s->details++ < MAX_DETAILS)
			fprintf(stderr, "crash %llu: phantom: key %llu: the scan returned a value "
				"of %zu bytes the lookup %s\n", (unsigned long long)s->crash,
				(unsigned long long)k, vlen,
				f->rc ? "does not find" : "returns otherwise");
		s->sh->scan_phantom++;
	}
	return 0;
}

/* Recovers the pool, checks ownership, reads every key; never returns. */
void child_verify(const struct options *o, struct shared *sh, uint64_t crash,
			 const struct known_bad *known)
{
	struct bench_index db;
	double t0 = now_ms();
	int rc = store_open(o, false, NULL, &db);
	sh->open_ms = now_ms() - t0;
	sh->open_rc = rc;
	if (rc) {
		fprintf(stderr, "crash %llu: recovery failed: open %s: %s (%s)\n",
			(unsigned long long)crash, o->pool, tips_strerror(rc), tips_errormsg());
		_exit(CHILD_OPEN_FAILED);
	}
	struct bench_store_stats stats;
	bench_index_stats(&db, &stats);
	sh->stats_recovery_ms = stats.recovery_ms;
	sh->recovered = stats.recovered;
	check_ownership(&db, sh, crash, known); /* before anything else touches the index */
	for (uint64_t k = 0; k < o->keys; k++) {
		unsigned char kb[8];
		key_encode(k, kb);
		struct found_key *f = &sh->found[k];
		size_t vlen = 0;
		unsigned char buf[TIPS_MAX_VALUE < 4096 ? TIPS_MAX_VALUE : 4096];
		/* a value longer than the buffer is found (0, vlen its length): still a
		 * (wrong) value */
		f->rc = bench_lookup(&db, kb, 8, buf, sizeof(buf), &vlen);
		if (f->rc == 0 && !value_tail_ok(buf, (uint32_t)vlen)) {
			fprintf(stderr, "crash %llu: key %llu: a value of %zu bytes whose bytes "
				"after the first %u are not the ones written (a torn record "
				"replayed?)\n", (unsigned long long)crash,
				(unsigned long long)k, vlen, LARGE_VALUE_HEAD);
			f->rc = TIPS_ECORRUPT; /* the campaign fails on it */
		}
		f->vlen = f->rc == 0 ? (uint32_t)vlen : 0;
		memset(f->val, 0, VAL_MAX);
		if (f->rc == 0)
			memcpy(f->val, buf, vlen < VAL_MAX ? vlen : VAL_MAX);
	}
	struct scan_state s = { sh, o->keys, crash, 0, calloc(o->keys, 1), 0 };
	if (!s.returned)
		_exit(CHILD_CHECK_FAILED);
	long n = bench_scan_each(&db, NULL, 0, (size_t)o->keys * 2 + 1024, scan_visit, &s);
	if (n < 0) {
		fprintf(stderr, "crash %llu: scan: %s (%s)\n", (unsigned long long)crash,
			tips_strerror((int)n), tips_errormsg());
		_exit(CHILD_CHECK_FAILED);
	}
	for (uint64_t k = 0; k < o->keys; k++)
		if (sh->found[k].rc == 0 && !s.returned[k]) {
			if (s.details++ < MAX_DETAILS)
				fprintf(stderr, "crash %llu: lost: key %llu is found by lookup but "
					"not by the scan\n", (unsigned long long)crash,
					(unsigned long long)k);
			sh->scan_lost++;
		}
	free(s.returned);
	if (bench_index_close(&db) != 0)
		_exit(CHILD_CLOSE_FAILED);
	if ((rc = bench_index_check_closed(&db)) != 0) {
		if (rc != TIPS_ECORRUPT) {
			fprintf(stderr, "crash %llu: pool check: %s\n", (unsigned long long)crash,
				tips_errormsg());
			_exit(CHILD_CHECK_FAILED);
		}
		fprintf(stderr, "crash %llu: double_free: %s\n", (unsigned long long)crash,
			tips_errormsg());
		sh->double_free++;
	}
	_exit(CHILD_OK);
}

