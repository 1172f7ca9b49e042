/*
 * model.c - the parent's model of every key: the last acknowledged state plus the
 * operation(s) of its thread in flight, the owner of every sequence number, and the
 * reading of a child's messages into it.
 * Invariant: an acknowledged operation changes the model exactly as the store's
 * contract says (codes TIPS_EKEYEXISTS / TIPS_ENOTFOUND included); an acknowledgement
 * the model contradicts is a violation; an unacknowledged one stays in flight.
 */
#define _GNU_SOURCE
#include "crashtest.h"

void state_of(struct key_state *s, bool present, const unsigned char *val,
		     uint32_t vlen)
{
	memset(s, 0, sizeof(*s));
	s->present = present;
	if (present) {
		s->vlen = vlen;
		memcpy(s->val, val, vlen < VAL_MAX ? vlen : VAL_MAX);
	}
}

bool state_equal(const struct key_state *a, const struct key_state *b)
{
	if (a->present != b->present)
		return false;
	return !a->present || (a->vlen == b->vlen &&
			       memcmp(a->val, b->val, a->vlen < VAL_MAX ? a->vlen : VAL_MAX) == 0);
}

void state_describe(uint64_t key, const struct key_state *s, char *out, size_t cap)
{
	uint64_t seq;
	if (!s->present) {
		snprintf(out, cap, "absent");
	} else if (value_decode(key, s->val, s->vlen, &seq)) {
		snprintf(out, cap, "value seq=%llu len=%u", (unsigned long long)seq, s->vlen);
	} else {
		int n = snprintf(out, cap, "undecodable value len=%u bytes=", s->vlen);
		for (uint32_t i = 0; i < s->vlen && i < VAL_MAX && n > 0 && (size_t)n + 3 < cap; i++)
			n += snprintf(out + n, cap - (size_t)n, "%02x", s->val[i]);
	}
}

/* The state after @f's operation is applied to @before (it succeeds or fails on it). */
void state_after(const struct key_state *before, const struct inflight *f,
			struct key_state *after)
{
	unsigned char v[LARGE_VALUE];
	*after = *before;
	switch (f->op) {
	case OP_INSERT:
		if (before->present)
			return;
		break;
	case OP_UPDATE:
		if (!before->present)
			return;
		break;
	case OP_DELETE:
		state_of(after, false, NULL, 0);
		return;
	default:
		break;
	}
	value_make(f->key, f->seq, f->vlen, v);
	state_of(after, true, v, f->vlen);
}

static void seq_record(struct campaign *c, uint64_t seq, uint64_t key, uint32_t vlen)
{
	if (seq >= c->seq_cap) {
		uint64_t cap = c->seq_cap ? c->seq_cap : 1u << 16;
		while (cap <= seq)
			cap *= 2;
		struct seq_owner *w = realloc(c->written, cap * sizeof(*w));
		if (!w) {
			fprintf(stderr, "tips-crashtest: out of memory\n");
			exit(EXIT_VIOLATION);
		}
		memset(w + c->seq_cap, 0, (cap - c->seq_cap) * sizeof(*w));
		c->written = w;
		c->seq_cap = cap;
	}
	c->written[seq] = (struct seq_owner){ (uint32_t)(key + 1), vlen };
}

/* True if @s is a value some intent wrote for @key. */
bool value_was_written(const struct campaign *c, uint64_t key, const struct key_state *s)
{
	uint64_t seq;
	if (!s->present || !value_decode(key, s->val, s->vlen, &seq))
		return false;
	return seq < c->seq_cap && c->written[seq].key1 == key + 1 &&
	       c->written[seq].vlen == s->vlen;
}

bool detail_ok(struct campaign *c)
{
	return c->details++ < MAX_DETAILS;
}

/* Applies the acknowledged operation @f with result @rc to the model. A result the
 * model contradicts means the live database disagreed with it. */
static void model_apply(struct campaign *c, const struct inflight *f, int rc)
{
	struct key_state *s = &c->model[f->key];
	const char *contradiction = NULL;
	bool as_lost = false;
	if (rc == 0) {
		if (!s->unknown) {
			if (f->op == OP_INSERT && s->present)
				contradiction = "insert succeeded on a present key", as_lost = true;
			else if ((f->op == OP_UPDATE || (f->op == OP_DELETE && !c->o.batch)) &&
				 !s->present) /* a batch's delete is blind */
				contradiction = "succeeded on an absent key";
		}
		struct key_state before = *s;
		before.present = f->op == OP_UPDATE || f->op == OP_DELETE; /* as the db saw it */
		state_after(&before, f, s);
	} else if (rc == TIPS_EKEYEXISTS && f->op == OP_INSERT) {
		if (!s->unknown && !s->present)
			contradiction = "insert found an absent key present";
		if (!s->present)
			s->unknown = true;
	} else if (rc == TIPS_ENOTFOUND && (f->op == OP_UPDATE || f->op == OP_DELETE)) {
		if (!s->unknown && s->present)
			contradiction = "found a present key absent", as_lost = true;
		state_of(s, false, NULL, 0);
	} else {
		fprintf(stderr, "run %llu: %s of key %llu returned %s\n",
			(unsigned long long)c->runs, op_names[f->op], (unsigned long long)f->key,
			tips_strerror(rc));
		c->failed = true;
		return;
	}
	if (contradiction) {
		fprintf(stderr, "run %llu (after crash %llu): %s: key %llu: %s %s (seq %llu)\n",
			(unsigned long long)c->runs, (unsigned long long)c->crashes,
			as_lost ? "lost" : "phantom", (unsigned long long)f->key,
			op_names[f->op], contradiction, (unsigned long long)f->seq);
		if (as_lost)
			c->lost++;
		else
			c->phantom++;
	}
}

/* An ack: applies every in-flight operation of @thread (one, or a batch) with result
 * @rc to the model. */
static void model_ack(struct campaign *c, uint32_t thread, int rc)
{
	if (thread >= c->o.threads || c->n_inflight[thread] == 0) {
		fprintf(stderr, "tips-crashtest: protocol: ack without intent (thread %u)\n",
			thread);
		c->failed = true;
		return;
	}
	c->acks++;
	for (unsigned i = 0; i < c->n_inflight[thread] && !c->failed; i++)
		model_apply(c, &c->inflight[thread][i], rc);
	c->n_inflight[thread] = 0;
}

/* The in-flight operation on @key, or NULL. */
const struct inflight *inflight_on(const struct campaign *c, uint64_t key)
{
	unsigned t = (unsigned)(key % c->o.threads);
	for (unsigned i = 0; i < c->n_inflight[t]; i++)
		if (c->inflight[t][i].key == key)
			return &c->inflight[t][i];
	return NULL;
}

/* Reads the child's messages until EOF; SIGKILLs it after @kill_after acks (0: never).
 * Returns the persist events the child reported at its end (0 if it did not finish). */
uint64_t read_messages(struct campaign *c, int fd, pid_t child, uint64_t kill_after)
{
	uint64_t acks = 0, events = 0;
	struct msg m;
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, (char *)&m + have, sizeof(m) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("tips-crashtest: read");
			c->failed = true;
			break;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have < sizeof(m))
			continue;
		have = 0;
		if (m.kind == MSG_INTENT) {
			unsigned most = c->o.batch ? c->o.batch : 1;
			if (m.thread >= c->o.threads || m.key >= c->o.keys ||
			    m.key % c->o.threads != m.thread || m.op > OP_DELETE ||
			    c->n_inflight[m.thread] >= most || inflight_on(c, m.key)) {
				fprintf(stderr, "tips-crashtest: protocol: bad intent\n");
				c->failed = true;
				continue;
			}
			if (m.vlen)
				seq_record(c, m.seq, m.key, m.vlen);
			c->inflight[m.thread][c->n_inflight[m.thread]++] =
				(struct inflight){ m.op, m.key, m.seq, m.vlen };
		} else if (m.kind == MSG_ACK) {
			model_ack(c, m.thread, m.rc);
			if (kill_after && ++acks == kill_after)
				kill(child, SIGKILL);
		} else if (m.kind == MSG_DONE) {
			events = m.seq;
			c->reclamations += m.key;
		}
	}
	if (have)
		fprintf(stderr, "tips-crashtest: a partial message (%zu bytes) at EOF\n", have);
	return events;
}

