/*
 * resp.c - the incremental RESP2 / inline request parser (resp.h).
 *
 * Multibulk: "*N\r\n" then N times "$LEN\r\n" LEN bytes "\r\n". Inline: one line split
 * into words, where "double quotes" take C-like escapes (\n \r \t \b \a \\ \" \xHH) and
 * 'single quotes' take only \', and a closing quote must end its word. The error texts
 * are Redis's (networking.c and sds.c of Redis 7 describe the same checks).
 *
 * Invariant: p->pos only moves forward over bytes already validated, every length is
 * checked against its limit before it is used, and nothing beyond buf[len) is read.
 */
#include "resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void resp_parser_init(struct resp_parser *p, size_t max_bulk, size_t max_args)
{
	memset(p, 0, sizeof(*p));
	p->max_bulk = max_bulk;
	p->max_args = max_args;
	p->expect = -1;
	p->bulk = -1;
}

void resp_parser_free(struct resp_parser *p)
{
	free(p->off);
	free(p->lens);
	free(p->argv);
	free(p->inl);
	memset(p, 0, sizeof(*p));
}

static void reset(struct resp_parser *p)
{
	p->pos = 0;
	p->expect = -1;
	p->bulk = -1;
	p->nargs = 0;
}

static int fail(struct resp_parser *p, const char *msg)
{
	snprintf(p->err, sizeof(p->err), "Protocol error: %s", msg);
	reset(p);
	return RESP_ERROR;
}

int resp_parse_ll(const char *s, size_t n, long long *out)
{
	if (n == 0 || n > 20)
		return -1;
	size_t i = 0;
	int neg = 0;
	if (s[0] == '-') {
		neg = 1;
		if (++i == n)
			return -1;
	}
	if (s[i] == '0')
		return (n == 1) ? (*out = 0, 0) : -1;
	unsigned long long v = 0;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (~0ull - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (neg) {
		if (v > (unsigned long long)1 << 63)
			return -1;
		*out = (long long)(0 - v);
	} else {
		if (v > (unsigned long long)(~0ull >> 1))
			return -1;
		*out = (long long)v;
	}
	return 0;
}

static int reserve(struct resp_parser *p, size_t n)
{
	if (n <= p->cap)
		return 0;
	size_t cap = p->cap ? p->cap : 8;
	while (cap < n)
		cap *= 2;
	size_t *off = realloc(p->off, cap * sizeof(*off));
	if (!off)
		return -1;
	p->off = off;
	size_t *lens = realloc(p->lens, cap * sizeof(*lens));
	if (!lens)
		return -1;
	p->lens = lens;
	struct arg *argv = realloc(p->argv, cap * sizeof(*argv));
	if (!argv)
		return -1;
	p->argv = argv;
	p->cap = cap;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Splits the inline line [s, s+n) into p->inl; offsets into p->inl. */
static int split_inline(struct resp_parser *p, const char *s, size_t n)
{
	if (n + 1 > p->inl_cap) {
		char *b = realloc(p->inl, n + 1);
		if (!b)
			return fail(p, "out of memory");
		p->inl = b;
		p->inl_cap = n + 1;
	}
	size_t i = 0, w = 0;
	p->nargs = 0;
	for (;;) {
		while (i < n && is_space(s[i]))
			i++;
		if (i == n)
			break;
		size_t start = w;
		int inq = 0, insq = 0, done = 0;
		while (!done) {
			if (inq) {
				if (i == n)
					return fail(p, "unbalanced quotes in request");
				if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' &&
				    hexval(s[i + 2]) >= 0 && hexval(s[i + 3]) >= 0) {
					p->inl[w++] = (char)(hexval(s[i + 2]) * 16 + hexval(s[i + 3]));
					i += 3;
				} else if (s[i] == '\\' && i + 1 < n) {
					char c = s[++i];
					p->inl[w++] = c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t'
						  : c == 'b' ? '\b' : c == 'a' ? '\a' : c;
				} else if (s[i] == '"') {
					if (i + 1 < n && !is_space(s[i + 1]))
						return fail(p, "unbalanced quotes in request");
					done = 1;
				} else {
					p->inl[w++] = s[i];
				}
			} else if (insq) {
				if (i == n)
					return fail(p, "unbalanced quotes in request");
				if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\'') {
					p->inl[w++] = '\'';
					i++;
				} else if (s[i] == '\'') {
					if (i + 1 < n && !is_space(s[i + 1]))
						return fail(p, "unbalanced quotes in request");
					done = 1;
				} else {
					p->inl[w++] = s[i];
				}
			} else {
				if (i == n || is_space(s[i]))
					done = 1;
				else if (s[i] == '"')
					inq = 1;
				else if (s[i] == '\'')
					insq = 1;
				else
					p->inl[w++] = s[i];
				if (done)
					break;
			}
			if (i < n)
				i++;
		}
		if (reserve(p, p->nargs + 1))
			return fail(p, "out of memory");
		p->off[p->nargs] = start;
		p->lens[p->nargs++] = w - start;
	}
	for (size_t a = 0; a < p->nargs; a++) {
		p->argv[a].ptr = p->inl + p->off[a];
		p->argv[a].len = p->lens[a];
	}
	p->argc = (int)p->nargs;
	return RESP_COMMAND;
}

static int parse_inline(struct resp_parser *p, const char *buf, size_t len)
{
	const char *nl = memchr(buf + p->pos, '\n', len - p->pos);
	if (!nl) {
		if (len > RESP_INLINE_MAX)
			return fail(p, "too big inline request");
		p->pos = len;
		return RESP_MORE;
	}
	size_t n = (size_t)(nl - buf);
	p->used = n + 1;
	if (n > RESP_INLINE_MAX)
		return fail(p, "too big inline request");
	if (n && buf[n - 1] == '\r')
		n--;
	int rc = split_inline(p, buf, n);
	if (rc == RESP_COMMAND)
		reset(p);
	return rc;
}

/* Finds "\r\n" from p->pos; *line_end = the '\r'. Return: 1 found, 0 need more. */
static int find_line(const struct resp_parser *p, const char *buf, size_t len,
		     size_t *line_end)
{
	const char *cr = memchr(buf + p->pos, '\r', len - p->pos);
	if (!cr || (size_t)(cr - buf) + 1 >= len)
		return 0;
	*line_end = (size_t)(cr - buf);
	return 1;
}

static int parse_multibulk(struct resp_parser *p, const char *buf, size_t len)
{
	size_t e;
	long long ll;
	if (p->expect < 0) {
		if (!find_line(p, buf, len, &e)) {
			if (len - p->pos > RESP_INLINE_MAX)
				return fail(p, "too big mbulk count string");
			return RESP_MORE;
		}
		if (resp_parse_ll(buf + 1, e - 1, &ll) || ll > (long long)p->max_args)
			return fail(p, "invalid multibulk length");
		p->pos = e + 2;
		if (ll <= 0) {
			p->argc = 0;
			p->used = p->pos;
			reset(p);
			return RESP_COMMAND;
		}
		p->expect = ll;
		p->nargs = 0;
	}
	while ((long long)p->nargs < p->expect) {
		if (p->bulk < 0) {
			if (p->pos >= len)
				return RESP_MORE;
			if (!find_line(p, buf, len, &e)) {
				if (len - p->pos > RESP_INLINE_MAX)
					return fail(p, "too big bulk count string");
				if (buf[p->pos] != '$')
					goto not_dollar;
				return RESP_MORE;
			}
			if (buf[p->pos] != '$')
				goto not_dollar;
			if (resp_parse_ll(buf + p->pos + 1, e - p->pos - 1, &ll) || ll < 0 ||
			    (unsigned long long)ll > p->max_bulk)
				return fail(p, "invalid bulk length");
			p->pos = e + 2;
			p->bulk = ll;
		}
		if (len - p->pos < (size_t)p->bulk + 2)
			return RESP_MORE;
		if (reserve(p, p->nargs + 1))
			return fail(p, "out of memory");
		p->off[p->nargs] = p->pos;
		p->lens[p->nargs++] = (size_t)p->bulk;
		p->pos += (size_t)p->bulk + 2;
		p->bulk = -1;
	}
	for (size_t a = 0; a < p->nargs; a++) {
		p->argv[a].ptr = buf + p->off[a];
		p->argv[a].len = p->lens[a];
	}
	p->argc = (int)p->nargs;
	p->used = p->pos;
	reset(p);
	return RESP_COMMAND;
not_dollar:;
	char msg[64];
	unsigned char c = (unsigned char)buf[p->pos];
	if (c >= 32 && c < 127)
		snprintf(msg, sizeof(msg), "expected '$', got '%c'", c);
	else
		snprintf(msg, sizeof(msg), "expected '$', got '\\x%02x'", c);
	return fail(p, msg);
}

int resp_parse(struct resp_parser *p, const char *buf, size_t len)
{
	p->argc = 0;
	if (len == 0)
		return RESP_MORE;
	if (buf[0] == '*')
		return parse_multibulk(p, buf, len);
	return parse_inline(p, buf, len);
}

size_t resp_command_min_size(const struct resp_parser *p)
{
	if (p->expect < 0 || p->bulk < 0)
		return p->pos;
	return p->pos + (size_t)p->bulk + 2;
}
