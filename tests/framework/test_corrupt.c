/*
 * test_corrupt.c - a damaged pool never crashes tips_open, tips_db_check or
 * `tips pool check`.
 *
 *   test_corrupt INDEX FLIPS SEED [TIPS_BINARY CLI_FLIPS]
 *
 * Builds two small pools of INDEX (2000 keys): one closed cleanly, one left unclean
 * by a child killed with SIGKILL right after more writes, so that its OLogs hold
 * records that recovery must replay. Then, FLIPS times per pool, copies the pool,
 * xors one random byte chosen from the pool header, the framework header, the OLog
 * slots and live OLog/ULog bytes, or the index's blocks (found with tips_heap_walk on
 * a scratch copy), and in a child process (alarm-bounded) opens the copy with
 * TIPS_VERIFY, runs tips_db_check and, only if both succeed, looks up every key ever
 * written (a wrong value or TIPS_ENOTFOUND is allowed; a crash is not). With
 * TIPS_BINARY it also runs `tips pool check PATH --index INDEX` on CLI_FLIPS damaged
 * copies: exit 0 or 1, never a signal.
 * Before the random flips, each byte of the framework header's index root word is
 * flipped (lowest and highest bit) and a plain tips_open must report it.
 * The test fails on any signal or hang of a child, and on an error without a
 * message. It prints, per pool: trials, detected (open or check said TIPS_ECORRUPT or
 * another error, with a message), clean (passed, every lookup right), clean with
 * wrong answers (passed, some lookup wrong or missing: undetected damage), crashes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_util.h"

#include <tips/plugin.h>

#include "pool/pool_layout.h"
#include "framework/fw_layout.h"

#define NKEYS 2000u
#define CHILD_SECONDS 30u
#define POOL_BYTES (32ull << 20)
#define LOG_BYTES (8ull << 20) /* room for the smallest OLogs (256 KiB, 1/16 of it) */

/* Exit codes of a trial's child. */
enum { T_CLEAN = 0, T_DETECTED = 1, T_WRONG = 2, T_EMPTY_MESSAGE = 3 };

/* What every key should hold: version v of key i (v < 0: deleted). */
struct model {
	int version[NKEYS + 400];
	unsigned nkeys;
};

static void key_of(unsigned i, unsigned char k[8])
{
	be64(k, (uint64_t)i * 7919u + 1);
}

/* Values of 8 bytes, and of 24 for every fifth key (the non-inline paths). */
static size_t value_of(unsigned i, int version, unsigned char v[24])
{
	for (unsigned b = 0; b < 24; b++)
		v[b] = (unsigned char)(i * 31u + (unsigned)version * 7u + b);
	return i % 5 == 0 ? 24 : 8;
}

static int put(struct tips_db *db, struct model *m, unsigned i, int version)
{
	unsigned char k[8], v[24];
	key_of(i, k);
	m->version[i] = version;
	if (i >= m->nkeys)
		m->nkeys = i + 1;
	return tips_put(db, k, 8, v, value_of(i, version, v));
}

static struct tips_config config(unsigned flags)
{
	static struct tips_pool_options pool;
	tips_pool_options_init(&pool);
	pool.size = POOL_BYTES;
	pool.log_size = LOG_BYTES;
	struct tips_config c;
	tips_config_init(&c);
	c.flags = flags;
	c.pool_size = POOL_BYTES;
	c.pool = &pool;
	c.expected_keys = NKEYS;
	c.olog_size = 256u << 10;
	c.ulog_size = 256u << 10;
	c.workers_up = 1;
	return c;
}

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	REQUIRE(in >= 0 && out >= 0);
	static char buf[1 << 20];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		REQUIRE(write(out, buf, (size_t)n) == n);
	REQUIRE(n == 0);
	close(in);
	close(out);
}

/* ---- the two pristine pools ------------------------------------------------------- */

static void build_clean(const char *path, const struct tips_index_ops *ops, struct model *m)
{
	struct tips_config c = config(TIPS_CREATE);
	struct tips_db *db = NULL;
	CHECK_RC(tips_open(path, &c, ops, &db), 0);
	REQUIRE(db);
	for (unsigned i = 0; i < NKEYS; i++)
		REQUIRE(put(db, m, i, 0) == 0);
	REQUIRE(tips_close(&db) == 0);
}

/* More writes to a copy of the clean pool, then SIGKILL: records stay in the OLogs. */
static void build_unclean(const char *path, const struct tips_index_ops *ops, struct model *m)
{
	for (unsigned i = NKEYS; i < NKEYS + 300; i++)
		m->version[i] = 1, m->nkeys = i + 1;
	for (unsigned i = 100; i < 300; i++)
		m->version[i] = 1;
	for (unsigned i = 0; i < 100; i++)
		m->version[i] = -1;
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct tips_config c = config(0);
		struct tips_db *db;
		struct model scratch = *m;
		if (tips_open(path, &c, ops, &db))
			_exit(2);
		for (unsigned i = 100; i < NKEYS + 300; i++)
			if ((i < 300 || i >= NKEYS) && put(db, &scratch, i, 1))
				_exit(2);
		for (unsigned i = 0; i < 100; i++) {
			unsigned char k[8];
			key_of(i, k);
			if (tips_remove(db, k, 8))
				_exit(2);
		}
		kill(getpid(), SIGKILL);
		_exit(2);
	}
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* Bytes of live records from the head: those below the tail, then the sealed ones of
 * the current lap that follow (their checksums are not checked: a few bytes more to
 * flip do no harm). */
static uint64_t live_bytes(const struct olog_slot_pm *slot, const unsigned char *ring,
			   uint64_t size)
{
	uint64_t pos = slot->head;
	while (pos - slot->head < size) {
		const struct olog_rec *r = (const struct olog_rec *)(ring + pos % size);
		bool sealed = r->seal == (OLOG_SEALED | (pos / size) % OLOG_LAP_MOD);
		if ((pos >= slot->tail && !sealed) || r->len == 0 || r->len % 64 ||
		    r->len > size - pos % size || r->len > size - (pos - slot->head))
			break;
		pos += r->len;
	}
	return pos - slot->head;
}

/* ---- where to flip ---------------------------------------------------------------- */

struct range {
	uint64_t off, len;
};

struct targets {
	struct range pool_hdr, fw_hdr;
	struct range *logs, *blocks; /* OLog slots and live bytes, ULog; index blocks */
	size_t nlogs, nblocks, cap_blocks;
	uint64_t map_addr;
	unsigned live_records; /* OLog bytes in [head, tail) over all slots */
};

static int block_seen(const struct tips_heap_block *b, void *arg)
{
	struct targets *t = arg;
	if (t->nblocks == t->cap_blocks) {
		t->cap_blocks = t->cap_blocks ? 2 * t->cap_blocks : 1024;
		t->blocks = realloc(t->blocks, t->cap_blocks * sizeof(*t->blocks));
		REQUIRE(t->blocks);
	}
	t->blocks[t->nblocks++] = (struct range){ (uint64_t)b->ptr - t->map_addr, b->size };
	return 0;
}

/* Reads the layout from a scratch copy of @path (opening a pool may write to it). */
static void find_targets(const char *path, const char *scratch, struct targets *t)
{
	memset(t, 0, sizeof(*t));
	copy_file(path, scratch);
	struct tips_pool *pool;
	REQUIRE(tips_pool_open(scratch, NULL, &pool) == 0);
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	t->map_addr = info.map_addr;
	t->pool_hdr = (struct range){ 0, sizeof(struct pool_header) };
	t->fw_hdr = (struct range){ info.root_offset, sizeof(struct fw_header) };
	const struct fw_header *fw = tips_pool_root(pool, NULL);
	unsigned char *log = tips_pool_log_area(pool, NULL);
	uint64_t log_off = info.log_offset, slots_bytes = fw->olog_slots * sizeof(struct olog_slot_pm);
	t->logs = calloc(fw->olog_slots + 2, sizeof(*t->logs));
	REQUIRE(t->logs);
	t->logs[t->nlogs++] = (struct range){ log_off, slots_bytes };
	t->logs[t->nlogs++] = (struct range){ log_off + slots_bytes, 4096 }; /* ULog start */
	const struct olog_slot_pm *slot = (const struct olog_slot_pm *)log;
	uint64_t rings = log_off + slots_bytes + fw->ulog_size;
	for (unsigned i = 0; i < fw->olog_slots; i++) {
		uint64_t live = live_bytes(&slot[i], log + slots_bytes + fw->ulog_size +
					   i * fw->olog_size, fw->olog_size);
		t->live_records += (unsigned)(live / 64);
		if (live)
			t->logs[t->nlogs++] = (struct range){
				rings + i * fw->olog_size + slot[i].head % fw->olog_size,
				live < fw->olog_size - slot[i].head % fw->olog_size
					? live : fw->olog_size - slot[i].head % fw->olog_size };
	}
	REQUIRE(tips_heap_walk(tips_pool_heap(pool), block_seen, t) == 0);
	REQUIRE(t->nblocks > 0);
	REQUIRE(tips_pool_close(&pool) == 0);
	unlink(scratch);
}

static uint64_t pick_in(const struct range *r, size_t n, uint64_t *rng)
{
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += r[i].len;
	uint64_t at = rnd(rng) % total;
	for (size_t i = 0;; i++) {
		if (at < r[i].len)
			return r[i].off + at;
		at -= r[i].len;
	}
}

/* A byte offset: 10% pool header, 15% framework header, 25% logs, 50% index blocks. */
static uint64_t pick_offset(const struct targets *t, uint64_t *rng)
{
	unsigned r = (unsigned)(rnd(rng) % 100);
	if (r < 10)
		return pick_in(&t->pool_hdr, 1, rng);
	if (r < 25)
		return pick_in(&t->fw_hdr, 1, rng);
	if (r < 50)
		return pick_in(t->logs, t->nlogs, rng);
	return pick_in(t->blocks, t->nblocks, rng);
}

static void flip(const char *path, uint64_t off, unsigned char mask)
{
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	unsigned char b;
	REQUIRE(pread(fd, &b, 1, (off_t)off) == 1);
	b ^= mask;
	REQUIRE(pwrite(fd, &b, 1, (off_t)off) == 1);
	close(fd);
}

/* ---- one trial -------------------------------------------------------------------- */

static int detected(int rc, const char *what)
{
	const char *msg = tips_errormsg();
	if (!msg[0]) {
		fprintf(stderr, "  %s returned %s with an EMPTY message\n", what, tips_strerror(rc));
		return T_EMPTY_MESSAGE;
	}
	return T_DETECTED;
}

static int lookups(struct tips_db *db, const struct model *m)
{
	for (unsigned i = 0; i < m->nkeys; i++) {
		unsigned char k[8], want[24], got[64];
		key_of(i, k);
		size_t vlen = 0;
		int rc = tips_get(db, k, 8, got, sizeof(got), &vlen);
		if (m->version[i] < 0) {
			if (rc != TIPS_ENOTFOUND)
				return T_WRONG;
			continue;
		}
		size_t wlen = value_of(i, m->version[i], want);
		if (rc != 0 || vlen != wlen || memcmp(got, want, wlen) != 0)
			return T_WRONG;
	}
	return T_CLEAN;
}

static int trial_child(const char *path, const struct tips_index_ops *ops, const struct model *m,
		       unsigned flags)
{
	alarm(CHILD_SECONDS);
	struct tips_config c = config(flags);
	struct tips_db *db;
	int rc = tips_open(path, &c, ops, &db);
	if (rc)
		return detected(rc, "tips_open");
	struct tips_db_report rep;
	rc = tips_db_check(db, NULL, NULL, &rep);
	if (rc)
		return detected(rc, "tips_db_check");
	int result = lookups(db, m);
	tips_close(&db);
	return result;
}

struct tally {
	unsigned trials, detected, clean, wrong, crashes, empty;
};

static void run_trial(const char *path, const struct tips_index_ops *ops,
		      const struct model *m, struct tally *t, uint64_t off, unsigned flags)
{
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		_exit(trial_child(path, ops, m, flags));
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	t->trials++;
	if (WIFSIGNALED(st)) {
		t->crashes++;
		fprintf(stderr, "  CRASH: byte at offset %llu: signal %d (%s)\n",
			(unsigned long long)off, WTERMSIG(st),
			WTERMSIG(st) == SIGALRM ? "hang" : strsignal(WTERMSIG(st)));
		return;
	}
	switch (WEXITSTATUS(st)) {
	case T_CLEAN: t->clean++; break;
	case T_DETECTED: t->detected++; break;
	case T_WRONG: t->wrong++; break;
	default:
		t->empty++;
		fprintf(stderr, "  byte at offset %llu: error without a message\n",
			(unsigned long long)off);
	}
}

/* `tips pool check PATH --index NAME`: exit 0 or 1, never a signal or a hang. */
static void run_cli(const char *tool, const char *path, const char *index, uint64_t off,
		    unsigned *cli_bad)
{
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		alarm(CHILD_SECONDS);
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		execl(tool, tool, "pool", "check", path, "--index", index, (char *)NULL);
		_exit(127);
	}
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	if (WIFSIGNALED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 1)) {
		(*cli_bad)++;
		fprintf(stderr, "  tips pool check, byte at offset %llu: %s %d\n",
			(unsigned long long)off, WIFSIGNALED(st) ? "signal" : "exit code",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
}

/* Directed: every byte of the framework header's index root word (neither checksummed
 * nor in the header's crc), flipped in its lowest and highest bit, must be reported by
 * a plain tips_open (no TIPS_VERIFY), with a message. */
static void root_word_flips(const char *pristine, const char *trial_path,
			    const struct tips_index_ops *ops, const struct model *m,
			    const struct targets *t)
{
	struct tally tally = { 0 };
	uint64_t root = t->fw_hdr.off + offsetof(struct fw_header, index_root);
	for (unsigned byte = 0; byte < 8; byte++) {
		for (unsigned mask = 0x01; mask <= 0x80; mask <<= 7) {
			copy_file(pristine, trial_path);
			flip(trial_path, root + byte, (unsigned char)mask);
			run_trial(trial_path, ops, m, &tally, root + byte, 0);
		}
	}
	unlink(trial_path);
	printf("%s index root word: %u flips, %u detected, %u crashes, %u empty messages\n",
	       ops->name, tally.trials, tally.detected, tally.crashes, tally.empty);
	CHECK(tally.detected == tally.trials);
}

static void campaign(const char *name, const char *pristine, const char *trial_path,
		     const struct tips_index_ops *ops, const struct model *m, unsigned flips,
		     uint64_t *rng, const char *tool, unsigned cli_flips)
{
	char scratch[256];
	snprintf(scratch, sizeof(scratch), "%s.scratch", trial_path);
	struct targets t;
	find_targets(pristine, scratch, &t);
	if (strcmp(name, "unclean") == 0)
		REQUIRE(t.live_records > 0); /* the kill left records for recovery */
	else
		root_word_flips(pristine, trial_path, ops, m, &t);
	struct tally tally = { 0 };
	unsigned cli_bad = 0;
	for (unsigned f = 0; f < flips + cli_flips; f++) {
		copy_file(pristine, trial_path);
		uint64_t off = pick_offset(&t, rng);
		flip(trial_path, off, (unsigned char)(rnd(rng) % 255 + 1));
		if (f < flips)
			run_trial(trial_path, ops, m, &tally, off, TIPS_VERIFY);
		else
			run_cli(tool, trial_path, ops->name, off, &cli_bad);
	}
	unlink(trial_path);
	printf("%s %s: trials %u, detected %u, clean %u, clean with wrong answers %u, "
	       "crashes %u, empty messages %u; tips pool check: %u runs, %u bad\n", ops->name,
	       name, tally.trials, tally.detected, tally.clean, tally.wrong, tally.crashes,
	       tally.empty, cli_flips, cli_bad);
	CHECK(tally.crashes == 0);
	CHECK(tally.empty == 0);
	CHECK(cli_bad == 0);
	CHECK(tally.detected > 0 || flips < 20); /* the check must be able to say no */
	free(t.logs);
	free(t.blocks);
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 6) {
		fprintf(stderr, "usage: %s INDEX FLIPS SEED [TIPS_BINARY CLI_FLIPS]\n", argv[0]);
		return 2;
	}
	const struct tips_index_ops *ops = tips_index_find(argv[1]);
	REQUIRE(ops);
	unsigned flips = (unsigned)strtoul(argv[2], NULL, 10);
	uint64_t rng = strtoull(argv[3], NULL, 10) * 0x9e3779b97f4a7c15ull | 1;
	const char *tool = argc == 6 ? argv[4] : NULL;
	unsigned cli_flips = argc == 6 ? (unsigned)strtoul(argv[5], NULL, 10) : 0;

	char clean[256], unclean[256], trial[256];
	test_path(clean, sizeof(clean), "/dev/shm", "corrupt-clean");
	test_path(unclean, sizeof(unclean), "/dev/shm", "corrupt-unclean");
	test_path(trial, sizeof(trial), "/dev/shm", "corrupt-trial");
	static struct model m_clean, m_unclean;
	build_clean(clean, ops, &m_clean);
	copy_file(clean, unclean);
	m_unclean = m_clean;
	build_unclean(unclean, ops, &m_unclean);

	campaign("clean", clean, trial, ops, &m_clean, flips, &rng, tool, cli_flips);
	campaign("unclean", unclean, trial, ops, &m_unclean, flips, &rng, tool, cli_flips);
	unlink(clean);
	unlink(unclean);
	return test_finish("test_corrupt");
}
