/*
 * entry.h - the Index-Unified Log entry: one record that is both a write-ahead log entry
 * and a PMTable skiplist element (ListDB, OSDI'22, Figure 4), and the key order on them.
 *
 * Layout (8-byte aligned, packed one after another in a log chunk):
 *   lsn      table seq << 32 | slot in that MemTable: unique, increasing per writer
 *   klen, vlen
 *   op       LD_OP_PUT or LD_OP_DELETE
 *   height   1..LD_MAX_HEIGHT skiplist layers
 *   flags    LD_F_OBSOLETE (a newer version of the key is in L1: readers skip it),
 *            LD_F_IN_L1 (linked into L1 by Zipper compaction). Not checksummed.
 *   csum     over lsn, lengths, op, height, key and value
 *   next[height]  skiplist pointers; 0 when the entry is written (Alg. 1)
 *   key (padded to 8), value (padded to 8)
 *
 * Invariant: an entry is valid iff its checksum matches and its LSN is newer than the
 * entry before it in the chunk; a torn or stale entry ends the chunk's log.
 *
 * Write batches (layout 3). A batch's entries follow its header in one chunk: an entry
 * of op LD_OP_BATCH, height 1, whose 8-byte key is the number N of entries and whose
 * 8-byte value is ld_batch_digest() of them; its LSN is that of the first entry, and
 * the N entries have the LSNs header.lsn + 0 .. N-1. The header is written last and the
 * whole span made durable with one fence, so a crash can leave any part of it; the
 * batch counts only if the header and all N entries are intact and the digest matches
 * (log.c), else the chunk's log ends at the header. A header is never a table element.
 * Order: by key (memcmp, shorter first), then by LSN descending, so that a search meets
 * the newest version of a key first.
 */
#ifndef TIPS_LISTDB_ENTRY_H
#define TIPS_LISTDB_ENTRY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LD_MAX_HEIGHT 20
#define LD_OP_PUT 1
#define LD_OP_DELETE 2
#define LD_OP_BATCH 3 /* a write batch's header: not a key-value entry */
#define LD_F_OBSOLETE 1u
#define LD_F_IN_L1 2u

struct ld_entry {
	uint64_t lsn;
	uint32_t klen, vlen;
	uint8_t op, height;
	_Atomic uint8_t flags;
	uint8_t pad;
	uint32_t csum;
	_Atomic uint64_t next[]; /* [height], then key, then value */
};

#define LD_SEQ(lsn) ((lsn) >> 32)

static inline size_t ld_pad8(size_t n) { return (n + 7u) & ~(size_t)7u; }

static inline size_t ld_entry_size(unsigned height, size_t klen, size_t vlen)
{
	return sizeof(struct ld_entry) + 8u * height + ld_pad8(klen) + ld_pad8(vlen);
}
static inline size_t ld_entry_bytes(const struct ld_entry *e)
{
	return ld_entry_size(e->height, e->klen, e->vlen);
}
static inline const unsigned char *ld_key(const struct ld_entry *e)
{
	return (const unsigned char *)&e->next[e->height];
}
static inline const unsigned char *ld_val(const struct ld_entry *e)
{
	return ld_key(e) + ld_pad8(e->klen);
}
static inline struct ld_entry *ld_next(const struct ld_entry *e, unsigned layer)
{
	return (struct ld_entry *)(uintptr_t)atomic_load_explicit(&e->next[layer],
								  memory_order_acquire);
}
static inline void ld_set_next(struct ld_entry *e, unsigned layer, const struct ld_entry *to)
{
	atomic_store_explicit(&e->next[layer], (uint64_t)(uintptr_t)to, memory_order_release);
}
static inline bool ld_obsolete(const struct ld_entry *e)
{
	return atomic_load_explicit(&e->flags, memory_order_acquire) & LD_F_OBSOLETE;
}

/* memcmp order, shorter first on a common prefix. The first 8 bytes are compared as
 * big-endian words when both keys have them (most keys differ there; memcmp is a call). */
static inline int ld_keycmp(const void *a, size_t al, const void *b, size_t bl)
{
	if (al >= 8 && bl >= 8) {
		uint64_t x, y;
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y) {
			x = __builtin_bswap64(x);
			y = __builtin_bswap64(y);
			return x < y ? -1 : 1;
		}
		if (al == 8 && bl == 8)
			return 0;
	}
	int c = memcmp(a, b, al < bl ? al : bl);
	if (c)
		return c;
	return (al > bl) - (al < bl);
}

/* The first 8 bytes of a key as a big-endian word, zero padded: unequal words order
 * two keys as ld_keycmp does; equal words need ld_keycmp to tell them apart. */
static inline uint64_t ld_key8(const void *k, size_t kl)
{
	unsigned char b[8] = { 0 };
	memcpy(b, k, kl < 8 ? kl : 8);
	uint64_t v;
	memcpy(&v, b, 8);
	return __builtin_bswap64(v);
}

/* <0, 0, >0: entry @e against the search key (k, kl). */
static inline int ld_cmp_entry_key(const struct ld_entry *e, const void *k, size_t kl)
{
	return ld_keycmp(ld_key(e), e->klen, k, kl);
}

/* Entry order: key ascending, then LSN descending (newest first). */
static inline int ld_cmp_entries(const struct ld_entry *a, const struct ld_entry *b)
{
	int c = ld_keycmp(ld_key(a), a->klen, ld_key(b), b->klen);
	if (c)
		return c;
	return (a->lsn < b->lsn) - (a->lsn > b->lsn);
}

uint32_t ld_entry_checksum(const struct ld_entry *e);

/* Size of a batch header (height 1, 8-byte key and value). */
#define LD_BATCH_HDR_BYTES ld_entry_size(1, 8, 8)

/* The digest a batch header keeps of its entries: folds each checksum in, in order,
 * starting from @h (the header's LSN for the first entry). */
uint64_t ld_batch_digest(uint64_t h, const struct ld_entry *e);

#endif /* TIPS_LISTDB_ENTRY_H */
