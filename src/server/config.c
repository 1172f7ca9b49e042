/*
 * config.c - settings of tips-server (config.h): one table of every setting; the
 * command line, the config file and CONFIG GET/SET all go through it.
 *
 * Sizes are written as Redis writes them ("512mb", "1gb", "64k", plain bytes).
 */
#include "config.h"
#include "glob.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum kind { K_INT, K_SIZE, K_STRING, K_FIXED };

struct setting {
	const char *name;
	enum kind kind;
	size_t offset;        /* in struct server_config */
	size_t size;          /* K_STRING: buffer size */
	long long min, max;   /* K_INT, K_SIZE */
	int runtime;          /* CONFIG SET allowed */
	const char *fixed;    /* K_FIXED: the value CONFIG GET reports */
};

#define OFF(f) offsetof(struct server_config, f)
#define STR(name, f, rt) {name, K_STRING, OFF(f), sizeof(((struct server_config *)0)->f), 0, 0, rt, NULL}

static const struct setting settings[] = {
	{"port", K_INT, OFF(port), sizeof(int), 0, 65535, 0, NULL},
	STR("bind", bind, 0),
	STR("unixsocket", unixsocket, 0),
	STR("pool", pool, 0),
	{"pool-size", K_SIZE, OFF(pool_size), 8, 8ll << 20, 1ll << 50, 0, NULL},
	STR("index", index, 0),
	{"threads", K_INT, OFF(threads), sizeof(unsigned), 1, 256, 0, NULL},
	{"maxclients", K_INT, OFF(maxclients), sizeof(unsigned), 1, 1000000, 1, NULL},
	STR("requirepass", requirepass, 1),
	{"proto-max-bulk-len", K_SIZE, OFF(proto_max_bulk_len), 8, 1024 * 1024,
	 512ll << 20, 1, NULL},
	{"client-query-buffer-limit", K_SIZE, OFF(query_buffer_limit), 8, 1024 * 1024,
	 1ll << 40, 1, NULL},
	{"client-output-buffer-limit", K_SIZE, OFF(output_buffer_limit), 8, 1024 * 1024,
	 1ll << 40, 1, NULL},
	{"hz", K_INT, OFF(hz), sizeof(unsigned), 1, 500, 0, NULL},
	STR("logfile", logfile, 0),
	/* settings clients ask about (redis-benchmark, redis-cli); every write is durable
	 * before its reply, so there is nothing to save or append */
	{"save", K_FIXED, 0, 0, 0, 0, 0, ""},
	{"appendonly", K_FIXED, 0, 0, 0, 0, 0, "no"},
	{"databases", K_FIXED, 0, 0, 0, 0, 0, "1"},
	{"daemonize", K_FIXED, 0, 0, 0, 0, 0, "no"},
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

void config_init(struct server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->port = 6379;
	snprintf(c->bind, sizeof(c->bind), "127.0.0.1");
	snprintf(c->pool, sizeof(c->pool), "/dev/shm/tips-server.pool");
	c->pool_size = 1ull << 30;
	snprintf(c->index, sizeof(c->index), "tips-art");
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	c->threads = n > 0 ? (unsigned)n : 1;
	c->maxclients = 10000;
	c->proto_max_bulk_len = 512ull << 20;
	c->query_buffer_limit = 1ull << 30;
	c->output_buffer_limit = 1ull << 30;
	c->hz = 10;
	pthread_mutex_init(&c->lock, NULL);
}

/* "1gb", "64k", "100": bytes. Return: 0 or -1. */
static int parse_size(const char *s, long long *out)
{
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)*s))
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned long long mul = 1;
	if (!strcasecmp(end, "k"))
		mul = 1000;
	else if (!strcasecmp(end, "kb"))
		mul = 1024;
	else if (!strcasecmp(end, "m"))
		mul = 1000 * 1000;
	else if (!strcasecmp(end, "mb"))
		mul = 1024 * 1024;
	else if (!strcasecmp(end, "g"))
		mul = 1000ull * 1000 * 1000;
	else if (!strcasecmp(end, "gb"))
		mul = 1024ull * 1024 * 1024;
	else if (*end)
		return -1;
	if (v > (unsigned long long)(~0ull >> 1) / mul)
		return -1;
	*out = (long long)(v * mul);
	return 0;
}

static const struct setting *find(const char *name)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (!strcasecmp(settings[i].name, name))
			return &settings[i];
	return NULL;
}

int config_set(struct server_config *c, const char *name, const char *value, int runtime,
	       char *err, size_t errlen)
{
	const struct setting *s = find(name);
	if (!s) {
		snprintf(err, errlen, "Unknown option or number of arguments for CONFIG SET - '%s'",
			 name);
		return -1;
	}
	if (s->kind == K_FIXED) {
		if (!strcasecmp(value, s->fixed))
			return 0;
		snprintf(err, errlen, "CONFIG SET failed (possibly related to argument '%s') - "
			 "tips-server supports only '%s' (every write is durable before its reply)",
			 s->name, s->fixed);
		return -1;
	}
	if (runtime && !s->runtime) {
		snprintf(err, errlen, "CONFIG SET failed (possibly related to argument '%s') - "
			 "can't set immutable config", s->name);
		return -1;
	}
	char *field = (char *)c + s->offset;
	if (s->kind == K_STRING) {
		if (strlen(value) >= s->size) {
			snprintf(err, errlen, "CONFIG SET failed (possibly related to argument "
				 "'%s') - value too long (at most %zu bytes)", s->name, s->size - 1);
			return -1;
		}
		pthread_mutex_lock(&c->lock);
		snprintf(field, s->size, "%s", value);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	long long v = 0;
	int bad = s->kind == K_SIZE ? parse_size(value, &v) : 0;
	if (s->kind == K_INT) {
		char *end;
		errno = 0;
		v = strtoll(value, &end, 10);
		bad = errno || end == value || *end;
	}
	if (bad) {
		snprintf(err, errlen, "CONFIG SET failed (possibly related to argument '%s') - "
			 "argument couldn't be parsed into an integer", s->name);
		return -1;
	}
	if (v < s->min || v > s->max) {
		snprintf(err, errlen, "CONFIG SET failed (possibly related to argument '%s') - "
			 "argument must be between %lld and %lld inclusive", s->name, s->min, s->max);
		return -1;
	}
	if (s->size == 8)
		__atomic_store_n((uint64_t *)field, (uint64_t)v, __ATOMIC_RELAXED);
	else if (s->kind == K_INT && s->offset == OFF(port))
		__atomic_store_n((int *)field, (int)v, __ATOMIC_RELAXED);
	else
		__atomic_store_n((unsigned *)field, (unsigned)v, __ATOMIC_RELAXED);
	return 0;
}

void config_get(struct server_config *c, const char *pattern, size_t plen, config_get_fn fn,
		void *arg)
{
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		if (!glob_match(pattern, plen, s->name, strlen(s->name), 1))
			continue;
		char buf[4096];
		const char *field = (const char *)c + s->offset;
		switch (s->kind) {
		case K_FIXED:
			snprintf(buf, sizeof(buf), "%s", s->fixed);
			break;
		case K_STRING:
			pthread_mutex_lock(&c->lock);
			snprintf(buf, sizeof(buf), "%s", field);
			pthread_mutex_unlock(&c->lock);
			break;
		case K_SIZE:
			snprintf(buf, sizeof(buf), "%llu", (unsigned long long)__atomic_load_n(
				 (const uint64_t *)field, __ATOMIC_RELAXED));
			break;
		case K_INT:
			if (s->offset == OFF(port))
				snprintf(buf, sizeof(buf), "%d", __atomic_load_n((const int *)field,
										 __ATOMIC_RELAXED));
			else
				snprintf(buf, sizeof(buf), "%u", __atomic_load_n(
					 (const unsigned *)field, __ATOMIC_RELAXED));
			break;
		}
		fn(s->name, buf, arg);
	}
}

/* Reads the config file: "name value" lines, '#' comments, values optionally quoted. */
static int load_file(struct server_config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
		return -1;
	}
	char line[8192];
	int lineno = 0, rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		lineno++;
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		char *name = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		if (*p)
			*p++ = 0;
		while (isspace((unsigned char)*p))
			p++;
		char *value = p, *end = p + strlen(p);
		while (end > value && isspace((unsigned char)end[-1]))
			*--end = 0;
		if (end - value >= 2 && (*value == '"' || *value == '\'') && end[-1] == *value) {
			end[-1] = 0;
			value++;
		}
		char msg[512];
		if (config_set(c, name, value, 0, msg, sizeof(msg))) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
			rc = -1;
		}
	}
	fclose(f);
	return rc;
}

int config_load_args(struct server_config *c, int argc, char **argv, char *err, size_t errlen)
{
	int i = 1;
	if (i < argc && strncmp(argv[i], "--", 2))
		snprintf(c->config_file, sizeof(c->config_file), "%s", argv[i++]);
	for (int j = i; j + 1 < argc; j++)
		if (!strcmp(argv[j], "--config"))
			snprintf(c->config_file, sizeof(c->config_file), "%s", argv[j + 1]);
	if (c->config_file[0] && load_file(c, c->config_file, err, errlen))
		return -1;
	for (; i < argc; i += 2) {
		if (strncmp(argv[i], "--", 2) || !argv[i][2]) {
			snprintf(err, errlen, "unexpected argument '%s' (options are --name value)",
				 argv[i]);
			return -1;
		}
		if (i + 1 >= argc) {
			snprintf(err, errlen, "option '%s' needs a value", argv[i]);
			return -1;
		}
		if (!strcmp(argv[i], "--config"))
			continue;
		char msg[512];
		if (config_set(c, argv[i] + 2, argv[i + 1], 0, msg, sizeof(msg))) {
			if (!find(argv[i] + 2))
				snprintf(err, errlen, "unknown option '%s'", argv[i]);
			else
				snprintf(err, errlen, "bad value for %s: %s", argv[i], msg);
			return -1;
		}
	}
	return 0;
}
