/*
 * ks_collection.h - what the collection commands (cmd_hash.c, cmd_list.c, cmd_set.c,
 * cmd_zset.c) share on top of keyspace.h and server.h: creating a collection, storing
 * its member count (and deleting the key when the count reaches 0, since empty
 * collections do not exist), scanning members, collecting copies of members, replies
 * of counts and whole collections, checking member sizes against the layout's limits,
 * random picks, and the count arguments Redis parses the same way in several commands.
 *
 * Invariant kept for the callers: the meta record's member count is written by
 * kc_store_count() only, in the same transaction as the member writes it counts, and a
 * count of 0 deletes the key instead of storing an empty collection.
 *
 * Everything here works through the command's struct ks_txn (c->txn); nothing touches
 * the store directly, so a command's member writes and its count commit as one batch.
 */
#ifndef TIPS_SERVER_KS_COLLECTION_H
#define TIPS_SERVER_KS_COLLECTION_H

#include <stddef.h>
#include <stdint.h>
#include "server.h"

/* Flags of the collection commands' table entries (server.h). */
#define KC_READ CMD_READONLY
#define KC_READ_FAST (CMD_READONLY | CMD_FAST)
#define KC_WRITE_FAST (CMD_WRITE | CMD_FAST)
#define KC_GROW (CMD_WRITE | CMD_DENYOOM)
#define KC_GROW_FAST (CMD_WRITE | CMD_DENYOOM | CMD_FAST)

/**
 * kc_create() - fill *@m as a new, empty collection of @type with a fresh generation.
 * Nothing is written until kc_store_count(). Return: 0 or a negative code (recorded).
 */
int kc_create(struct ks_txn *t, int type, struct ks_meta *m);
/**
 * kc_store_count() - set @m's member count to @n and write its meta record, or delete
 * the key if @n is 0. The other hdr words (a list's first index) are written as the
 * caller left them. Return: 0 or a negative code (recorded in the txn).
 */
int kc_store_count(struct ks_txn *t, const struct arg *key, struct ks_meta *m, uint64_t n);

/**
 * kc_scan() - ks_scan_members() of generation @gen from suffix @from (@flen 0: the
 * first) to the end, or until @fn returns non-zero (the keyspace reads the store in
 * chunks). Return: 0 or a negative code (KS_EUNORDERED on an unordered store).
 */
int kc_scan(struct ks_txn *t, uint64_t gen, const void *from, size_t flen, ks_member_fn fn,
	    void *arg);

/* A copied member: its bytes @a, a value @b (hash values, list elements) or a score. */
struct kc_item {
	const char *a;
	size_t alen;
	const char *b;
	size_t blen;
	double score;
};

/* A growing array of copied members in transaction scratch (freed when it ends). */
struct kc_items {
	struct ks_txn *t;
	struct kc_item *v;
	size_t n, cap;
};

void kc_items_init(struct kc_items *l, struct ks_txn *t);
/** kc_items_push() - append copies of @a and @b. Return: 0 or TIPS_ENOMEM (recorded). */
int kc_items_push(struct kc_items *l, const void *a, size_t alen, const void *b, size_t blen,
		  double score);

/**
 * kc_sample() - scan all @total members of @gen (a set or a hash) and copy @want
 * distinct ones chosen at random (all of them if @want >= @total), in a random order,
 * into @out; @with_value copies their values too. Return: 0 or a negative code.
 */
int kc_sample(struct ks_txn *t, uint64_t gen, uint64_t total, uint64_t want, int with_value,
	      struct kc_items *out);
/** kc_collect() - copy every member of @gen (and its value if @with_value) into @out.
 * Return: 0 or a negative code. */
int kc_collect(struct ks_txn *t, uint64_t gen, int with_value, struct kc_items *out);

/**
 * kc_clip_range() - turn Redis's inclusive index range *@start..*@stop (negative: from
 * the end) over @n members into positions 0 <= *@start <= *@stop < @n (LRANGE, ZRANGE).
 * Return: 1, or 0 if the range holds no member.
 */
int kc_clip_range(long long n, long long *start, long long *stop);

/* What a command replies for a missing collection (kc_lookup_scan()). */
enum kc_absent { KC_ABSENT_EMPTY, KC_ABSENT_NIL, KC_ABSENT_ZERO };
/**
 * kc_lookup_scan() - the collection argv[1] of @type for a command that scans its
 * members: 1 if it exists, @scan is set and the store can scan (*@m filled). Otherwise
 * the command's whole reply is added: @absent's reply (an empty array, a nil, a 0) for a
 * missing key or, with @scan 0 (a count of 0), for an existing one; WRONGTYPE; or the
 * need_ordered() error on an unordered store. Return: 1, 0 (replied), or -1 (replied, or
 * an error recorded in the txn).
 */
int kc_lookup_scan(struct client *c, int type, struct ks_meta *m, enum kc_absent absent,
		   int scan);

/** kc_reply_card() - reply the member count of the collection argv[1] of @type, 0 if it
 * is absent (HLEN, LLEN, SCARD, ZCARD). */
void kc_reply_card(struct client *c, int type);

enum { KC_EMIT_MEMBER = 1, KC_EMIT_VALUE = 2 };
/**
 * kc_reply_all() - reply an array of every member (KC_EMIT_MEMBER) and/or its value
 * (KC_EMIT_VALUE) of the collection argv[1] of @type, in member order (SMEMBERS,
 * HGETALL, HKEYS, HVALS): an empty array if it is absent, WRONGTYPE if it has another
 * type, else the need_ordered() error on an unordered store.
 */
void kc_reply_all(struct client *c, int type, int what);

/** kc_random_below() - a pseudo-random number in [0, @n) (@n > 0), per thread. */
uint64_t kc_random_below(uint64_t n);

/**
 * kc_check_size() - if @a is longer than @max bytes (a member or value the layout cannot
 * store), reply the store's "request too large" error (reply_store_error()) and return
 * -1, before anything is written. Return: 0 if it fits.
 */
int kc_check_size(struct client *c, const struct arg *a, size_t max);
/** kc_reply_wrong_args() - "ERR wrong number of arguments for 'NAME' command". */
void kc_reply_wrong_args(struct client *c);
/** kc_value_buf() - a buffer of KS_MAX_MEMBER_VALUE bytes for ks_get() (txn scratch),
 * or NULL (error recorded). */
void *kc_value_buf(struct ks_txn *t);
/**
 * kc_parse_pop_count() - the count of LPOP/RPOP/SPOP/ZPOPMIN...: an integer >= 0, else
 * "ERR value is out of range, must be positive" (also for a non-integer, as Redis).
 * Return: 0, or -1 after replying.
 */
int kc_parse_pop_count(struct client *c, const struct arg *a, long long *out);
/**
 * kc_parse_rand_count() - the count of SRANDMEMBER/HRANDFIELD: any integer but
 * LLONG_MIN (Redis's -LONG_MAX .. LONG_MAX range). Return: 0, or -1 after replying.
 */
int kc_parse_rand_count(struct client *c, const struct arg *a, long long *out);

#endif /* TIPS_SERVER_KS_COLLECTION_H */
