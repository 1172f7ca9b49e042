/*
 * server.h - what every command of tips-server is written against: the client being
 * served, the reply calls, the command table entry, and the helpers for arguments.
 *
 * How a command runs (dispatch.c). A connection's event-loop thread parses a request
 * (resp.h), finds its struct command, checks arity and authentication, and collects the
 * command's user keys (argv[first_key..last_key] by step, or its getkeys function) into
 * a lockset (locks.h). It takes those locks, begins the thread's transaction
 * (keyspace.h) and calls the handler. The handler reads and writes only through
 * c->txn and appends its reply with the add_reply_*() calls; it never writes the socket.
 * After the handler the dispatcher commits the transaction as one batch, releases the
 * locks, and only then may the reply be written: so a reply leaves only after its write
 * is durable, and no other client sees the write before that. If the transaction
 * recorded an error (or the commit fails), the dispatcher discards the handler's reply
 * and its writes and replies that error instead: a handler that gets a negative code
 * from a ks_* call just returns.
 *
 * Sharing a transaction. Under EXEC, and for a client's pipelined commands (group
 * commit, dispatch.c), several commands run one after another in ONE transaction with
 * all their keys locked: a handler sees the writes of the commands before it and must
 * not assume the transaction is empty (ks_txn_writes() counts theirs too). A handler
 * that answers with an error of its own (syntax, WRONGTYPE, a member too long) must do
 * so before it writes anything, since the writes it buffered would be committed with
 * the others.
 *
 * Adding commands. Each cmd_TYPE.c exports `const struct command TYPE_commands[]` and
 * `const size_t TYPE_commands_count` (declared below); commands.c joins them into the
 * table that lookups and COMMAND use. Names are lower case; arity, flags and key
 * positions follow Redis's COMMAND reply (https://redis.io/commands/command/).
 *
 * Threads: a client belongs to one event-loop thread; handlers run on it and may touch
 * only their own client, c->txn, and the shared state behind the calls below.
 */
#ifndef TIPS_SERVER_SERVER_H
#define TIPS_SERVER_SERVER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "keyspace.h"
#include "resp.h"

#define TIPS_SERVER_VERSION "0.2.0"
/* The Redis version tips-server answers to (HELLO, INFO redis_version): the commands
 * and error texts follow Redis 7. */
#define TIPS_SERVER_REDIS_VERSION "7.0.0"

struct server;
struct loop;
struct client;

/* ---- the command table -------------------------------------------------------------- */

/* Flags, as COMMAND reports them (command_flag_names() in commands.c). */
#define CMD_WRITE (1u << 0)       /* "write": may modify the keyspace */
#define CMD_READONLY (1u << 1)    /* "readonly" */
#define CMD_DENYOOM (1u << 2)     /* "denyoom": may grow the data (may create keys:
                                     the dispatcher refuses keys longer than
                                     KS_MAX_USER_KEY before the handler runs) */
#define CMD_ADMIN (1u << 3)       /* "admin" */
#define CMD_NOSCRIPT (1u << 4)    /* "noscript" */
#define CMD_LOADING (1u << 5)     /* "loading" */
#define CMD_STALE (1u << 6)       /* "stale" */
#define CMD_FAST (1u << 7)        /* "fast": O(1) or O(log N) */
#define CMD_NO_AUTH (1u << 8)     /* "no_auth": allowed before AUTH */
#define CMD_NO_MULTI (1u << 9)    /* "no_multi": refused inside MULTI */
#define CMD_MOVABLEKEYS (1u << 10) /* "movablekeys": keys found by getkeys */
/* Not reported by COMMAND: how the dispatcher locks. */
#define CMD_KEYSPACE_EXCLUSIVE (1u << 16) /* hold the keyspace lock exclusive, no
                                             stripes (FLUSHDB, KEYS) */
#define CMD_NO_TXN (1u << 17)     /* runs no transaction of its own (MULTI, EXEC, ...) */

/** A handler: reads c->argc/c->argv, works through c->txn, appends its reply. */
typedef void (*command_fn)(struct client *c);
/**
 * For commands whose keys are not at fixed positions (CMD_MOVABLEKEYS): store the
 * argv indexes of the keys in @pos (at most @max; the return value may exceed @max,
 * then the caller asks again with room for that many). Return: the number of keys, or
 * -1 if the arguments are malformed (the handler will report it; no keys are locked).
 */
typedef int (*command_keys_fn)(int argc, const struct arg *argv, int *pos, int max);

struct command {
	const char *name;      /* lower case, e.g. "hget" */
	command_fn proc;
	int arity;             /* N: exactly N arguments (name included); -N: at least N */
	unsigned flags;        /* CMD_* */
	int first_key;         /* argv index of the first key, 0: no keys */
	int last_key;          /* of the last key; -1: the last argument, -2: the one before */
	int step;              /* between keys (MSET: 2) */
	command_keys_fn getkeys; /* NULL unless CMD_MOVABLEKEYS */
	const char *summary;   /* one line for COMMAND DOCS */
	const char *group;     /* "string", "hash", "list", "set", "sorted-set", "generic",
	                          "server", "connection", "transactions" */
	const char *args;      /* the arguments after the name, as the Redis docs write them
	                          ("key value [NX|XX]"): redis-cli shows them as hints;
	                          NULL if none */
};

/* MULTI in progress: drop the queued commands and reply "EXECABORT Transaction
 * discarded because of: @why" (cmd_multi.c). */
void multi_abort(struct client *c, const char *why);

/* The per-file tables. */
extern const struct command server_commands[];   /* cmd_server.c */
extern const size_t server_commands_count;
extern const struct command keys_commands[];     /* cmd_keys.c */
extern const size_t keys_commands_count;
extern const struct command string_commands[];   /* cmd_string.c */
extern const size_t string_commands_count;
extern const struct command multi_commands[];    /* cmd_multi.c */
extern const size_t multi_commands_count;
extern const struct command hash_commands[];     /* cmd_hash.c */
extern const size_t hash_commands_count;
extern const struct command list_commands[];     /* cmd_list.c */
extern const size_t list_commands_count;
extern const struct command set_commands[];      /* cmd_set.c */
extern const size_t set_commands_count;
extern const struct command zset_commands[];     /* cmd_zset.c */
extern const size_t zset_commands_count;

/** command_lookup() - the command named @name (any case), or NULL. Thread-safe. */
const struct command *command_lookup(const char *name, size_t len);
/** command_count(), command_at() - every command, in table order. */
size_t command_count(void);
const struct command *command_at(size_t i);
/** add_reply_command_info() - @cmd as one element of COMMAND / COMMAND INFO. */
void add_reply_command_info(struct client *c, const struct command *cmd);
/** add_reply_command_docs() - @cmd's name and doc map, as COMMAND DOCS lists them. */
void add_reply_command_docs(struct client *c, const struct command *cmd);

/* ---- the client --------------------------------------------------------------------- */

/* A chunk of a client's pending reply. */
struct reply_chunk {
	struct reply_chunk *next;
	size_t len, cap;
	char data[];
};

/* A command with its arguments: queued by MULTI (then argv is one allocation, the
 * array followed by the bytes), or one of a group about to run. */
struct queued_cmd {
	const struct command *cmd;
	int argc;
	const struct arg *argv;
};

#define CLIENT_MULTI (1u << 0)        /* inside MULTI */
#define CLIENT_DIRTY_EXEC (1u << 1)   /* a command queued in MULTI was refused */
#define CLIENT_CLOSE_AFTER_REPLY (1u << 2) /* QUIT, protocol error, SHUTDOWN */
#define CLIENT_CLOSE_ASAP (1u << 3)   /* output limit passed: drop without writing */
#define CLIENT_UNIX (1u << 4)         /* connected through the Unix socket */

struct client {
	uint64_t id;                /* CLIENT ID: unique, increasing */
	int fd;
	unsigned flags;             /* CLIENT_* */
	struct server *srv;
	struct loop *loop;          /* the event loop that owns it */
	char addr[128];             /* "ip:port" of the peer, for CLIENT INFO and logs */
	char *name;                 /* CLIENT SETNAME, or NULL */
	int authenticated;          /* 1 once AUTH succeeded (or no requirepass) */
	int64_t ctime_ms;           /* when it connected */
	/* the request being run */
	int argc;
	const struct arg *argv;
	const struct command *cmd;
	struct ks_txn *txn;         /* the loop thread's transaction, during a command */
	/* input */
	char *qbuf;                 /* unparsed bytes [qpos, qlen) */
	size_t qpos, qlen, qcap;
	struct resp_parser parser;
	/* output: pending reply chunks, written in order */
	struct reply_chunk *reply_head, *reply_tail;
	size_t reply_bytes;         /* bytes in the chunks, not yet written */
	size_t reply_sent;          /* bytes of reply_head already written */
	int want_write;             /* registered for EPOLLOUT (reading paused) */
	/* MULTI */
	struct queued_cmd *mstate;
	size_t mcount, mcap;
	/* WATCH: the stripes of the watched keys and their versions then (locks.h) */
	struct watched_stripe {
		unsigned stripe;
		uint64_t version;
	} *watched;
	size_t nwatched, wcap;
	uint64_t watch_flushes;     /* locks.flushes when the first key was watched */
	/* list link of the loop's clients */
	struct client *prev, *next;
};

/* ---- replies (reply.c) -------------------------------------------------------------- */

/* Error texts that several commands send (the text after '-'). */
#define ERR_SYNTAX "ERR syntax error"
#define ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
#define ERR_NOT_INTEGER "ERR value is not an integer or out of range"
#define ERR_NOT_FLOAT "ERR value is not a valid float"
#define ERR_OVERFLOW "ERR increment or decrement would overflow"
#define ERR_NO_SUCH_KEY "ERR no such key"

void add_reply_simple(struct client *c, const char *s);          /* +s */
void add_reply_ok(struct client *c);                             /* +OK */
/** add_reply_error() - "-@msg\r\n"; @msg starts with its code ("ERR ...",
 * "WRONGTYPE ..."); CR and LF in it are replaced by spaces. */
void add_reply_error(struct client *c, const char *msg);
void add_reply_errorf(struct client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void add_reply_int(struct client *c, long long v);               /* :v */
void add_reply_bulk(struct client *c, const void *p, size_t len); /* $len p */
void add_reply_bulk_cstr(struct client *c, const char *s);
void add_reply_bulk_ll(struct client *c, long long v);            /* the number as bulk */
/** add_reply_double() - a bulk with @d formatted as Redis formats scores ("%.17g",
 * "inf", "-inf"). */
void add_reply_double(struct client *c, double d);
void add_reply_nil(struct client *c);                           /* $-1 (RESP2 null) */
void add_reply_null_array(struct client *c);                    /* *-1 */
void add_reply_array(struct client *c, long long n);            /* *n, then n replies */
/** add_reply_deferred() / set_deferred_array() - an array whose length is known only
 * after its elements were added. */
void *add_reply_deferred(struct client *c);
void set_deferred_array(struct client *c, void *handle, long long n);
/** set_deferred_bulk_ull() - fill a deferred slot with @v as a bulk string. */
void set_deferred_bulk_ull(struct client *c, void *handle, unsigned long long v);
/** add_reply_raw() - bytes already in RESP form. */
void add_reply_raw(struct client *c, const void *p, size_t len);

/* ---- arguments and common checks (dispatch.c) --------------------------------------- */

/** arg_is() - @a equals the lower-case word @word, ignoring case. */
int arg_is(const struct arg *a, const char *word);
/** arg_to_ll() - parse @a as Redis parses integers (no spaces, no leading '+' or zeros,
 * fits in long long). Return: 0 or -1. */
int arg_to_ll(const struct arg *a, long long *out);
/** arg_to_double() - parse @a as a float ("inf", "-inf" allowed; NaN refused).
 * Return: 0 or -1. */
int arg_to_double(const struct arg *a, double *out);
/** get_ll_or_reply() - arg_to_ll(), replying ERR_NOT_INTEGER on failure. Return: 0, -1. */
int get_ll_or_reply(struct client *c, const struct arg *a, long long *out);
/** get_double_or_reply() - arg_to_double(), replying ERR_NOT_FLOAT. Return: 0, -1. */
int get_double_or_reply(struct client *c, const struct arg *a, double *out);
/**
 * lookup_typed() - ks_lookup() of @key that also checks its type.
 * Return: 1 (found with type @type, *@m filled), 0 (absent), -1 (a WRONGTYPE reply was
 * added, or a store error recorded in the txn: return at once either way).
 */
int lookup_typed(struct client *c, const struct arg *key, int type, struct ks_meta *m);
/**
 * need_ordered() - 1 if the store can scan ranges; else 0 after replying
 * "-ERR this command needs an ordered index (tips-art, tips-bptree, tips-bst,
 * tips-lfbst, listdb); this server runs INDEX". Collection commands that scan a range of
 * members call it first.
 */
int need_ordered(struct client *c);

/* ---- the server (cmd_server.c reads it for INFO, CONFIG, CLIENT) -------------------- */

/** server_now_ms() - Unix time in ms. */
int64_t server_now_ms(void);

#endif /* TIPS_SERVER_SERVER_H */
