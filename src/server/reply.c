/*
 * reply.c - building a client's reply (server.h, add_reply_*): RESP2 values appended to
 * a list of chunks that net.c writes out in order.
 *
 * Invariant: the chunks hold exactly the bytes still to be sent, in order;
 * c->reply_bytes is their sum minus what was already written of the first chunk. A
 * deferred array length is a chunk of its own, filled in before anything is written,
 * since the dispatcher writes only after a command's reply is complete. Running out of
 * DRAM or passing the output limit marks the client CLIENT_CLOSE_ASAP instead of
 * growing without bound.
 */
#include "server.h"
#include "net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (16u * 1024u)
#define DEFERRED_SIZE 32u  /* "$20" CRLF + 20 digits + CRLF */

static struct reply_chunk *new_chunk(struct client *c, size_t cap)
{
	struct reply_chunk *ch = malloc(sizeof(*ch) + cap);
	if (!ch) {
		c->flags |= CLIENT_CLOSE_ASAP;
		return NULL;
	}
	ch->next = NULL;
	ch->len = 0;
	ch->cap = cap;
	if (c->reply_tail)
		c->reply_tail->next = ch;
	else
		c->reply_head = ch;
	c->reply_tail = ch;
	return ch;
}

void add_reply_raw(struct client *c, const void *p, size_t len)
{
	if (c->flags & CLIENT_CLOSE_ASAP)
		return;
	if (net_output_limit_passed(c, len)) {
		c->flags |= CLIENT_CLOSE_ASAP;
		return;
	}
	const char *s = p;
	c->reply_bytes += len;
	while (len) {
		struct reply_chunk *ch = c->reply_tail;
		if (!ch || ch->len >= ch->cap) {
			ch = new_chunk(c, len > CHUNK_SIZE ? len : CHUNK_SIZE);
			if (!ch)
				return;
		}
		size_t n = ch->cap - ch->len < len ? ch->cap - ch->len : len;
		memcpy(ch->data + ch->len, s, n);
		ch->len += n;
		s += n;
		len -= n;
	}
}

static void add_reply_fmt(struct client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void add_reply_fmt(struct client *c, const char *fmt, ...)
{
	char buf[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	add_reply_raw(c, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

void add_reply_simple(struct client *c, const char *s)
{
	add_reply_raw(c, "+", 1);
	add_reply_raw(c, s, strlen(s));
	add_reply_raw(c, "\r\n", 2);
}

void add_reply_ok(struct client *c)
{
	add_reply_raw(c, "+OK\r\n", 5);
}

void add_reply_error(struct client *c, const char *msg)
{
	size_t n = strlen(msg);
	char *copy = malloc(n + 3);
	if (!copy) {
		c->flags |= CLIENT_CLOSE_ASAP;
		return;
	}
	copy[0] = '-';
	for (size_t i = 0; i < n; i++)
		copy[i + 1] = (msg[i] == '\r' || msg[i] == '\n') ? ' ' : msg[i];
	copy[n + 1] = '\r';
	add_reply_raw(c, copy, n + 2);
	add_reply_raw(c, "\n", 1);
	free(copy);
	net_count_error(c);
}

void add_reply_errorf(struct client *c, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	add_reply_error(c, buf);
}

void add_reply_int(struct client *c, long long v)
{
	add_reply_fmt(c, ":%lld\r\n", v);
}

void add_reply_bulk(struct client *c, const void *p, size_t len)
{
	add_reply_fmt(c, "$%zu\r\n", len);
	add_reply_raw(c, p, len);
	add_reply_raw(c, "\r\n", 2);
}

void add_reply_bulk_cstr(struct client *c, const char *s)
{
	add_reply_bulk(c, s, strlen(s));
}

void add_reply_bulk_ll(struct client *c, long long v)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%lld", v);
	add_reply_bulk(c, buf, (size_t)n);
}

void add_reply_double(struct client *c, double d)
{
	char buf[64];
	int n;
	if (isinf(d))
		n = snprintf(buf, sizeof(buf), "%s", d > 0 ? "inf" : "-inf");
	else
		n = snprintf(buf, sizeof(buf), "%.17g", d);
	add_reply_bulk(c, buf, (size_t)n);
}

void add_reply_nil(struct client *c)
{
	add_reply_raw(c, "$-1\r\n", 5);
}

void add_reply_null_array(struct client *c)
{
	add_reply_raw(c, "*-1\r\n", 5);
}

void add_reply_array(struct client *c, long long n)
{
	add_reply_fmt(c, "*%lld\r\n", n);
}

void *add_reply_deferred(struct client *c)
{
	if (c->flags & CLIENT_CLOSE_ASAP)
		return NULL;
	/* an empty chunk of its own; the length is written into it later */
	struct reply_chunk *ch = new_chunk(c, DEFERRED_SIZE);
	if (!ch)
		return NULL;
	ch->cap = 0; /* full: later replies go to a fresh chunk */
	return ch;
}

void set_deferred_array(struct client *c, void *handle, long long n)
{
	struct reply_chunk *ch = handle;
	if (!ch)
		return;
	int len = snprintf(ch->data, DEFERRED_SIZE, "*%lld\r\n", n);
	ch->len = ch->cap = (size_t)len; /* still full: a later reply takes a new chunk */
	c->reply_bytes += (size_t)len;
}

void set_deferred_bulk_ull(struct client *c, void *handle, unsigned long long v)
{
	struct reply_chunk *ch = handle;
	if (!ch)
		return;
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%llu", v);
	int len = snprintf(ch->data, DEFERRED_SIZE, "$%d\r\n%s\r\n", n, digits);
	ch->len = ch->cap = (size_t)len; /* still full: a later reply takes a new chunk */
	c->reply_bytes += (size_t)len;
}

struct reply_mark reply_mark(struct client *c)
{
	struct reply_mark m = {c->reply_tail, c->reply_tail ? c->reply_tail->len : 0,
			       c->reply_bytes};
	return m;
}

void reply_truncate(struct client *c, struct reply_mark m)
{
	struct reply_chunk *ch = m.tail ? m.tail->next : c->reply_head;
	while (ch) {
		struct reply_chunk *next = ch->next;
		free(ch);
		ch = next;
	}
	if (m.tail) {
		m.tail->next = NULL;
		m.tail->len = m.tail_len;
	} else {
		c->reply_head = NULL;
	}
	c->reply_tail = m.tail;
	c->reply_bytes = m.bytes;
}

void reply_free(struct client *c)
{
	struct reply_chunk *ch = c->reply_head;
	while (ch) {
		struct reply_chunk *next = ch->next;
		free(ch);
		ch = next;
	}
	c->reply_head = c->reply_tail = NULL;
	c->reply_bytes = 0;
	c->reply_sent = 0;
}
