/*
 * sweep.c - the sweeper of the keyspace (keyspace.h): one background thread that, hz
 * times a second (at once again while work is left), deletes
 *  - the meta records of flushed keyspaces (ksgen older than the current one), making
 *    their generations garbage;
 *  - the members of garbage generations ('g' records), in batches below the store's
 *    limits, then the 'g' record;
 *  - expired keys, walking the meta records a slice at a time.
 *
 * Invariant: the sweeper deletes only what no command can reach (old keyspaces, dead
 * generations: no meta record points at them) or what it has re-checked under the
 * key's lock (an expired key, through ks_lookup()).
 */
#include "keyspace.h"
#include "keyspace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SWEEP_BATCH 512u          /* index keys one sweeper transaction deletes at most */
#define EXPIRE_SLICE 200u         /* meta records the expiry walk looks at per round */

struct sweep_arg {
	struct ks_txn *t;
	size_t n, max;
	uint32_t ksgen;
	uint64_t gen;
	int more;
};

/* Old keyspace generations: make their members garbage and delete the meta records. */
static int sweep_old_meta_cb(const unsigned char *s, size_t sl, const void *v, size_t vl,
			     void *arg)
{
	struct sweep_arg *a = arg;
	if (sl < 4 || get_be32(s) >= a->ksgen)
		return 1;
	unsigned char mk[TIPS_MAX_KEY];
	mk[0] = KS_FAMILY_META;
	memcpy(mk + 1, s, sl);
	struct ks_meta m;
	if (!ks_meta_decode(v, vl, &m) && m.gen)
		ks_put_garbage(a->t, m.gen);
	ks_txn_write(a->t, mk, sl + 1, NULL, 0);
	if (++a->n >= a->max) {
		a->more = 1;
		return 1;
	}
	return 0;
}

static int sweep_member_cb(const unsigned char *s, size_t sl, const void *v, size_t vl,
			   void *arg)
{
	struct sweep_arg *a = arg;
	struct ks_key k;
	if (ks_member_key(&k, a->gen, s, sl, NULL, 0) == 0)
		ks_del(a->t, &k);
	if (++a->n >= a->max) {
		a->more = 1;
		return 1;
	}
	return 0;
}

struct garbage_list {
	uint64_t gens[16];
	size_t n;
};

static int garbage_cb(const unsigned char *s, size_t sl, const void *v, size_t vl, void *arg)
{
	struct garbage_list *g = arg;
	if (sl == 8)
		g->gens[g->n++] = get_be64(s);
	return g->n == 16;
}

/* One round of the sweeper over old keyspaces and garbage. Return: 1 if work is left. */
static int sweep_garbage(struct ks_db *db, struct ks_txn *t)
{
	size_t max = db->max_ops / 2 < SWEEP_BATCH ? db->max_ops / 2 : SWEEP_BATCH;
	if (max < 2)
		max = 2;
	int more = 0;
	pthread_rwlock_rdlock(&db->locks.keyspace);
	/* old keyspace generations */
	if (atomic_exchange(&db->old_keyspace, 0)) {
		ks_txn_begin(t, 0);
		struct sweep_arg a = {t, 0, max, ks_txn_ksgen(t), 0, 0};
		const unsigned char kp = KS_FAMILY_META;
		ks_scan_range(t, &kp, 1, NULL, 0, 0, max, sweep_old_meta_cb, &a);
		if (ks_txn_commit(t))
			atomic_store(&db->old_keyspace, 1);
		else
			atomic_fetch_add(&db->swept_keys, a.n);
		if (a.more)
			atomic_store(&db->old_keyspace, 1);
		more |= a.more;
	}
	/* garbage generations */
	if (!atomic_exchange(&db->garbage_hint, 0)) {
		pthread_rwlock_unlock(&db->locks.keyspace);
		return more;
	}
	ks_txn_begin(t, 0);
	struct garbage_list gl = {{0}, 0};
	const unsigned char gp = KS_FAMILY_GARBAGE;
	ks_scan_range(t, &gp, 1, NULL, 0, 0, 16, garbage_cb, &gl);
	size_t budget = max;
	uint64_t swept = 0;
	for (size_t i = 0; i < gl.n && budget > 1; i++) {
		struct sweep_arg m = {t, 0, budget - 1, 0, gl.gens[i], 0};
		unsigned char prefix[KS_MEMBER_KEY_PREFIX];
		prefix[0] = KS_FAMILY_MEMBER;
		put_be64(prefix + 1, gl.gens[i]);
		ks_scan_range(t, prefix, sizeof(prefix), NULL, 0, 0, budget, sweep_member_cb, &m);
		budget -= m.n;
		swept += m.n;
		if (m.more) {
			more = 1;
			break;
		}
		unsigned char g[9];
		g[0] = KS_FAMILY_GARBAGE;
		put_be64(g + 1, gl.gens[i]);
		ks_txn_write(t, g, sizeof(g), NULL, 0);
		budget--;
	}
	more |= gl.n == 16;
	atomic_store(&db->garbage_pending, gl.n);
	if (ks_txn_commit(t) == 0) {
		atomic_fetch_add(&db->swept_members, swept);
		if (more)
			atomic_store(&db->garbage_hint, 1);
	} else {
		atomic_store(&db->garbage_hint, 1);
		more = 0; /* retried at the next round, not in a busy loop */
	}
	pthread_rwlock_unlock(&db->locks.keyspace);
	return more;
}

struct expire_arg {
	unsigned char keys[EXPIRE_SLICE][KS_MAX_USER_KEY];
	size_t lens[EXPIRE_SLICE];
	size_t n, seen;
	int64_t now;
	const unsigned char *last;
	size_t last_len;
};

static int expire_cb(const unsigned char *s, size_t sl, const void *v, size_t vl, void *arg)
{
	struct expire_arg *a = arg;
	a->seen++;
	a->last = s;
	a->last_len = sl;
	struct ks_meta m;
	if (!ks_meta_decode(v, vl, &m) && m.expire_ms && a->now > m.expire_ms) {
		memcpy(a->keys[a->n], s, sl);
		a->lens[a->n++] = sl;
	}
	return a->seen == EXPIRE_SLICE;
}

static int64_t unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One slice of the expiry walk: delete the expired keys among the next meta records. */
static void sweep_expired(struct ks_db *db, struct ks_txn *t, struct expire_arg *a)
{
	if (atomic_load(&db->expires) <= 0)
		return;
	a->n = a->seen = 0;
	a->now = unix_ms();
	pthread_rwlock_rdlock(&db->locks.keyspace);
	ks_txn_begin(t, a->now);
	unsigned char prefix[KS_META_KEY_PREFIX];
	prefix[0] = KS_FAMILY_META;
	put_be32(prefix + 1, ks_txn_ksgen(t));
	ks_scan_range(t, prefix, sizeof(prefix), db->expire_cursor, db->expire_cursor_len, 0,
		   EXPIRE_SLICE, expire_cb, a);
	if (a->seen == EXPIRE_SLICE && a->last_len < sizeof(db->expire_cursor)) {
		/* resume just after the last key seen */
		memcpy(db->expire_cursor, a->last, a->last_len);
		db->expire_cursor[a->last_len] = 0;
		db->expire_cursor_len = a->last_len + 1;
	} else {
		db->expire_cursor_len = 0;
	}
	ks_txn_abort(t);
	pthread_rwlock_unlock(&db->locks.keyspace);
	for (size_t i = 0; i < a->n; i++) {
		struct lockset ls;
		lockset_clear(&ls);
		lockset_add(&ls, a->keys[i], a->lens[i]);
		locks_acquire(&db->locks, &ls, 0);
		ks_txn_begin(t, a->now);
		ks_lookup(t, a->keys[i], a->lens[i], NULL); /* deletes it if still expired */
		ks_txn_commit(t);
		locks_release(&db->locks, &ls);
	}
}

void *ks_sweeper_main(void *arg)
{
	struct ks_db *db = arg;
	struct ks_txn *t = NULL;
	struct expire_arg *ea = malloc(sizeof(*ea));
	if (ks_txn_new(db, &t) || !ea) {
		fprintf(stderr, "tips-server: the sweeper has no memory; expired keys and "
			"deleted members are left until the next start\n");
		free(ea);
		return NULL;
	}
	pthread_mutex_lock(&db->stop_lock);
	while (!db->stop) {
		pthread_mutex_unlock(&db->stop_lock);
		int more = sweep_garbage(db, t);
		sweep_expired(db, t, ea);
		pthread_mutex_lock(&db->stop_lock);
		if (more || db->stop)
			continue;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		long ns = ts.tv_nsec + 1000000000L / (long)db->sweep_hz;
		ts.tv_sec += ns / 1000000000L;
		ts.tv_nsec = ns % 1000000000L;
		pthread_cond_timedwait(&db->stop_cond, &db->stop_lock, &ts);
	}
	pthread_mutex_unlock(&db->stop_lock);
	ks_txn_free(&t);
	free(ea);
	return NULL;
}
