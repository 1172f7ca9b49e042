/*
 * test_olog_seal.c - recovery finds the end of an OLog from its sealed records
 * (olog.c: olog_append, olog_put_record, olog_commit, olog_recover), on a ring in DRAM.
 *
 *  - a single write persists no tail: the persistent tail stays behind, and the walk
 *    from it (or from the head, when the head has passed it) ends exactly at the last
 *    appended record, over many laps of the ring, with records of several sizes and the
 *    PAD records they need at the ring's end, whatever tail and head it starts from;
 *  - it never walks into the previous lap's records that lie past the end;
 *  - a torn last record (a byte changed) ends the log before it; a changed byte in an
 *    earlier record, with a valid one after it, is reported as damage (TIPS_ECORRUPT);
 *  - a batch's records are not sealed: uncommitted, the walk stops at the first; once
 *    committed (the tail persisted) they are below the tail;
 *  - records sealed under another pool's salt are not taken.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include "framework/framework.h"

#define RING 4096u

static struct olog_slot_pm *slot;
static unsigned char *ring;
static struct olog log_;
static uint64_t ts = 1, rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void reset(uint64_t salt)
{
	memset(slot, 0, sizeof(*slot));
	memset(ring, 0, RING);
	memset(&log_, 0, sizeof(log_));
	log_.pm = slot;
	log_.ring = ring;
	log_.size = RING;
	log_.salt = salt;
}

static uint64_t end_now(void)
{
	return atomic_load(&log_.durable_tail);
}

/* Appends a single write with a value of @vlen bytes; returns its record's offset. */
static uint64_t append(size_t vlen)
{
	unsigned char key[8], val[200];
	memcpy(key, &ts, 8);
	memset(val, (int)(ts & 0xff), sizeof(val));
	uint64_t size = olog_record_size(8, vlen), at = end_now();
	if (RING - at % RING < size)
		at += RING - at % RING; /* after the PAD */
	olog_append(&log_, OLOG_OP_PUT, ts++, key, 8, val, vlen, 0);
	return at;
}

/* Runs recovery from the current words; returns its rc and leaves the end in *@end. */
static int walk(uint64_t *end)
{
	int rc = olog_recover(&log_, 0);
	*end = slot->tail;
	return rc;
}

/* Recovery from the current words succeeds and ends the log at @want. */
#define WALK_ENDS_AT(want)                                                               \
	do {                                                                             \
		uint64_t end_;                                                           \
		CHECK_RC(walk(&end_), 0);                                                \
		CHECK(end_ == (want));                                                   \
	} while (0)

static void test_walk_over_laps(void)
{
	reset(0x1234);
	uint64_t starts[4 * RING / 64], n = 0;
	for (int round = 0; round < 400; round++) {
		unsigned k = 1 + (unsigned)(next_rand() % 6);
		for (unsigned i = 0; i < k; i++) {
			starts[n % (sizeof(starts) / sizeof(starts[0]))] =
				append((size_t)(next_rand() % 200));
			n++;
		}
		CHECK(slot->tail <= end_now()); /* single writes leave the tail behind */
		/* A head: a record start at most a ring behind the end (reclamation frees
		 * only applied records, so the live ones always fit in the ring). */
		uint64_t head = end_now();
		for (uint64_t back = 1; back <= n && back < 64; back++) {
			uint64_t s = starts[(n - back) % (sizeof(starts) / sizeof(starts[0]))];
			if (end_now() - s > RING)
				break;
			if (next_rand() % 3 == 0)
				head = s;
		}
		slot->head = head;
		/* The persistent tail: anywhere from far behind the head up to the end. */
		uint64_t tail = slot->tail;
		if (next_rand() % 2 && head > tail)
			tail = head - (head - tail) / 2 / 64 * 64;
		slot->tail = tail <= head || next_rand() % 2 ? tail : head;
		uint64_t end;
		CHECK_RC(walk(&end), 0);
		if (end != end_now())
			fprintf(stderr, "round %d: head %llu tail %llu: walked to %llu, end is %llu\n",
				round, (unsigned long long)head, (unsigned long long)tail,
				(unsigned long long)end, (unsigned long long)end_now());
		CHECK(end == end_now());
	}
	CHECK(end_now() > 8 * RING); /* many laps, so the walk met stale records */
}

static void test_torn_and_damaged(void)
{
	reset(0x5678);
	uint64_t at[12];
	for (int i = 0; i < 12; i++)
		at[i] = append(8 + (size_t)i * 16);
	struct olog_rec *last = (struct olog_rec *)(ring + at[11] % RING);
	uint64_t end;

	last->data[8 + 3] ^= 0x10; /* a value byte of the last record */
	WALK_ENDS_AT(at[11]);
	last->data[8 + 3] ^= 0x10;
	slot->tail = 0;
	WALK_ENDS_AT(end_now());

	last->len ^= 64; /* the header: the record's length */
	slot->tail = 0;
	WALK_ENDS_AT(at[11]);
	last->len ^= 64;

	struct olog_rec *mid = (struct olog_rec *)(ring + at[8] % RING);
	mid->data[1] ^= 0x01; /* a key byte, with three valid records after it */
	slot->tail = 0;
	CHECK_RC(walk(&end), TIPS_ECORRUPT);
	CHECK(strstr(tips_errormsg(), "damaged") != NULL);
	CHECK(slot->tail == 0); /* nothing adopted */
	mid->data[1] ^= 0x01;
	WALK_ENDS_AT(end_now());
}

static void test_batches_unsealed(void)
{
	reset(0x9abc);
	for (int i = 0; i < 5; i++)
		append(8);
	uint64_t singles_end = end_now(), tail = singles_end;
	unsigned char key[8] = { 1 }, val[8] = { 2 };
	for (int i = 0; i < 3; i++)
		olog_put_record(&log_, &tail, false, OLOG_OP_PUT, ts++, key, 8, val, 8, 0);
	WALK_ENDS_AT(singles_end); /* the batch was not committed */
	olog_commit(&log_, tail, 3);
	CHECK(slot->tail == tail && end_now() == tail);
	append(8);
	WALK_ENDS_AT(end_now());
}

static void test_other_salt(void)
{
	reset(0xdef0);
	for (int i = 0; i < 5; i++)
		append(8);
	log_.salt ^= 1;
	WALK_ENDS_AT(0);
	log_.salt ^= 1;
	WALK_ENDS_AT(end_now());
}

int main(void)
{
	slot = aligned_alloc(64, sizeof(*slot));
	ring = aligned_alloc(64, RING);
	REQUIRE(slot && ring);
	test_walk_over_laps();
	test_torn_and_damaged();
	test_batches_unsealed();
	test_other_salt();
	free(ring);
	free(slot);
	return test_finish("test_olog_seal");
}
