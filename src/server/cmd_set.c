/*
 * cmd_set.c - the set commands of tips-server (SADD, SREM, SMEMBERS, SPOP, ...), with
 * Redis 7's replies and error texts.
 *
 * Layout (docs/server.md): a set is a meta record of type KS_SET whose hdr[0] is the
 * number of members, and one member key 'c' gen member -> (empty) per member.
 * Invariant: the count equals the members stored under the generation; every command
 * that adds or removes members writes the new count in the same transaction
 * (kc_store_count()), and the one that removes the last member deletes the key.
 */
#include <string.h>

#include "ks_collection.h"

#define SET_MAX_MEMBER KS_MAX_SUFFIX

/* 1 if @member is in the set @m, 0 if not, < 0 on error. *@k gets its member key. */
static int member_find(struct client *c, const struct ks_meta *m, const struct arg *member,
		       struct ks_key *k)
{
	unsigned char empty[16];
	size_t vlen;

	if (ks_member_key(k, m->gen, member->ptr, member->len, NULL, 0) < 0)
		return 0; /* too long to be stored, so absent */
	return ks_get(c->txn, k, empty, sizeof(empty), &vlen);
}

/* SADD (@add) / SREM: add or remove argv[2..] and store the count; the number of
 * members added or removed, or -1 (replied or recorded). */
static long long set_change(struct client *c, struct ks_meta *m, int add)
{
	uint64_t changed = 0;

	for (int i = 2; i < c->argc; i++) {
		struct ks_key k;
		int r = member_find(c, m, &c->argv[i], &k);

		if (r < 0)
			return -1;
		if (r == add)
			continue;
		if ((add ? ks_put(c->txn, &k, NULL, 0) : ks_del(c->txn, &k)) < 0)
			return -1;
		changed++;
	}
	if (changed && kc_store_count(c->txn, &c->argv[1], m,
				      add ? m->hdr[0] + changed : m->hdr[0] - changed) < 0)
		return -1;
	return (long long)changed;
}

static void sadd_command(struct client *c)
{
	struct ks_meta m;
	long long added;
	int r;

	for (int i = 2; i < c->argc; i++)
		if (kc_check_size(c, &c->argv[i], SET_MAX_MEMBER) < 0)
			return;
	r = lookup_typed(c, &c->argv[1], KS_SET, &m);
	if (r < 0 || (r == 0 && kc_create(c->txn, KS_SET, &m) < 0))
		return;
	added = set_change(c, &m, 1);
	if (added >= 0)
		add_reply_int(c, added);
}

static void srem_command(struct client *c)
{
	struct ks_meta m;
	long long removed = 0;
	int r = lookup_typed(c, &c->argv[1], KS_SET, &m);

	if (r == 1)
		removed = set_change(c, &m, 0);
	if (r >= 0 && removed >= 0)
		add_reply_int(c, removed);
}

static void sismember_command(struct client *c)
{
	struct ks_meta m;
	struct ks_key k;
	int r = lookup_typed(c, &c->argv[1], KS_SET, &m);

	if (r == 1)
		r = member_find(c, &m, &c->argv[2], &k);
	if (r >= 0)
		add_reply_int(c, r);
}

static void smismember_command(struct client *c)
{
	struct ks_meta m;
	struct ks_key k;
	int r = lookup_typed(c, &c->argv[1], KS_SET, &m);

	if (r < 0)
		return;
	add_reply_array(c, c->argc - 2);
	for (int i = 2; i < c->argc; i++) {
		int in = 0;

		if (r == 1) {
			in = member_find(c, &m, &c->argv[i], &k);
			if (in < 0)
				return;
		}
		add_reply_int(c, in);
	}
}

static void scard_command(struct client *c)
{
	kc_reply_card(c, KS_SET);
}

static void smembers_command(struct client *c)
{
	kc_reply_all(c, KS_SET, KC_EMIT_MEMBER);
}

static void reply_members(struct client *c, const struct kc_items *l)
{
	add_reply_array(c, (long long)l->n);
	for (size_t i = 0; i < l->n; i++)
		add_reply_bulk(c, l->v[i].a, l->v[i].alen);
}

/* Remove the sampled members @l from the set @m (the whole key if they are all). */
static int remove_members(struct client *c, struct ks_meta *m, const struct kc_items *l)
{
	if (l->n < m->hdr[0]) {
		for (size_t i = 0; i < l->n; i++) {
			struct ks_key k;

			if (ks_member_key(&k, m->gen, l->v[i].a, l->v[i].alen, NULL, 0) < 0 ||
			    ks_del(c->txn, &k) < 0)
				return -1;
		}
	}
	return kc_store_count(c->txn, &c->argv[1], m, m->hdr[0] - l->n);
}

/* SPOP key [count] and SRANDMEMBER key [count]. */
static void set_random(struct client *c, int pop)
{
	struct ks_meta m;
	struct kc_items l;
	long long count = 1;

	if (c->argc > 3) {
		add_reply_error(c, ERR_SYNTAX);
		return;
	}
	if (c->argc == 3 && (pop ? kc_parse_pop_count(c, &c->argv[2], &count)
				 : kc_parse_rand_count(c, &c->argv[2], &count)) < 0)
		return;
	if (kc_lookup_scan(c, KS_SET, &m, c->argc == 3 ? KC_ABSENT_EMPTY : KC_ABSENT_NIL,
			   count != 0) != 1)
		return;
	kc_items_init(&l, c->txn);
	if (count < 0) {
		if (kc_collect(c->txn, m.gen, 0, &l) < 0)
			return;
		add_reply_array(c, l.n ? -count : 0);
		/* A client dropped for its output limit stops a huge reply early. */
		for (long long i = 0; l.n && i < -count && !(c->flags & CLIENT_CLOSE_ASAP); i++) {
			const struct kc_item *it = &l.v[kc_random_below(l.n)];

			add_reply_bulk(c, it->a, it->alen);
		}
		return;
	}
	if (kc_sample(c->txn, m.gen, m.hdr[0], (uint64_t)count, 0, &l) < 0)
		return;
	if (pop && remove_members(c, &m, &l) < 0)
		return;
	if (c->argc == 3)
		reply_members(c, &l);
	else if (l.n == 1)
		add_reply_bulk(c, l.v[0].a, l.v[0].alen);
	else
		add_reply_nil(c);
}

static void spop_command(struct client *c)
{
	set_random(c, 1);
}

static void srandmember_command(struct client *c)
{
	set_random(c, 0);
}

/* ---- the table ---------------------------------------------------------------------- */

const struct command set_commands[] = {
	{"sadd", sadd_command, -3, KC_GROW_FAST, 1, 1, 1, NULL, "Add one or more members to a set",
	 "set", "key member [member ...]"},
	{"srem", srem_command, -3, KC_WRITE_FAST, 1, 1, 1, NULL, "Remove one or more members of a set",
	 "set", "key member [member ...]"},
	{"smembers", smembers_command, 2, KC_READ, 1, 1, 1, NULL, "Get all the members of a set", "set", "key"},
	{"sismember", sismember_command, 3, KC_READ_FAST, 1, 1, 1, NULL,
	 "Tell whether a value is a member of a set", "set", "key member"},
	{"smismember", smismember_command, -3, KC_READ_FAST, 1, 1, 1, NULL,
	 "Tell whether each value is a member of a set", "set", "key member [member ...]"},
	{"scard", scard_command, 2, KC_READ_FAST, 1, 1, 1, NULL, "Get the number of members of a set",
	 "set", "key"},
	{"spop", spop_command, -2, KC_WRITE_FAST, 1, 1, 1, NULL,
	 "Remove and return one or more random members of a set", "set", "key [count]"},
	{"srandmember", srandmember_command, -2, KC_READ, 1, 1, 1, NULL,
	 "Get one or more random members of a set", "set", "key [count]"},
};
const size_t set_commands_count = sizeof(set_commands) / sizeof(set_commands[0]);
