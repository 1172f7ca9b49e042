/*
 * test_pibench_plugin.cpp - drives one libtips_pibench*.so exactly as one PiBench
 * layout calls it, and checks the tree_api contract for tips-hash and dram-hash. It
 * is built once per layout (TIPS_PIBENCH_LAYOUT, as the plug-ins are) and run on the
 * library of that layout.
 *
 * Invariant: every call goes through the vtable slot the PiBench of that layout calls
 * (slot_table below, written from upstream's include/tree_api.hpp at each commit and
 * not from the class in bench/pibench/tree_api.h): a library of another layout, or a
 * wrong declaration in tree_api.h, makes the calls land in other functions and the
 * checks fail. Only tree_options_t and create_tree's type come from tree_api.h.
 *
 * Like the harness, it links no libtips: it dlopen()s the plug-in (RTLD_NOW, path in
 * argv[1]), finds create_tree with dlsym, picks the index with TIPS_PIBENCH_INDEX,
 * calls from threads that come and go (in the tls layout each calls tls_setup first,
 * as PiBench's threads do) and deletes the tree on the main thread. Checked: key 0;
 * insert of a present key, update and remove of an absent one (false, nothing
 * changes); scans in numeric order against a std::map model, with a buffer of each
 * thread's own; 3 rounds of 2 short-lived threads and concurrent inserts of disjoint
 * keys; bulk_load (layouts that have it); for tips-hash the data surviving a delete
 * and re-create on the same pool_path with a warning on stderr, a temporary pool
 * (empty pool_path) unlinked as soon as it is open, also when the process exits
 * without deleting the tree; the one stderr line naming the index (and the default);
 * one stderr line for repeated failures; an unknown index name giving nullptr.
 */
#include "tree_api.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

/* A check that stops the test: prints file:line and the expression, exits 1. */
#define REQUIRE(cond)                                                                    \
	do {                                                                             \
		if (!(cond)) {                                                           \
			std::fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, \
				     __LINE__, #cond);                                   \
			std::exit(1);                                                    \
		}                                                                        \
	} while (0)

namespace {

/*
 * The vtable slots PiBench's compiled code calls, per layout. Itanium C++ ABI: the
 * virtual destructor takes slots 0 (complete object) and 1 (deleting: `delete tree`),
 * then come the virtual functions in declaration order; -1: not in this layout.
 *   master a78171a:   ~tree_api find insert update remove scan
 *   bulk-loading cd88a61:  ~tree_api bulk_load find insert update remove scan
 *   optiql 11c74d6 (2023): ~tree_api bulk_load find insert update remove scan tls_setup
 */
struct slot_table {
	int destroy, bulk_load, find, insert, update, remove, scan, tls_setup;
};
#if TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_MASTER
constexpr slot_table slots = { 1, -1, 2, 3, 4, 5, 6, -1 };
#elif TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_BULKLOAD
constexpr slot_table slots = { 1, 2, 3, 4, 5, 6, 7, -1 };
#else
constexpr slot_table slots = { 1, 2, 3, 4, 5, 6, 7, 8 };
#endif

/* A tree as PiBench of this layout calls it: by slot number. */
class pibench_tree {
public:
	explicit pibench_tree(tree_api *t) : t_(t) {}
	explicit operator bool() const { return t_ != nullptr; }

	bool bulk_load(const char *records, size_t count, size_t key_size,
		       size_t value_size) const
	{
		return call<bool, const char *, size_t, size_t, size_t>(
			slots.bulk_load, records, count, key_size, value_size);
	}
	bool find(const char *key, size_t key_size, char *value_out) const
	{
		return call<bool, const char *, size_t, char *>(slots.find, key, key_size,
								 value_out);
	}
	bool insert(const char *key, size_t key_size, const char *value,
		    size_t value_size) const
	{
		return call<bool, const char *, size_t, const char *, size_t>(
			slots.insert, key, key_size, value, value_size);
	}
	bool update(const char *key, size_t key_size, const char *value,
		    size_t value_size) const
	{
		return call<bool, const char *, size_t, const char *, size_t>(
			slots.update, key, key_size, value, value_size);
	}
	bool remove(const char *key, size_t key_size) const
	{
		return call<bool, const char *, size_t>(slots.remove, key, key_size);
	}
	int scan(const char *key, size_t key_size, int count, char *&records_out) const
	{
		return call<int, const char *, size_t, int, char *&>(slots.scan, key, key_size,
								      count, records_out);
	}
	/* What every PiBench thread does first: tls_setup in the tls layout, else nothing. */
	void begin_thread() const
	{
		if (slots.tls_setup >= 0)
			call<void>(slots.tls_setup);
	}
	/* `delete tree`: the deleting destructor. */
	void destroy() { call<void>(slots.destroy); t_ = nullptr; }

private:
	template <typename R, typename... Args> R call(int slot, Args... args) const
	{
		REQUIRE(slot >= 0 && t_);
		using fn = R (*)(tree_api *, Args...);
		void *const *vtable = *reinterpret_cast<void *const *const *>(t_);
		return reinterpret_cast<fn>(vtable[slot])(t_, args...);
	}
	tree_api *t_;
};

using create_tree_fn = tree_api *(*)(const tree_options_t &);
create_tree_fn create;

const size_t value_size = 8;

/* PiBench's keys: 8 bytes, a native uint64. */
struct key8 {
	char bytes[8];
	explicit key8(uint64_t k) { std::memcpy(bytes, &k, 8); }
};

uint64_t value_of(uint64_t key) { return key * 3 + 1; }

bool insert(const pibench_tree &t, uint64_t k, uint64_t v)
{
	return t.insert(key8(k).bytes, 8, reinterpret_cast<const char *>(&v), sizeof(v));
}

bool update(const pibench_tree &t, uint64_t k, uint64_t v)
{
	return t.update(key8(k).bytes, 8, reinterpret_cast<const char *>(&v), sizeof(v));
}

/* find() into PiBench's large buffer; *out is the value's first 8 bytes. */
bool find(const pibench_tree &t, uint64_t k, uint64_t *out)
{
	char buf[4096];
	std::memset(buf, 0xee, sizeof(buf));
	bool found = t.find(key8(k).bytes, 8, buf);
	std::memcpy(out, buf, sizeof(*out));
	return found;
}

uint64_t u64_at(const char *p)
{
	uint64_t v;
	std::memcpy(&v, p, sizeof(v));
	return v;
}

/* create_tree as PiBench calls it (index nullptr: TIPS_PIBENCH_INDEX unset). */
pibench_tree make(const char *index, const std::string &pool_path = "")
{
	if (index)
		setenv("TIPS_PIBENCH_INDEX", index, 1);
	else
		unsetenv("TIPS_PIBENCH_INDEX");
	tree_options_t o;
	o.key_size = 8;
	o.value_size = value_size;
	o.pool_path = pool_path;
	o.num_threads = 2;
#if TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_TLS
	static int epoch_manager; /* PiBench passes its own; the plug-in must not need it */
	o.data = &epoch_manager;
#endif
	return pibench_tree(create(o));
}

/* Scans @count from @start and compares with the model: same keys from the first
 * key >= start, ascending, right values, count == min(count, keys available). */
void check_scan(const pibench_tree &t, const std::map<uint64_t, uint64_t> &model, uint64_t start,
		int count)
{
	char *records = nullptr;
	int n = t.scan(key8(start).bytes, 8, count, records);
	auto it = model.lower_bound(start);
	int available = (int)std::distance(it, model.end());
	REQUIRE(n == std::min(count, available));
	for (int i = 0; i < n; i++, ++it) {
		const char *rec = records + (size_t)i * (8 + value_size);
		REQUIRE(u64_at(rec) == it->first);
		REQUIRE(u64_at(rec + 8) == it->second);
	}
}

/* Key 0, insert of a present key, update and remove of present and absent keys. */
void check_point_ops(const pibench_tree &t, std::map<uint64_t, uint64_t> &model)
{
	uint64_t v = 0;
	REQUIRE(!find(t, 0, &v));
	REQUIRE(insert(t, 0, 77));
	REQUIRE(find(t, 0, &v) && v == 77);
	REQUIRE(!insert(t, 0, 78)); /* duplicate: false, value kept */
	REQUIRE(find(t, 0, &v) && v == 77);

	REQUIRE(!update(t, 5, 1)); /* absent */
	REQUIRE(!find(t, 5, &v));
	REQUIRE(update(t, 0, 79));
	REQUIRE(find(t, 0, &v) && v == 79);

	REQUIRE(!t.remove(key8(5).bytes, 8)); /* absent */
	REQUIRE(insert(t, 5, 50));
	REQUIRE(t.remove(key8(5).bytes, 8));
	REQUIRE(!find(t, 5, &v));
	REQUIRE(!t.remove(key8(5).bytes, 8));
	REQUIRE(insert(t, 5, 51)); /* a removed key can come back */
	REQUIRE(find(t, 5, &v) && v == 51);
	model[0] = 79;
	model[5] = 51;
}

/* Keys in random order, including values whose little-endian bytes sort differently
 * from their numeric order (255 < 256, 2^32-1 < 2^32...); scans from many starts. */
void check_scans(const pibench_tree &t, std::map<uint64_t, uint64_t> &model)
{
	std::vector<uint64_t> keys;
	for (uint64_t k = 10; k <= 2000; k += 10)
		keys.push_back(k);
	const uint64_t tricky[] = { 255, 256, 65535, 65536, 4294967295, 4294967296,
				    (1ull << 56) + 1, UINT64_MAX - 1 };
	keys.insert(keys.end(), std::begin(tricky), std::end(tricky));
	std::mt19937_64 rng(42);
	std::shuffle(keys.begin(), keys.end(), rng);
	for (uint64_t k : keys) {
		REQUIRE(insert(t, k, value_of(k)));
		model[k] = value_of(k);
	}
	const uint64_t starts[] = { 0, 1, 10, 15, 250, 256, 1995, 2000, 65535, 4294967296,
				    UINT64_MAX - 2, UINT64_MAX };
	for (uint64_t start : starts)
		for (int count : { 1, 7, 100, 1000 })
			check_scan(t, model, start, count);
	char *records = nullptr;
	REQUIRE(t.scan(key8(0).bytes, 8, 0, records) == 0);
}

/* Two threads scanning at once: each gets its own buffer, and its records stay right
 * while the other thread scans. */
void check_scan_buffers(const pibench_tree &t, const std::map<uint64_t, uint64_t> &model)
{
	std::atomic<int> arrived{0};
	char *buffers[2] = { nullptr, nullptr };
	auto worker = [&](int id) {
		t.begin_thread();
		uint64_t start = id ? 1000 : 20;
		char *records = nullptr;
		int n = t.scan(key8(start).bytes, 8, 50, records);
		buffers[id] = records;
		arrived++;
		while (arrived.load() < 2)
			std::this_thread::yield();
		/* the other thread has scanned too: ours is unchanged */
		auto it = model.lower_bound(start);
		REQUIRE(n == 50);
		for (int i = 0; i < n; i++, ++it) {
			REQUIRE(u64_at(records + (size_t)i * 16) == it->first);
			REQUIRE(u64_at(records + (size_t)i * 16 + 8) == it->second);
		}
		check_scan(t, model, start + 5, 20); /* this thread's buffer is reused */
	};
	std::thread a(worker, 0), b(worker, 1);
	a.join();
	b.join();
	REQUIRE(buffers[0] && buffers[1] && buffers[0] != buffers[1]);
}

/* Threads that come and go: 3 rounds of 2, each thread inserting and finding its own
 * keys (7 distinct threads with main, more than PiBench's 2T-1 = 3), then 4 at once. */
void check_threads(const pibench_tree &t, std::map<uint64_t, uint64_t> &model)
{
	const uint64_t base = 1ull << 40;
	static const uint64_t per_thread = 500;
	uint64_t next = base;
	auto round = [&](int threads) {
		std::vector<std::thread> v;
		for (int i = 0; i < threads; i++) {
			uint64_t first = next + i * per_thread;
			v.emplace_back([t, first] {
				t.begin_thread();
				for (uint64_t k = first; k < first + per_thread; k++)
					REQUIRE(insert(t, k, value_of(k)));
				for (uint64_t k = first; k < first + per_thread; k++) {
					uint64_t got;
					REQUIRE(find(t, k, &got) && got == value_of(k));
				}
				REQUIRE(!insert(t, first, 0));
			});
		}
		for (auto &th : v)
			th.join();
		for (uint64_t k = next; k < next + threads * per_thread; k++)
			model[k] = value_of(k);
		next += threads * per_thread;
	};
	round(2);
	round(2);
	round(2);
	round(4);
	for (uint64_t k = base; k < next; k++) {
		uint64_t got;
		REQUIRE(find(t, k, &got) && got == value_of(k));
	}
	check_scan(t, model, base + 123, 100);
}

/* Bulk loading, in the layouts that have it. */
void check_bulk_load(const pibench_tree &t, std::map<uint64_t, uint64_t> &model)
{
	const uint64_t base = 1ull << 48;
	std::vector<char> records;
	for (uint64_t k = base; k < base + 64; k++) {
		uint64_t v = value_of(k);
		key8 key(k);
		records.insert(records.end(), key.bytes, key.bytes + 8);
		records.insert(records.end(), (const char *)&v, (const char *)&v + 8);
		model[k] = v;
	}
	if (slots.bulk_load < 0)
		return;
	REQUIRE(t.bulk_load(records.data(), 64, 8, 8));
	check_scan(t, model, base, 64);
}

/* What @f writes on stderr (file descriptor 2). */
template <typename F> std::string stderr_of(F f)
{
	char path[] = "/tmp/tips-pibench-stderr.XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	std::fflush(stderr);
	int saved = dup(2);
	REQUIRE(dup2(fd, 2) == 2);
	f();
	std::fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	std::ifstream in(path);
	std::stringstream text;
	text << in.rdbuf();
	unlink(path);
	return text.str();
}

/* How many lines of @text contain @needle. */
int lines_with(const std::string &text, const char *needle)
{
	std::istringstream in(text);
	int n = 0;
	for (std::string line; std::getline(in, line);)
		n += line.find(needle) != std::string::npos;
	return n;
}

/* Failures other than exists/absent (here: a key longer than libtips allows) return
 * false and print one line on stderr, however often they happen. */
void check_failure_reported_once(const pibench_tree &t)
{
	std::vector<char> big(4096, 'k');
	uint64_t v = 1;
	std::string err = stderr_of([&] {
		for (int i = 0; i < 5; i++)
			REQUIRE(!t.insert(big.data(), big.size(), (const char *)&v, 8));
	});
	REQUIRE(lines_with(err, "tips_pibench") == 1);
}

/* create_tree names the index once on stderr, and says when it is the default. */
void check_announced()
{
	pibench_tree t(nullptr);
	std::string err = stderr_of([&] { t = make(nullptr); });
	REQUIRE(t);
	t.destroy();
	REQUIRE(lines_with(err, "tips_pibench") == 1);
	REQUIRE(lines_with(err, "index tips-hash (TIPS_PIBENCH_INDEX unset: the default)") == 1);
	REQUIRE(lines_with(err, TIPS_PIBENCH_LAYOUT_NAME) == 1);

	err = stderr_of([&] { t = make("dram-hash"); });
	REQUIRE(t);
	t.destroy();
	REQUIRE(lines_with(err, "tips_pibench") == 1);
	REQUIRE(lines_with(err, "index dram-hash, ") == 1);
	std::printf("create_tree names the index it runs\n");
}

void check_index(const char *index)
{
	pibench_tree t = make(index);
	REQUIRE(t);
	t.begin_thread();
	std::map<uint64_t, uint64_t> model;
	check_point_ops(t, model);
	check_scans(t, model);
	check_scan_buffers(t, model);
	check_threads(t, model);
	check_bulk_load(t, model);
	if (std::strncmp(index, "tips-", 5) == 0)
		check_failure_reported_once(t);
	t.destroy(); /* on the main thread, as PiBench does */
	std::printf("%s: contract holds\n", index);
}

/* Files in /dev/shm named tips-pibench-PID-*: temporary pools of process @pid. */
int temp_pools(pid_t pid)
{
	std::string prefix = "tips-pibench-" + std::to_string(pid) + "-";
	int n = 0;
	DIR *d = opendir("/dev/shm");
	REQUIRE(d);
	while (dirent *e = readdir(d))
		n += std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0;
	closedir(d);
	return n;
}

/* An empty pool_path: a temporary pool, unlinked as soon as it is open; nothing is
 * left even by a process that exits without deleting the tree (a PiBench exit(1)). */
void check_temporary_pool()
{
	pibench_tree t = make("tips-hash");
	REQUIRE(t);
	REQUIRE(temp_pools(getpid()) == 0);
	REQUIRE(insert(t, 1, 2));
	uint64_t got;
	REQUIRE(find(t, 1, &got) && got == 2);
	t.destroy();
	REQUIRE(temp_pools(getpid()) == 0);

	pid_t child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		pibench_tree c = make("tips-hash");
		_exit(c && insert(c, 1, 2) ? 3 : 4); /* no delete, no atexit handlers */
	}
	int status;
	REQUIRE(waitpid(child, &status, 0) == child);
	REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	REQUIRE(temp_pools(child) == 0);
}

/* A given pool_path: created, kept, and reopened with its data, with a warning on
 * stderr when the reopened pool holds keys (PiBench's load inserts would fail). */
void check_kept_pool()
{
	std::string path = "/dev/shm/tips-test-pibench-" + std::to_string(getpid()) + ".pool";
	unlink(path.c_str());
	pibench_tree t(nullptr);
	std::string err = stderr_of([&] { t = make("tips-hash", path); });
	REQUIRE(t);
	REQUIRE(lines_with(err, "(created, kept)") == 1);
	REQUIRE(lines_with(err, "already holds keys") == 0);
	std::map<uint64_t, uint64_t> model;
	for (uint64_t k = 0; k < 300; k++) {
		REQUIRE(insert(t, k * 7, value_of(k * 7)));
		model[k * 7] = value_of(k * 7);
	}
	REQUIRE(update(t, 0, 999));
	model[0] = 999;
	REQUIRE(t.remove(key8(7).bytes, 8));
	model.erase(7);
	t.destroy();
	REQUIRE(access(path.c_str(), F_OK) == 0);

	err = stderr_of([&] { t = make("tips-hash", path); });
	REQUIRE(t);
	REQUIRE(lines_with(err, "(reopened, kept)") == 1);
	REQUIRE(lines_with(err, "already holds keys") == 1);
	for (const auto &kv : model) {
		uint64_t got;
		REQUIRE(find(t, kv.first, &got) && got == kv.second);
	}
	uint64_t got;
	REQUIRE(!find(t, 7, &got));
	REQUIRE(!insert(t, 14, 0)); /* still present after the reopen */
	check_scan(t, model, 0, 1000);
	t.destroy();
	REQUIRE(access(path.c_str(), F_OK) == 0);
	unlink(path.c_str());
}

void check_pools()
{
	check_temporary_pool();
	check_kept_pool();
	std::printf("tips-hash: pools created, kept, reopened and removed as documented\n");
}

} // namespace

int main(int argc, char **argv)
{
	REQUIRE(argc == 2);
	/* small pools and indexes: this is a test, not a benchmark */
	setenv("TIPS_PIBENCH_POOL_SIZE", "64M", 1);
	setenv("TIPS_PIBENCH_EXPECTED_KEYS", "4096", 1);
	void *lib = dlopen(argv[1], RTLD_NOW);
	if (!lib)
		std::fprintf(stderr, "dlopen: %s\n", dlerror());
	REQUIRE(lib);
	create = reinterpret_cast<create_tree_fn>(dlsym(lib, "create_tree"));
	REQUIRE(create);
	REQUIRE(dlsym(lib, "tips_open") == nullptr); /* only create_tree is exported */

	std::printf("driving %s as %s calls it\n", argv[1], TIPS_PIBENCH_LAYOUT_NAME);
	check_announced();
	check_index("tips-hash");
	check_index("dram-hash");
	check_pools();

	setenv("TIPS_PIBENCH_INDEX", "no-such-index", 1);
	tree_options_t o;
	REQUIRE(create(o) == nullptr);

	REQUIRE(dlclose(lib) == 0);
	std::printf("test_pibench_plugin: all checks passed\n");
	return 0;
}
