/*
 * demo.c - the smallest honest use of libtips: a persistent linked list.
 *
 *   tips-demo write PATH N    append records 0..N-1 to the list in the pool at PATH
 *   tips-demo verify PATH N   reopen (in a new process) and check every record
 *
 * Each record is allocated with tips_heap_alloc_to() straight into the `next` slot of
 * the previous record (or the root's `head`), so after any crash the list is a prefix
 * of what was written and no block is leaked: the heap hands a block to exactly one
 * slot. A record's contents are persisted before the root's count includes it.
 * Exit codes: 0 ok, 1 verification failed, 2 usage, 3 library error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tips/tips.h>

#define DEMO_MAGIC 0x4f4d45445350495full /* "TIPSDEMO" */

struct record {
	uint64_t next; /* slot: address of the next record, 0 at the end */
	uint64_t key;
	char value[48];
};

struct demo_root {
	uint64_t magic;
	uint64_t count; /* records whose contents are persistent */
	uint64_t head;  /* slot: first record */
};

static void value_of(uint64_t key, char *out, size_t len)
{
	snprintf(out, len, "value-%llu-%llx", (unsigned long long)key,
		 (unsigned long long)(key * 0x9e3779b97f4a7c15ull));
}

static int lib_fail(const char *what, int rc)
{
	fprintf(stderr, "tips-demo: %s: %s (%s)\n", what, tips_errormsg(), tips_strerror(rc));
	return 3;
}

static int demo_write(const char *path, uint64_t n)
{
	struct tips_pool *pool;
	int rc = tips_pool_open(path, NULL, &pool);
	if (rc)
		return lib_fail("open", rc);
	struct demo_root *root = tips_pool_root(pool, NULL);
	if (root->magic != DEMO_MAGIC) {
		memset(root, 0, sizeof(*root));
		root->magic = DEMO_MAGIC;
		tips_persist(root, sizeof(*root));
	}
	uint64_t *tail = &root->head;
	while (*tail)
		tail = &((struct record *)*tail)->next;
	for (uint64_t k = root->count; k < n; k++) {
		rc = tips_heap_alloc_to(tips_pool_heap(pool), sizeof(struct record), tail);
		if (rc) {
			tips_pool_close(&pool);
			return lib_fail("alloc", rc);
		}
		struct record *r = (struct record *)*tail;
		r->next = 0;
		r->key = k;
		value_of(k, r->value, sizeof(r->value));
		tips_persist(r, sizeof(*r));
		root->count = k + 1;
		tips_persist(&root->count, sizeof(root->count));
		tail = &r->next;
	}
	printf("wrote %llu records to %s\n", (unsigned long long)root->count, path);
	rc = tips_pool_close(&pool);
	return rc ? lib_fail("close", rc) : 0;
}

static int count_block(const struct tips_heap_block *b, void *arg)
{
	(void)b;
	++*(uint64_t *)arg;
	return 0;
}

static int demo_verify(const char *path, uint64_t n)
{
	struct tips_pool *pool;
	int rc = tips_pool_open(path, NULL, &pool);
	if (rc)
		return lib_fail("open", rc);
	const struct demo_root *root = tips_pool_root(pool, NULL);
	int bad = 0;
	if (root->magic != DEMO_MAGIC || root->count != n) {
		fprintf(stderr, "tips-demo: root says %llu records, expected %llu\n",
			(unsigned long long)root->count, (unsigned long long)n);
		bad = 1;
	}
	uint64_t k = 0;
	char want[48];
	for (uint64_t p = root->head; p && !bad; p = ((struct record *)p)->next, k++) {
		const struct record *r = (const struct record *)p;
		value_of(k, want, sizeof(want));
		if (r->key != k || strcmp(r->value, want) != 0) {
			fprintf(stderr, "tips-demo: record %llu is wrong\n", (unsigned long long)k);
			bad = 1;
		}
	}
	uint64_t blocks = 0;
	tips_heap_walk(tips_pool_heap(pool), count_block, &blocks);
	if (!bad && (k != n || blocks != n)) {
		fprintf(stderr, "tips-demo: %llu records linked, %llu blocks allocated, expected %llu\n",
			(unsigned long long)k, (unsigned long long)blocks, (unsigned long long)n);
		bad = 1;
	}
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	tips_pool_close(&pool);
	if (bad)
		return 1;
	printf("verified %llu records in %s (media %s, mapped at 0x%llx, %u-byte records, "
	       "no leaked block)\n", (unsigned long long)n, path, tips_media_name(info.media),
	       (unsigned long long)info.map_addr, (unsigned)sizeof(struct record));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "verify") != 0)) {
		fprintf(stderr, "usage: tips-demo write|verify PATH N\n");
		return 2;
	}
	uint64_t n = strtoull(argv[3], NULL, 10);
	return strcmp(argv[1], "write") == 0 ? demo_write(argv[2], n) : demo_verify(argv[2], n);
}
