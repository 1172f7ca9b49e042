/*
 * resp_fuzz_test.c - the request parser of tips-server (src/server/resp.c) against
 * well-formed requests split at every kind of boundary, the protocol errors Redis
 * names, and random and mutated bytes.
 *
 * What must hold: every well-formed request parses to exactly its arguments however the
 * bytes arrive; every malformed one ends in RESP_ERROR with Redis's text, never a crash
 * (ASan/UBSan run this too: scripts/test.sh --sanitize address); the parser's own
 * memory stays within its limits (argument arrays <= max_args, inline buffer <=
 * RESP_INLINE_MAX) whatever it is fed. Deterministic: fixed seeds.
 */
#include "resp.h"
#include "test_util.h"

#include <stdint.h>

static uint64_t seed = 88172645463325252ull;
/* A number in [0, n). */
static size_t pick(size_t n)
{
	return n ? (size_t)(rnd(&seed) % n) : 0;
}

#define MAX_BULK 4096u
#define MAX_ARGS 1000u

/* What a feed produced. */
struct outcome {
	int commands;      /* complete non-empty commands */
	int error;         /* 1 if RESP_ERROR */
	char err[128];
	/* the first command's arguments, flattened "len:bytes" */
	char first[8192];
	size_t first_len;
};

/* Feeds @in to a parser in chunks of random size (1 .. @maxchunk), the way net.c does:
 * the buffer holds the unparsed tail, parsing restarts at the command's start. */
static void feed(const char *in, size_t len, size_t maxchunk, struct outcome *o)
{
	struct resp_parser p;
	resp_parser_init(&p, MAX_BULK, MAX_ARGS);
	memset(o, 0, sizeof(*o));
	char *buf = malloc(len + 1);
	size_t have = 0, start = 0, fed = 0;
	while (fed < len || start < have) {
		if (fed < len) {
			size_t n = 1 + pick(maxchunk);
			if (n > len - fed)
				n = len - fed;
			memcpy(buf + have, in + fed, n);
			have += n;
			fed += n;
		}
		int progress = 0;
		while (start < have) {
			int rc = resp_parse(&p, buf + start, have - start);
			/* memory bounds, after every call */
			CHECK(p.cap <= 2 * MAX_ARGS);
			CHECK(p.inl_cap <= RESP_INLINE_MAX + 2);
			if (rc == RESP_MORE) {
				CHECK(resp_command_min_size(&p) <= have - start + MAX_BULK + 2 + 32);
				break;
			}
			if (rc == RESP_ERROR) {
				o->error = 1;
				snprintf(o->err, sizeof(o->err), "%s", p.err);
				goto done;
			}
			CHECK(p.used > 0 && p.used <= have - start);
			start += p.used;
			progress = 1;
			if (p.argc > 0) {
				CHECK(p.argc <= (int)MAX_ARGS);
				if (o->commands++ == 0) {
					for (int i = 0; i < p.argc; i++) {
						CHECK(p.argv[i].len <= MAX_BULK + RESP_INLINE_MAX);
						int n = snprintf(o->first + o->first_len,
								 sizeof(o->first) - o->first_len, "%zu:",
								 p.argv[i].len);
						o->first_len += (size_t)n;
						size_t room = sizeof(o->first) - o->first_len;
						size_t c = p.argv[i].len < room ? p.argv[i].len : room;
						memcpy(o->first + o->first_len, p.argv[i].ptr, c);
						o->first_len += c;
					}
				}
			}
		}
		if (fed >= len && !progress)
			break;
	}
done:
	free(buf);
	resp_parser_free(&p);
}

/* Encodes argv as a multibulk request into @out; returns its length. */
static size_t encode(char *out, int argc, char **argv, size_t *lens)
{
	size_t n = (size_t)sprintf(out, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++) {
		n += (size_t)sprintf(out + n, "$%zu\r\n", lens[i]);
		memcpy(out + n, argv[i], lens[i]);
		n += lens[i];
		memcpy(out + n, "\r\n", 2);
		n += 2;
	}
	return n;
}

static void flatten(char *out, size_t *olen, int argc, char **argv, size_t *lens)
{
	*olen = 0;
	for (int i = 0; i < argc; i++) {
		*olen += (size_t)sprintf(out + *olen, "%zu:", lens[i]);
		memcpy(out + *olen, argv[i], lens[i]);
		*olen += lens[i];
	}
}

static void test_roundtrip(void)
{
	static char req[64 * 1024], want[16 * 1024], store[16][300];
	for (int round = 0; round < 3000; round++) {
		int argc = 1 + (int)pick(12);
		char *argv[16];
		size_t lens[16];
		for (int i = 0; i < argc; i++) {
			lens[i] = pick(i == 0 ? 20 : 300);
			for (size_t j = 0; j < lens[i]; j++)
				store[i][j] = (char)pick(256);
			argv[i] = store[i];
		}
		size_t n = encode(req, argc, argv, lens);
		/* a second command after it: pipelining */
		memcpy(req + n, "*1\r\n$4\r\nPING\r\n", 14);
		size_t wl;
		flatten(want, &wl, argc, argv, lens);
		struct outcome o;
		feed(req, n + 14, round % 3 == 0 ? 1 : 1 + pick(64), &o);
		CHECK(!o.error);
		CHECK(o.commands == 2);
		CHECK(o.first_len == wl && !memcmp(o.first, want, wl));
	}
}

static void expect_args(const char *in, const char *want)
{
	struct outcome o;
	feed(in, strlen(in), 1 + pick(8), &o);
	if (o.error || o.first_len != strlen(want) || memcmp(o.first, want, o.first_len)) {
		fprintf(stderr, "input %s: got %.*s (error '%s'), want %s\n", in, (int)o.first_len,
			o.first, o.err, want);
		test_failures++;
	}
}

static void expect_error(const char *in, size_t len, const char *err)
{
	struct outcome o;
	feed(in, len, 1 + pick(8), &o);
	if (!o.error || strcmp(o.err, err)) {
		fprintf(stderr, "input %.40s: got error '%s', want '%s'\n", in, o.err, err);
		test_failures++;
	}
}

static void test_inline(void)
{
	expect_args("PING\r\n", "4:PING");
	expect_args("set  k   v\n", "3:set1:k1:v");
	expect_args("SET \"a b\" 'c\\'d'\r\n", "3:SET3:a b3:c'd");
	expect_args("ECHO \"\\x41\\n\\t\\\\\"\r\n", "4:ECHO4:A\n\t\\");
	expect_args("ECHO \"\"\r\n", "4:ECHO0:");
	expect_args("\r\n\r\nPING\r\n", "4:PING"); /* empty lines are skipped */
	expect_error("SET \"abc\r\n", 10, "Protocol error: unbalanced quotes in request");
	expect_error("SET \"abc\"def\r\n", 14, "Protocol error: unbalanced quotes in request");
	expect_error("SET 'abc\r\n", 10, "Protocol error: unbalanced quotes in request");
	static char big[RESP_INLINE_MAX + 100];
	memset(big, 'a', sizeof(big));
	expect_error(big, sizeof(big), "Protocol error: too big inline request");
}

static void test_multibulk_errors(void)
{
	expect_error("*abc\r\n", 6, "Protocol error: invalid multibulk length");
	expect_error("*2000000\r\n", 10, "Protocol error: invalid multibulk length");
	expect_error("*1\r\n*1\r\n", 8, "Protocol error: expected '$', got '*'");
	expect_error("*2\r\n$1\r\na\r\n:5\r\n", 16, "Protocol error: expected '$', got ':'");
	expect_error("*1\r\n$-1\r\n", 9, "Protocol error: invalid bulk length");
	expect_error("*1\r\n$99999999999999999999\r\n", 27, "Protocol error: invalid bulk length");
	expect_error("*1\r\n$5000\r\n", 11, "Protocol error: invalid bulk length"); /* > MAX_BULK */
	expect_error("*1\r\n$+1\r\n", 9, "Protocol error: invalid bulk length");
	expect_error("*1\r\n$01\r\n", 9, "Protocol error: invalid bulk length");
	static char big[RESP_INLINE_MAX + 100];
	memset(big, '1', sizeof(big));
	big[0] = '*';
	expect_error(big, sizeof(big), "Protocol error: too big mbulk count string");
	memcpy(big, "*1\r\n$", 5);
	expect_error(big, sizeof(big), "Protocol error: too big bulk count string");
	/* empty and negative counts are skipped, like Redis */
	expect_args("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", "4:PING");
	/* truncated frames only ask for more */
	const char *full = "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
	for (size_t cut = 1; cut < strlen(full); cut++) {
		struct outcome o;
		feed(full, cut, 3, &o);
		CHECK(!o.error && o.commands == 0);
	}
}

/* Random bytes and mutated requests: whatever happens, no crash, bounded memory. */
static void test_garbage(void)
{
	static char buf[8192];
	static const char alphabet[] = "*$\r\n0123456789-+ \"'\\xabc:";
	for (int round = 0; round < 20000; round++) {
		size_t n;
		if (round % 2) {
			n = 1 + pick(sizeof(buf) - 1);
			for (size_t i = 0; i < n; i++)
				buf[i] = round % 4 == 1 ? (char)pick(256)
							: alphabet[pick(sizeof(alphabet) - 1)];
		} else {
			char *argv[4] = {"SET", "key", "value", "x"};
			size_t lens[4] = {3, 3, 5, 1};
			n = encode(buf, 1 + (int)pick(4), argv, lens);
			n += encode(buf + n, 2, argv, lens);
			int muts = 1 + (int)pick(4);
			for (int m = 0; m < muts; m++) {
				size_t at = pick(n);
				switch (pick(4)) {
				case 0: buf[at] = (char)pick(256); break;
				case 1: buf[at] = alphabet[pick(sizeof(alphabet) - 1)]; break;
				case 2: if (n > 1) { memmove(buf + at, buf + at + 1, n - at - 1); n--; } break;
				default: n = at + 1; break; /* truncate */
				}
			}
		}
		struct outcome o;
		feed(buf, n, 1 + pick(32), &o);
		if (o.error)
			CHECK(!strncmp(o.err, "Protocol error: ", 16));
	}
}

int main(void)
{
	test_roundtrip();
	test_inline();
	test_multibulk_errors();
	test_garbage();
	return test_finish("resp_fuzz_test");
}
