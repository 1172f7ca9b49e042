/*
 * keyspace.h - how tips-server lays the Redis keyspace out in one persistent index, and
 * the calls every command uses to read and write it.
 *
 * Layout (docs/server.md gives the full table). Every index key starts with one byte
 * that names its family; multi-byte numbers in keys are big-endian so that memcmp order
 * is numeric order:
 *
 *   "G"                          the server record: layout version, the generation
 *                                numbers reserved so far, the keyspace generation
 *   'k' ksgen:4 userkey          the meta record of a user key (struct ks_meta):
 *                                type, expiry, member generation, type header, and a
 *                                short string value inline
 *   'c' gen:8 suffix             a member of the collection (or a piece of the long
 *                                string) whose meta record holds generation gen
 *   'g' gen:8                    garbage: the members of gen are no longer reachable
 *                                and the sweeper deletes them
 *   'p' gen:8                    pending: the pieces of a string too long for one batch,
 *                                committed ahead of the command's batch (which deletes
 *                                this record); at start, pending becomes garbage
 *
 * Generations. A collection (or a string too long to sit inline) gets a generation
 * number that no other key ever had (ks_new_gen(): numbers are reserved durably in
 * blocks, so none is reused after a crash). Its members live under that number, not
 * under the user key, so:
 *  - DEL, an overwrite, or an expiry deletes only the meta record and writes one 'g'
 *    record, in one batch, however many members the collection has; the background
 *    sweeper deletes the members later, in batches that fit the store's limits, and
 *    finally the 'g' record. A member whose generation no meta record holds is never
 *    read, because every read starts from the meta record.
 *  - RENAME moves the meta record only.
 * FLUSHDB/FLUSHALL bump the keyspace generation ksgen in the server record (one write):
 * meta records of an older ksgen are invisible at once and swept the same way.
 *
 * Expiry is the meta record's expire_ms (absolute Unix time in ms, 0 = none), so it is as
 * durable as the key. A read that finds an expired key treats it as absent and deletes
 * it in the same transaction (lazily, as Redis); the sweeper also walks the keyspace
 * and deletes expired keys.
 *
 * Transactions. A command never writes the store directly: it reads and writes through
 * a struct ks_txn, which keeps its writes in DRAM (later reads of the same transaction
 * see them) and commits them as ONE batch (store_commit()) when the command (or EXEC,
 * or a pipelined group) ends. So a command that writes several index keys is never half
 * applied after a crash, and nothing is visible to others before it is durable. The
 * caller holds the locks of every user key the transaction touches (locks.h) from the
 * first read until after the commit, so every command is atomic to other clients.
 *
 * Errors. Calls return 0 or 1 (absent/present, as documented) or a negative TIPS_E*
 * code. The first error is also remembered by the transaction (ks_txn_error()); a
 * handler that gets a negative code returns at once, and the dispatcher abandons the
 * transaction and replies the error (server.h). Unordered stores (hash tables) refuse
 * range scans of members with KS_EUNORDERED.
 *
 * Thread safety: a ks_db is shared by all threads; a ks_txn belongs to one thread.
 */
#ifndef TIPS_SERVER_KEYSPACE_H
#define TIPS_SERVER_KEYSPACE_H

#include <stddef.h>
#include <stdint.h>
#include "locks.h"
#include "store.h"

/* ---- layout ------------------------------------------------------------------------- */

#define KS_FAMILY_SERVER 'G'
#define KS_FAMILY_META 'k'
#define KS_FAMILY_MEMBER 'c'
#define KS_FAMILY_GARBAGE 'g'
#define KS_FAMILY_PENDING 'p'
#define KS_FAMILY_COUNT 'N'      /* 'N' ksgen:4 shard:2 -> the keys and expiries a shard
                                    counts (keyspace.c, "Key counts") */
#define KS_COUNT_KEY 7u
#define KS_SHARDS 256u            /* transactions at once, at most */

#define KS_META_KEY_PREFIX 5u    /* 'k' + ksgen:4 */
#define KS_MEMBER_KEY_PREFIX 9u  /* 'c' + gen:8 */
/* Longest user key, member suffix (hash field, set member...) and member value. */
#define KS_MAX_USER_KEY (TIPS_MAX_KEY - KS_META_KEY_PREFIX)
#define KS_MAX_SUFFIX (TIPS_MAX_KEY - KS_MEMBER_KEY_PREFIX)
#define KS_MAX_MEMBER_VALUE TIPS_MAX_VALUE

/* Types of user keys (the meta record's type byte; 0 is never stored). */
enum ks_type { KS_NONE = 0, KS_STRING = 1, KS_LIST = 2, KS_SET = 3, KS_ZSET = 4, KS_HASH = 5 };
/* String encodings (the meta record's enc byte). */
enum ks_enc { KS_ENC_INLINE = 0, KS_ENC_PIECES = 1 };

/* Meta record value: type:1 enc:1 zero:6 expire_ms:8 gen:8 hdr:4x8 (little-endian),
 * then, for an inline string, its bytes. */
#define KS_META_SIZE 56u
#define KS_MAX_INLINE (TIPS_MAX_VALUE - KS_META_SIZE)
/* A long string is stored in pieces of this size at 'c' gen piece:4 (big-endian). */
#define KS_PIECE_SIZE TIPS_MAX_VALUE

/* Returned for a member range scan on a hash-table store (tips-hash, -lfhash, -clht). */
#define KS_EUNORDERED (-1000)

/**
 * struct ks_meta - a user key's meta record, decoded.
 * The type header hdr[] by type (docs/server.md):
 *   string, KS_ENC_PIECES: hdr[0] = length in bytes (pieces 0..(len-1)/KS_PIECE_SIZE)
 *   hash, set, zset:       hdr[0] = number of members (fields)
 *   list:                  hdr[0] = number of elements, hdr[1] = index of the first
 *                          element, as (uint64_t)(int64_t) (ks_index_encode)
 * unused hdr words are 0.
 */
struct ks_meta {
	uint8_t type;         /* enum ks_type */
	uint8_t enc;          /* strings: enum ks_enc; others 0 */
	int64_t expire_ms;    /* absolute Unix ms; 0 = no expiry */
	uint64_t gen;         /* generation of the members / pieces; 0 = none */
	uint64_t hdr[4];      /* type header, see above */
	const char *str;      /* KS_ENC_INLINE strings: the value (owned by the txn) */
	size_t str_len;
};

/* An index key being built (member keys). */
struct ks_key {
	size_t len;
	unsigned char b[TIPS_MAX_KEY];
};

/**
 * ks_member_key() - build 'c' gen:8 @a @b into @k (@b may be NULL with @blen 0).
 * Return: 0, TIPS_ETOOBIG (@alen + @blen > KS_MAX_SUFFIX).
 * The suffixes by type (docs/server.md):
 *   hash:  field                      -> value
 *   set:   member                     -> (empty)
 *   zset:  'm' member                 -> score (8 bytes, ks_score_encode)
 *          's' score:8 member         -> (empty)   (score order, then member order)
 *   list:  index:8 (ks_index_encode)  -> element
 *   string pieces: piece:4 (big-endian) -> up to KS_PIECE_SIZE bytes
 */
int ks_member_key(struct ks_key *k, uint64_t gen, const void *a, size_t alen, const void *b,
		  size_t blen);
/** ks_score_encode() - 8 bytes whose memcmp order is the numeric order of @score
 * (-inf < ... < -0.0 == 0.0 < ... < +inf; NaN is never stored). ks_score_decode()
 * inverts it exactly. */
void ks_score_encode(double score, unsigned char out[8]);
double ks_score_decode(const unsigned char in[8]);
/** ks_index_encode() - 8 bytes whose memcmp order is the order of signed @index. */
void ks_index_encode(int64_t index, unsigned char out[8]);
int64_t ks_index_decode(const unsigned char in[8]);

/* ---- the keyspace ------------------------------------------------------------------- */

struct ks_db;
struct ks_txn;

struct ks_options {
	const char *pool_path;
	const char *index;          /* "tips-art", ..., "listdb" */
	uint64_t pool_size;         /* create only; 0: the engine's default */
	unsigned sweep_hz;          /* sweeper rounds per second (default 10, as Redis hz) */
};

/** What the keyspace has done since open, for INFO. */
struct ks_stats {
	uint64_t keys;              /* user keys (meta records), expired-not-yet-swept included */
	uint64_t expires;           /* of which with an expiry */
	uint64_t expired_keys;      /* keys deleted because they expired */
	uint64_t swept_members;     /* index keys of dead generations deleted */
	uint64_t swept_keys;        /* meta records of flushed keyspaces deleted */
	uint64_t garbage_pending;   /* 'g' records not swept yet (as last seen) */
	uint64_t commits, commit_ops; /* batches committed, and index writes in them */
	double start_scan_ms;       /* time the start-up count of keys took */
};

/**
 * ks_db_open() - open the store (store_open()), check or write the server record,
 * count the keys, and start the sweeper thread. Return: 0, or a negative code with a
 * one-line message in @err.
 */
int ks_db_open(const struct ks_options *o, struct ks_db **out, char *err, size_t errlen);
/** ks_db_close() - stop the sweeper, close the store cleanly; *@db becomes NULL. */
int ks_db_close(struct ks_db **db);
/** The locks every caller takes around a transaction. */
struct locks *ks_db_locks(struct ks_db *db);
struct store *ks_db_store(struct ks_db *db);
void ks_db_stats(struct ks_db *db, struct ks_stats *out);
/** ks_db_ordered() - 1 if member range scans are allowed (store_ordered()). */
int ks_db_ordered(struct ks_db *db);
/** ks_db_max_string() - longest string value a SET may store (512 MiB, as Redis). */
size_t ks_db_max_string(struct ks_db *db);
/** ks_db_max_txn() - the most index writes and bytes one transaction may commit. */
void ks_db_max_txn(struct ks_db *db, size_t *ops, size_t *bytes);
/* ---- transactions ------------------------------------------------------------------- */

/** ks_txn_new() / ks_txn_free() - one per thread, reused for every command. */
int ks_txn_new(struct ks_db *db, struct ks_txn **out);
void ks_txn_free(struct ks_txn **t);
/** ks_txn_begin() - start a transaction at time @now_ms (Unix ms): expiry is judged
 * against it for the whole transaction, as Redis judges it once per command. */
void ks_txn_begin(struct ks_txn *t, int64_t now_ms);
int64_t ks_txn_now(struct ks_txn *t);
/** ks_txn_commit() - commit the writes as one batch (nothing if there are none), then
 * end the transaction. Return: 0, or the commit's code (nothing applied). */
int ks_txn_commit(struct ks_txn *t);
/** ks_txn_abort() - drop the writes and end the transaction. */
void ks_txn_abort(struct ks_txn *t);
/** ks_txn_error() - the first negative code a call of this transaction returned, or 0. */
int ks_txn_error(struct ks_txn *t);
/** ks_txn_writes() - index writes buffered so far. */
/* Keys the transaction has made minus those it deleted, not committed yet (DBSIZE
 * inside a pipelined group counts them). */
int64_t ks_txn_pending_keys(struct ks_txn *t);
size_t ks_txn_writes(struct ks_txn *t);
/** ks_scratch() - @size bytes that live until the transaction ends; NULL (and
 * TIPS_ENOMEM recorded) if DRAM is out. */
void *ks_scratch(struct ks_txn *t, size_t size);
struct ks_db *ks_txn_db(struct ks_txn *t);

/* ---- user keys ---------------------------------------------------------------------- */

/**
 * ks_lookup() - the meta record of user key @key (the txn's own writes included).
 * An expired key is deleted in the transaction and reported absent.
 * Return: 1 (found, *@m filled; @m may be NULL), 0 (absent), or a negative code.
 */
int ks_lookup(struct ks_txn *t, const void *key, size_t klen, struct ks_meta *m);
/**
 * ks_write_meta() - create or overwrite the meta record of @key with *@m (m->str and
 * m->str_len for an inline string). If @key held a different generation, that one
 * becomes garbage. Return: 0, TIPS_ETOOBIG (key longer than KS_MAX_USER_KEY or inline
 * string longer than KS_MAX_INLINE), or a negative code.
 */
int ks_write_meta(struct ks_txn *t, const void *key, size_t klen, const struct ks_meta *m);
/** ks_delete_key() - delete @key and make its generation garbage.
 * Return: 1 (it existed and was not expired), 0 (absent), or a negative code. */
int ks_delete_key(struct ks_txn *t, const void *key, size_t klen);
/** ks_rename() - move @src's meta record to @dst (replacing @dst), members untouched.
 * Return: 1, 0 (@src absent), or a negative code. */
int ks_rename(struct ks_txn *t, const void *src, size_t slen, const void *dst, size_t dlen);
/**
 * ks_flush() - delete every key (FLUSHDB, FLUSHALL): one durable write of the server
 * record, made at once (not part of the transaction's batch); the old keys are
 * invisible from then on, to this transaction too, and swept in the background. The
 * caller holds the keyspace lock exclusive. Return: 0 or a negative code.
 */
int ks_flush(struct ks_txn *t);
/** ks_new_gen() - a generation number no key ever had. Return: it (> 0), or 0 with the
 * error recorded in the txn. */
uint64_t ks_new_gen(struct ks_txn *t);

/** Called by ks_scan_keys() with each live user key; non-zero stops the scan. */
typedef int (*ks_key_fn)(const void *key, size_t klen, const struct ks_meta *m, void *arg);
/**
 * ks_scan_keys() - call @fn for up to @count live user keys >= @from in order (@flen 0:
 * from the first). Expired keys are skipped (not deleted). The txn's own writes are not
 * merged (KEYS/SCAN run in their own transaction). Return: keys passed to @fn, or a
 * negative code.
 */
long ks_scan_keys(struct ks_txn *t, const void *from, size_t flen, size_t count,
		  ks_key_fn fn, void *arg);

/* ---- strings ------------------------------------------------------------------------ */

/**
 * ks_string_get() - the value of string @m (found by ks_lookup()): *@val points at it
 * (inline, or pieces read and joined in txn scratch), valid until the txn ends.
 * Return: 0 or a negative code.
 */
int ks_string_get(struct ks_txn *t, const struct ks_meta *m, const char **val, size_t *len);
/**
 * ks_string_set() - make @key the string @val with expiry @expire_ms (0: none), inline
 * or in pieces under a new generation: in the transaction's batch if they fit, else
 * committed ahead under a pending record and made visible by the transaction's batch
 * (the string still appears all at once). Return: 0, TIPS_ETOOBIG (longer than
 * ks_db_max_string()), or a negative code.
 */
int ks_string_set(struct ks_txn *t, const void *key, size_t klen, const void *val,
		  size_t len, int64_t expire_ms);

/* ---- members of collections --------------------------------------------------------- */

/** ks_get() - value of index key @k into @val (cap >= KS_MAX_MEMBER_VALUE always fits;
 * a value longer than @cap is not copied, *@vlen still says its length: cap 0 checks
 * presence). Return: 1 found (*@vlen set), 0 absent, or a negative code. */
int ks_get(struct ks_txn *t, const struct ks_key *k, void *val, size_t cap, size_t *vlen);
/** ks_put() - write index key @k (buffered in the txn). Return: 0 or a negative code. */
int ks_put(struct ks_txn *t, const struct ks_key *k, const void *val, size_t vlen);
/** ks_del() - delete index key @k if present (buffered). Return: 0 or a negative code. */
int ks_del(struct ks_txn *t, const struct ks_key *k);

/** Called by ks_scan_members() with each member: its suffix (the key after 'c' gen)
 * and value; non-zero stops the scan. */
typedef int (*ks_member_fn)(const void *suffix, size_t slen, const void *val, size_t vlen,
			    void *arg);
/**
 * ks_scan_members() - call @fn for up to @count members of generation @gen whose
 * suffix is >= @from (@flen 0: from the first), in suffix order, the txn's own writes
 * merged in. Return: members passed to @fn, KS_EUNORDERED on an unordered store, or a
 * negative code.
 */
long ks_scan_members(struct ks_txn *t, uint64_t gen, const void *from, size_t flen,
		     size_t count, ks_member_fn fn, void *arg);

#endif /* TIPS_SERVER_KEYSPACE_H */
