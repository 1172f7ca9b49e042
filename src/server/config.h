/*
 * config.h - the settings of tips-server: defaults, command-line options, the
 * redis.conf-style config file ("name value" lines), and CONFIG GET/SET.
 *
 * Invariant: every setting has one entry in the table of config.c, which gives its
 * name (as in the file, on the command line after "--", and in CONFIG GET), its parser,
 * and whether CONFIG SET may change it while the server runs. Settings that CONFIG SET
 * changes are read by other threads with relaxed atomics or under cfg_lock.
 */
#ifndef TIPS_SERVER_CONFIG_H
#define TIPS_SERVER_CONFIG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct server_config {
	char config_file[4096];     /* "" if none */
	int port;                   /* 0: no TCP listener */
	char bind[256];
	char unixsocket[108];       /* "" if none */
	char pool[4096];
	uint64_t pool_size;
	char index[32];
	unsigned threads;
	unsigned maxclients;
	char requirepass[512];      /* "" if none */
	uint64_t proto_max_bulk_len;
	uint64_t query_buffer_limit;  /* client-query-buffer-limit */
	uint64_t output_buffer_limit; /* client-output-buffer-limit (bytes, hard) */
	unsigned hz;                /* sweeper rounds per second */
	char logfile[4096];         /* "" = standard output */
	pthread_mutex_t lock;       /* CONFIG SET of strings vs readers of them */
};

/** config_init() - the defaults (pool under /dev/shm, tips-art, port 6379, ...). */
void config_init(struct server_config *c);
/**
 * config_load_args() - apply the command line: "[CONFIG_FILE] [--name value ...]",
 * "--config FILE" too; the file is read first, options after it win.
 * Return: 0, or -1 with a one-line message in @err.
 */
int config_load_args(struct server_config *c, int argc, char **argv, char *err, size_t errlen);
/** config_set() - set @name to @value. @runtime: refuse settings fixed at start.
 * Return: 0, or -1 with the reason in @err (Redis's CONFIG SET wording). */
int config_set(struct server_config *c, const char *name, const char *value, int runtime,
	       char *err, size_t errlen);
/** Called by config_get() for each setting whose name matches. */
typedef void (*config_get_fn)(const char *name, const char *value, void *arg);
/** config_get() - every setting whose name matches the glob @pattern. */
void config_get(struct server_config *c, const char *pattern, size_t plen, config_get_fn fn,
		void *arg);

#endif /* TIPS_SERVER_CONFIG_H */
