/*
 * recover.c - ListDB's recovery (OSDI'22, §3.6, Algorithm 5): the log entries of tables
 * not yet wholly merged into L1 are parsed, sorted and linked into L0 tables again.
 *
 * Invariant: after ld_recover() every valid log entry with seq >= the MANIFEST's
 * merged_seq is reachable exactly once (in L1, where the interrupted compaction had
 * linked it, or in the rebuilt L0 table of its seq), or marked obsolete and counted in
 * its chunk; the L0 tables are sorted by ld_cmp_entries and linked oldest first.
 *
 * Speed. Open time is this rebuild, and it follows the L0 backlog (about 0.5M entries
 * after a second of puts). The entries lie in PM in log order, so every step that
 * reads them in key order misses the cache once per entry. So the parse, which reads
 * each entry while it streams the log, copies what the rest needs into a DRAM record
 * (24 bytes: the key's first 8 bytes as a big-endian word, the LSN, the entry's
 * address tagged with its flags and whether the key is 8 bytes long); the
 * sort (the records grouped by table in place, then a radix pass on the key words per
 * table through one buffer the size of the largest table, then insertion sorts of the
 * small buckets) and the duplicate pass read only the records, and the one pass that has to
 * touch every entry again (linking) prefetches ahead (docs/listdb.md, "Recovery").
 */
#define _GNU_SOURCE
#include "listdb/listdb_internal.h"

#include <stdlib.h>
#include <string.h>

#include "pm/pm.h"

/* What recovery needs of one parsed entry, in DRAM: 24 bytes, because the records'
 * array is fresh memory and its page faults are most of the parse's time. The entry's
 * address is 8-aligned (chunk headers and entries are multiples of 8 bytes), so its
 * low bits carry what the passes read of the entry's header. */
struct rec {
	uint64_t key8; /* ld_key8(): big-endian first 8 key bytes */
	uint64_t lsn;
	uintptr_t ref; /* the entry's address | REC_* */
};

#define REC_FLAGS 1u /* e->flags was not 0 at parse */
#define REC_IN_L1 2u /* e->flags had LD_F_IN_L1 */
#define REC_KEY8 4u  /* e->klen == 8: key8 is the whole key */
#define REC_TAGS 7u
_Static_assert(LD_CHUNK_HDR % 8 == 0 && sizeof(struct ld_entry) % 8 == 0,
	       "entries must be 8-aligned to tag their address");
_Static_assert(sizeof(struct rec) == 24, "a record is 24 bytes");

static inline struct ld_entry *rec_entry(const struct rec *r)
{
	return (struct ld_entry *)(r->ref & ~(uintptr_t)REC_TAGS);
}

struct recovered {
	struct rec *v;
	size_t n, cap;
	uint64_t merged, max_seq;
	bool oom;
};

static void collect_entry(struct ld_chunk *c, struct ld_entry *e, void *arg)
{
	struct recovered *r = arg;
	uint64_t seq = LD_SEQ(e->lsn);
	if (seq > atomic_load(&c->max_seq))
		atomic_store(&c->max_seq, seq);
	if (seq > r->max_seq)
		r->max_seq = seq;
	if (seq < r->merged) {
		if (ld_obsolete(e))
			atomic_fetch_add(&c->obsolete, 1);
		return;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4096;
		struct rec *v = realloc(r->v, cap * sizeof(*v));
		if (!v) {
			r->oom = true;
			return;
		}
		r->v = v;
		r->cap = cap;
	}
	uint8_t flags = atomic_load(&e->flags);
	r->v[r->n++] = (struct rec){
		.key8 = ld_key8(ld_key(e), e->klen),
		.lsn = e->lsn,
		.ref = (uintptr_t)e | (flags ? REC_FLAGS : 0) | (flags & LD_F_IN_L1 ? REC_IN_L1 : 0) |
		       (e->klen == 8 ? REC_KEY8 : 0),
	};
}

/* <0, 0, >0: the keys of @a and @b in ld_keycmp order, reading PM only when the first
 * 8 bytes are equal and the keys are not both exactly 8 bytes long. */
static inline int rec_keycmp(const struct rec *a, const struct rec *b)
{
	if (a->key8 != b->key8)
		return a->key8 < b->key8 ? -1 : 1;
	if (a->ref & b->ref & REC_KEY8)
		return 0;
	const struct ld_entry *x = rec_entry(a), *y = rec_entry(b);
	return ld_keycmp(ld_key(x), x->klen, ld_key(y), y->klen);
}

/* Recovery order: seq ascending, then ld_cmp_entries (key ascending, LSN descending),
 * then address (WAL twins share an LSN). */
static inline int rec_cmp(const struct rec *a, const struct rec *b)
{
	uint64_t sa = LD_SEQ(a->lsn), sb = LD_SEQ(b->lsn);
	if (sa != sb)
		return sa < sb ? -1 : 1;
	int c = rec_keycmp(a, b);
	if (c)
		return c;
	if (a->lsn != b->lsn)
		return a->lsn > b->lsn ? -1 : 1;
	uintptr_t ea = a->ref & ~(uintptr_t)REC_TAGS, eb = b->ref & ~(uintptr_t)REC_TAGS;
	return (ea > eb) - (ea < eb);
}

static int rec_cmp_q(const void *a, const void *b)
{
	return rec_cmp(a, b);
}

static void insertion_sort(struct rec *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct rec x = a[i];
		size_t j = i;
		while (j > 0 && rec_cmp(&x, &a[j - 1]) < 0) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = x;
	}
}

#define SMALL_SORT 24

/*
 * One counting pass on the key word's bits from @shift on (@nb buckets, a power of 2):
 * moves @a's @n records into bucket order (stable) through @tmp, and returns where each
 * bucket ends (bucket b is [end[b - 1], end[b]), end[-1] being 0), to be freed by the
 * caller; NULL: out of DRAM, @a unchanged.
 */
static size_t *counting_pass(struct rec *a, struct rec *tmp, size_t n, size_t nb, unsigned shift)
{
	size_t mask = nb - 1, *end = calloc(nb + 1, sizeof(*end));
	if (!end)
		return NULL;
	for (size_t i = 0; i < n; i++)
		end[((a[i].key8 >> shift) & mask) + 1]++;
	for (size_t b = 0; b < nb; b++)
		end[b + 1] += end[b]; /* end[b]: where bucket b starts */
	for (size_t i = 0; i < n; i++)
		tmp[end[(a[i].key8 >> shift) & mask]++] = a[i]; /* now: ends */
	memcpy(a, tmp, n * sizeof(*a));
	return end;
}

/*
 * Sorts @n records of one seq by rec_cmp: buckets on the key word's bits just below its
 * highest bit that differs among them (so dense keys spread as well as random ones),
 * about 4 records per bucket, each bucket sorted the same way, small ones by insertion.
 * Records whose key words are all equal (versions of one key, long keys sharing 8
 * bytes) go to qsort. @tmp has room for @n records. false: out of DRAM (@a unchanged
 * as a multiset, not sorted).
 */
static bool sort_one_seq(struct rec *a, struct rec *tmp, size_t n)
{
	if (n <= SMALL_SORT) {
		insertion_sort(a, n);
		return true;
	}
	uint64_t diff = 0;
	for (size_t i = 1; i < n; i++)
		diff |= a[i].key8 ^ a[0].key8;
	if (!diff) {
		qsort(a, n, sizeof(*a), rec_cmp_q);
		return true;
	}
	unsigned top = 63u - (unsigned)__builtin_clzll(diff); /* highest differing bit */
	unsigned bits = 1;
	while (bits < 16 && ((size_t)4 << bits) < n)
		bits++;
	if (bits > top + 1)
		bits = top + 1;
	size_t nb = (size_t)1 << bits;
	size_t *end = counting_pass(a, tmp, n, nb, top + 1 - bits);
	bool ok = end != NULL;
	for (size_t b = 0, from = 0; ok && b < nb; from = end[b++])
		ok = sort_one_seq(a + from, tmp + from, end[b] - from);
	free(end);
	return ok;
}

/*
 * Groups @a's @n records by seq in place (an American flag pass: each record is swapped
 * into its seq's region), @ns seqs from @lo; fills @end[s] with where seq lo + s's
 * region ends. No second buffer: a fresh one as large as the records cost as much in
 * page faults as the sort itself (docs/listdb.md, "Recovery").
 */
static void group_by_seq(struct rec *a, size_t n, uint64_t lo, size_t ns, size_t *end,
			 size_t *next)
{
	memset(end, 0, ns * sizeof(*end));
	for (size_t i = 0; i < n; i++)
		end[LD_SEQ(a[i].lsn) - lo]++;
	for (size_t s = 0, at = 0; s < ns; s++) {
		next[s] = at;
		at += end[s];
		end[s] = at;
	}
	for (size_t s = 0; s < ns; s++)
		while (next[s] < end[s]) {
			struct rec x = a[next[s]];
			size_t t = (size_t)(LD_SEQ(x.lsn) - lo);
			while (t != s) { /* x belongs further on: swap it there */
				struct rec y = a[next[t]];
				a[next[t]++] = x;
				x = y;
				t = (size_t)(LD_SEQ(x.lsn) - lo);
			}
			a[next[s]++] = x;
		}
}

/* Sorts every record by rec_cmp: grouped by seq in place (a seq range wider than the
 * records, which a sane log never has, goes to qsort), then each seq's run by
 * sort_one_seq() through one buffer the size of the largest run. false: out of DRAM. */
static bool sort_recs(struct rec *v, size_t n)
{
	if (n < 2)
		return true;
	uint64_t lo = LD_SEQ(v[0].lsn), hi = lo;
	for (size_t i = 1; i < n; i++) {
		uint64_t s = LD_SEQ(v[i].lsn);
		lo = s < lo ? s : lo;
		hi = s > hi ? s : hi;
	}
	if (hi - lo >= n) {
		qsort(v, n, sizeof(*v), rec_cmp_q);
		return true;
	}
	size_t ns = (size_t)(hi - lo) + 1;
	size_t *end = malloc(2 * ns * sizeof(*end));
	if (!end)
		return false;
	group_by_seq(v, n, lo, ns, end, end + ns);
	size_t longest = 0;
	for (size_t s = 0, from = 0; s < ns; from = end[s++])
		longest = end[s] - from > longest ? end[s] - from : longest;
	struct rec *tmp = malloc(longest * sizeof(*tmp));
	bool ok = tmp != NULL;
	for (size_t s = 0, from = 0; ok && s < ns; from = end[s++])
		ok = sort_one_seq(v + from, tmp, end[s] - from);
	free(tmp);
	free(end);
	return ok;
}

/* Marks @e obsolete (durably: a reclaimed chunk must not come back) and counts it in
 * its chunk. */
static void drop_entry(struct tips_listdb *db, struct ld_entry *e)
{
	atomic_fetch_or(&e->flags, LD_F_OBSOLETE);
	pm_flush((const void *)&e->flags, 1);
	struct ld_chunk *c = ld_chunk_of(db, e);
	if (c)
		atomic_fetch_add(&c->obsolete, 1);
}

/*
 * The L1 check of keep_one_per_lsn(): its records come in ascending order, so each
 * search of a shard resumes from the last one's predecessors (a search from the heads
 * was about 1.5 us each, and an interrupted compaction can leave a whole table's
 * entries to check). And a shard needs searching only until one check succeeds:
 * Zipper merges a shard tail to head, and the fence before it links an element makes
 * the bottom link of the one merged before it (the next in key order) durable, so of
 * a shard's flagged elements only the lowest keys can be unlinked, and once one is
 * found linked every higher flagged one is (zipper.c, merge phase). A redone merge
 * keeps this: it merges what the first left unlinked, all below what that one linked.
 */
struct l1_finger {
	unsigned shard;
	bool linked_above; /* a flagged entry of this shard was found linked */
	struct ld_entry *heads[TIPS_LISTDB_MAX_DOMAINS]; /* the shard's L1 sentinels */
	struct ld_entry *preds[LD_MAX_HEIGHT];
};

/* Whether @e, flagged LD_F_IN_L1 by the interrupted merge, is linked in L1. */
static bool in_l1(struct tips_listdb *db, const struct ld_entry *e, struct l1_finger *f)
{
	unsigned s = ld_shard_of(db, ld_key(e), e->klen);
	if (s != f->shard) {
		f->shard = s;
		f->linked_above = false;
		ld_l1_heads(db, s, f->heads);
		memset(f->preds, 0, sizeof(f->preds));
	}
	if (!f->linked_above)
		f->linked_above = ld_list_contains(db, f->heads, e, f->preds);
	return f->linked_above;
}

/*
 * Keeps, of each group of records with one LSN, the one entry that will be reachable,
 * and compacts them to the front of r->v; returns how many. Entries of the table being
 * merged (seq @comp) that are already linked in L1 stay there; the rest, and every newer
 * table, become L0 tables again. WAL mode: a copy and its log entry share an LSN
 * (adjacent after the sort); exactly one of them is kept.
 * Fixes (dbg):
 *  - WAL twins: the dedupe used to keep the lower-addressed twin, and an in-L1 twin
 *    left the other one behind as a new entry: when the interrupted compaction had
 *    linked the copy into L1, its log entry was rebuilt into L0 and the redone merge
 *    linked it next to the copy, an equal (key, LSN) pair that breaks L1's order
 *    ("bottom layer out of order"). Now the twin in L1 wins; else the copy (what
 *    compaction merges in WAL mode).
 *  - Superseded versions: an older version (or tombstone) of a key whose newest version
 *    in the same table is already in L1 was rebuilt into L0 with its flags cleared, as
 *    the only version of the key in that L0 table, so a get found it there before
 *    looking in L1 (a stale value, or a tombstone: "not found") until the redone merge;
 *    that merge then linked an older put into L1 as live. The interrupted merge had
 *    marked it obsolete in its scan phase: it stays so.
 * What is dropped is marked obsolete and counted in its chunk (its flag may already be
 * set, and the parse counts nothing for seq >= merged_seq), so that the chunk can still
 * be reclaimed. A kept entry's flags are cleared (a redone compaction marks it again).
 */
static size_t keep_one_per_lsn(struct tips_listdb *db, struct recovered *r, uint64_t comp)
{
	struct rec *v = r->v;
	size_t w = 0;
	struct rec l1_last = { 0 }; /* the last record of table comp kept in L1, if have_l1 */
	bool have_l1 = false;
	struct l1_finger finger = { .shard = ~0u };
	for (size_t i = 0; i < r->n;) {
		size_t j = i + 1;
		while (j < r->n && v[j].lsn == v[i].lsn)
			j++;
		size_t keep = SIZE_MAX;
		bool linked = false, superseded = false;
		if (LD_SEQ(v[i].lsn) == comp && have_l1 && rec_keycmp(&l1_last, &v[i]) == 0)
			superseded = true; /* sorted newest first: l1_last is newer */
		for (size_t x = i; x < j && !linked && !superseded; x++)
			if (LD_SEQ(v[x].lsn) == comp && (v[x].ref & REC_IN_L1) &&
			    in_l1(db, rec_entry(&v[x]), &finger)) {
				keep = x;
				linked = true;
			}
		for (size_t x = i; x < j && keep == SIZE_MAX && !superseded; x++) {
			struct ld_chunk *c = ld_chunk_of(db, rec_entry(&v[x]));
			if (c && c->hdr->kind == LD_CHUNK_COPY)
				keep = x;
		}
		if (keep == SIZE_MAX && !superseded)
			keep = i;
		for (size_t x = i; x < j; x++)
			if (x != keep)
				drop_entry(db, rec_entry(&v[x]));
		if (linked) {
			l1_last = v[keep]; /* a copy: v[keep] may be overwritten below */
			have_l1 = true;
		} else if (keep != SIZE_MAX) {
			if (v[keep].ref & REC_FLAGS)
				atomic_store(&rec_entry(&v[keep])->flags, 0);
			v[w++] = v[keep]; /* w <= i <= keep */
		}
		i = j;
	}
	return w;
}

/* ld_bloom_hash() of the record's key; from the record alone for an 8-byte key. */
static uint64_t rec_bloom_hash(const struct rec *r)
{
	if (!(r->ref & REC_KEY8))
		return ld_bloom_hash(ld_key(rec_entry(r)), rec_entry(r)->klen);
	uint64_t k = __builtin_bswap64(r->key8); /* the key's bytes again */
	return ld_bloom_hash(&k, 8);
}

/* Links the @n kept records, sorted, into one L0 table per seq, oldest first, through
 * one pointer buffer the size of the largest table. */
static int rebuild_l0(struct tips_listdb *db, const struct rec *v, size_t n)
{
	size_t longest = 1;
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && LD_SEQ(v[j].lsn) == LD_SEQ(v[i].lsn); j++)
			;
		longest = j - i > longest ? j - i : longest;
	}
	struct ld_entry **sorted = malloc(longest * sizeof(*sorted));
	if (!sorted)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM while rebuilding L0");
	struct ld_l0 **tail = &db->l0_oldest;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0;) {
		size_t j = i;
		while (j < n && LD_SEQ(v[j].lsn) == LD_SEQ(v[i].lsn)) {
			sorted[j - i] = rec_entry(&v[j]);
			j++;
		}
		struct ld_l0 *t = calloc(1, sizeof(*t));
		if (!t || ld_l0_link(db, t, sorted, j - i, NULL)) {
			free(t);
			rc = tips_set_error(TIPS_ENOMEM, "out of DRAM while rebuilding L0");
			break;
		}
		t->seq = LD_SEQ(v[i].lsn);
		if (db->cfg.bloom_bits && (t->bloom = ld_bloom_create(j - i, db->cfg.bloom_bits)))
			for (size_t x = i; x < j; x++)
				ld_bloom_add(t->bloom, rec_bloom_hash(&v[x]));
		*tail = t;
		tail = &t->newer;
		atomic_fetch_add(&db->nl0, 1);
		i = j;
	}
	free(sorted);
	return rc;
}

int ld_recover(struct tips_listdb *db)
{
	uint64_t t0 = ld_now_ns();
	struct recovered r = { .merged = db->manifest->merged_seq };
	uint64_t comp = db->manifest->compacting_seq;
	for (unsigned d = 0; d < db->domains; d++)
		for (unsigned s = 0; s < LD_MAX_CHUNKS; s++) {
			struct ld_chunk *c = &db->dom[d].chunks[s];
			if (atomic_load(&c->state) != LD_CS_UNCOUNTED)
				continue;
			uint64_t rm = c->hdr->retired_max_seq;
			if (rm && rm < r.merged) {
				db->recount_pending = true; /* wholly merged: counted later */
				if (rm > r.max_seq)
					r.max_seq = rm;
				continue;
			}
			atomic_store(&c->max_seq, c->hdr->created_seq);
			uint64_t n = ld_chunk_parse(c, collect_entry, &r);
			atomic_store(&c->entries, (uint32_t)n);
			atomic_store(&c->state, LD_CS_RETIRED);
		}
	if (r.oom || !sort_recs(r.v, r.n)) {
		free(r.v);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM while recovering the log");
	}
	r.n = keep_one_per_lsn(db, &r, comp);
	int rc = rebuild_l0(db, r.v, r.n);
	free(r.v);
	if (rc)
		return rc;
	db->recovered_entries = r.n;
	uint64_t next = r.max_seq + 1;
	if (next < db->manifest->merged_seq)
		next = db->manifest->merged_seq;
	if (comp && next <= comp)
		next = comp + 1;
	db->next_seq = next;
	db->recovery_ms = (double)(ld_now_ns() - t0) / 1e6;
	return 0;
}
