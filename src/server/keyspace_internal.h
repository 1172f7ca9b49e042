/*
 * keyspace_internal.h - what keyspace.c shares with sweep.c and nobody else: the
 * database object, the byte encodings of the layout, and the transaction calls below
 * the public ones (keyspace.h).
 */
#ifndef TIPS_SERVER_KEYSPACE_INTERNAL_H
#define TIPS_SERVER_KEYSPACE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include "keyspace.h"

/* Numbers in index keys are big-endian (memcmp order is numeric order), numbers in
 * values little-endian (docs/server.md). */
static inline void put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint64_t get_be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static inline void put_be32(unsigned char *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The keyspace: its store, locks, counters and the sweeper's state. */
struct ks_db {
	struct store *store;
	struct locks locks;
	int ordered;
	size_t max_ops, max_bytes;
	size_t max_string_batch;     /* longest string whose pieces fit the command's batch */
	size_t max_string;           /* longest string at all (pieces staged beyond the above) */
	pthread_mutex_t gen_lock;    /* guards the 'G' record and the fields below */
	uint64_t gen_next, gen_reserved;
	_Atomic uint32_t ksgen;
	_Atomic int64_t keys, expires;
	/* The durable key counts ('N' records, keyspace.c "Key counts"): shard s's record as
	 * last committed, written only by the transaction holding shard s (shard_used, under
	 * gen_lock) or by FLUSHDB under the exclusive keyspace lock. */
	int64_t shard_keys[KS_SHARDS], shard_expires[KS_SHARDS];
	unsigned char shard_used[KS_SHARDS];
	int counted_by_scan;         /* no count record was found at start: counted by scan */
	_Atomic uint64_t expired_keys, swept_members, swept_keys, garbage_pending;
	_Atomic uint64_t commits, commit_ops;
	double start_scan_ms;
	/* the sweeper: it looks for garbage only when these say there may be some (both
	 * start at 1: a crash may have left work) */
	_Atomic int garbage_hint, old_keyspace;
	unsigned sweep_hz;
	pthread_t sweeper;
	int sweeper_started;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	int stop;
	unsigned char expire_cursor[TIPS_MAX_KEY]; /* user key the expiry walk resumes at */
	size_t expire_cursor_len;
};

/** ks_meta_decode() - decode a meta record (m->str points into @v). Return: 0, -1. */
int ks_meta_decode(const unsigned char *v, size_t vlen, struct ks_meta *m);
/** ks_txn_write() - buffer a put (@val non-NULL) or delete of index key @key. */
int ks_txn_write(struct ks_txn *t, const void *key, size_t klen, const void *val,
		 size_t vlen);
/** ks_put_garbage() - buffer the 'g' record of generation @gen. */
int ks_put_garbage(struct ks_txn *t, uint64_t gen);
/** ks_txn_ksgen() - the keyspace generation the transaction works in. */
uint32_t ks_txn_ksgen(struct ks_txn *t);

/** Called with each key (prefix stripped) of a range scan; non-zero stops it. */
typedef int (*range_fn)(const unsigned char *suffix, size_t slen, const void *val,
			size_t vlen, void *arg);
/**
 * ks_scan_range() - call @fn for the keys prefix+suffix with suffix >= @from, in order,
 * the buffered writes merged in if @merge, until @fn returns non-zero. @want: how many
 * keys @fn will probably take (the first store scan asks for no more). Return: keys
 * passed to @fn, or a negative code.
 */
long ks_scan_range(struct ks_txn *t, const unsigned char *prefix, size_t plen,
		   const void *from, size_t flen, int merge, size_t want, range_fn fn,
		   void *arg);

/** ks_sweeper_main() - the sweeper thread (sweep.c), started by ks_db_open(). */
void *ks_sweeper_main(void *db);

#endif /* TIPS_SERVER_KEYSPACE_INTERNAL_H */
