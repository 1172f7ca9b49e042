/*
 * resp.h - the request parser of tips-server: RESP2 multibulk requests
 * ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") and inline commands ("GET k\r\n", with Redis's
 * quoting rules), parsed incrementally as bytes arrive.
 *
 * Invariant: the parser never reads past the bytes it is given, never trusts a length
 * before checking it against its limits, and holds at most O(arguments parsed so far)
 * memory of its own (an inline command is bounded by RESP_INLINE_MAX, a multibulk's
 * argument count by max_args, a bulk by max_bulk). A bad frame yields the exact error
 * text Redis sends ("Protocol error: ..."), after which the connection is closed.
 */
#ifndef TIPS_SERVER_RESP_H
#define TIPS_SERVER_RESP_H

#include <stddef.h>

#define RESP_INLINE_MAX (64u * 1024u)   /* longest inline command or count line */

/* One argument of a parsed command. */
struct arg {
	const char *ptr; /* not NUL-terminated */
	size_t len;
};

enum resp_status {
	RESP_MORE = 0,     /* the command is not complete: call again with more bytes */
	RESP_COMMAND = 1,  /* a command is complete: see resp_parser.argc/argv/used */
	RESP_ERROR = -1,   /* a protocol error: resp_parser.err says which; close */
};

struct resp_parser {
	/* limits, set by resp_parser_init() */
	size_t max_bulk;      /* longest bulk (proto-max-bulk-len) */
	size_t max_args;      /* most arguments of one multibulk */
	/* the parsed command (valid after RESP_COMMAND until the next call) */
	int argc;
	struct arg *argv;
	size_t used;          /* bytes of the buffer the command took */
	char err[128];        /* after RESP_ERROR: "Protocol error: ..." */
	/* progress through the current command */
	size_t pos;           /* bytes of it consumed so far */
	long long expect;     /* multibulk: arguments announced; -1: not known yet */
	long long bulk;       /* bulk length being read, -1 at a "$" line */
	size_t *off;          /* offsets of parsed bulks from the command's start */
	size_t *lens;
	size_t nargs, cap;
	char *inl;            /* inline: unescaped arguments */
	size_t inl_cap;
};

/** resp_parser_init() - a parser with the given limits. */
void resp_parser_init(struct resp_parser *p, size_t max_bulk, size_t max_args);
/** resp_parser_free() - free its memory. */
void resp_parser_free(struct resp_parser *p);

/**
 * resp_parse() - parse the command that starts at @buf (@len bytes available). The
 * caller passes the same start again (with more bytes after it) until a result other
 * than RESP_MORE; after RESP_COMMAND it passes @buf + used next. The parser keeps its
 * progress, so each byte is examined once. An empty command ("*0\r\n", a blank line)
 * is skipped: RESP_COMMAND with argc 0.
 * Return: enum resp_status. On RESP_ERROR the error text is in p->err.
 */
int resp_parse(struct resp_parser *p, const char *buf, size_t len);

/** resp_parse_ll() - Redis's strict integer syntax (optional '-', digits, no leading
 * zeros, no '+', no spaces, fits in long long). Return: 0, or -1. */
int resp_parse_ll(const char *s, size_t n, long long *out);

/** resp_command_min_size() - during RESP_MORE, the fewest bytes the current command is
 * known to take (its headers and the bulks announced so far), so that a caller can
 * refuse a request that cannot fit its buffer limit before reading it all. */
size_t resp_command_min_size(const struct resp_parser *p);

#endif /* TIPS_SERVER_RESP_H */
