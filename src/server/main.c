/*
 * main.c - tips-server: start-up, the log lines, signals and a clean shutdown.
 *
 *   tips-server [CONFIG_FILE] [--config FILE] [--port 6379] [--bind 127.0.0.1]
 *               [--unixsocket PATH] [--pool PATH] [--pool-size SIZE] [--index tips-art]
 *               [--threads N] [--maxclients N] [--requirepass PASS] [--NAME VALUE ...]
 *
 * Order of start-up, so that a bad start never touches the pool: settings are parsed,
 * the listening sockets are bound, and only then is the pool opened (or created).
 * Shutdown (SIGTERM, SIGINT, SHUTDOWN) stops the event loops first, so no command is in
 * flight, then closes the keyspace with tips_close(): the next start replays nothing.
 */
#include "server.h"
#include "net.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void make_run_id(char out[41])
{
	unsigned char r[20] = {0};
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, r, sizeof(r)) != (ssize_t)sizeof(r)) {
		uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		for (int i = 0; i < 20; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
			r[i] = (unsigned char)(x >> 56);
	}
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 20; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tips-server [CONFIG_FILE] [--config FILE] [--port N] [--bind ADDR]\n"
		"                   [--unixsocket PATH] [--pool PATH] [--pool-size SIZE]\n"
		"                   [--index tips-art|tips-bptree|...|listdb] [--threads N]\n"
		"                   [--maxclients N] [--requirepass PASS] [--NAME VALUE ...]\n");
}

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-v"))) {
		printf("tips-server v=%s (Redis protocol %s)\n", TIPS_SERVER_VERSION,
		       TIPS_SERVER_REDIS_VERSION);
		return 0;
	}
	static struct server srv; /* the one server; every module reaches it through c->srv */
	char err[1024];
	config_init(&srv.cfg);
	if (config_load_args(&srv.cfg, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "tips-server: %s\n", err);
		return 1;
	}
	if (srv.cfg.logfile[0] && !freopen(srv.cfg.logfile, "a", stdout)) {
		fprintf(stderr, "tips-server: cannot open logfile %s\n", srv.cfg.logfile);
		return 1;
	}
	/* the signals are taken by sigwait() in this thread only */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	srv.start_ms = server_now_ms();
	atomic_store(&srv.lastsave, srv.start_ms / 1000);
	make_run_id(srv.run_id);
	server_log('*', "tips-server is starting: version=%s (Redis %s protocol), bits=%d, pid=%d",
		   TIPS_SERVER_VERSION, TIPS_SERVER_REDIS_VERSION, (int)(8 * sizeof(void *)),
		   (int)getpid());
	if (srv.cfg.config_file[0])
		server_log('*', "Configuration loaded from %s", srv.cfg.config_file);
	else
		server_log('#', "No config file specified, using the default config. To specify "
			   "a config file use tips-server /path/to/tips-server.conf");
	if (net_listen(&srv, err, sizeof(err))) {
		server_log('#', "%s", err);
		fprintf(stderr, "tips-server: %s\n", err);
		return 1;
	}
	srv.cursors = scan_cursors_new();
	struct ks_options ko = {srv.cfg.pool, srv.cfg.index, srv.cfg.pool_size, srv.cfg.hz};
	double t0 = mono_ms();
	int rc = srv.cursors ? ks_db_open(&ko, &srv.db, err, sizeof(err)) : TIPS_ENOMEM;
	if (rc) {
		if (!srv.cursors)
			snprintf(err, sizeof(err), "out of memory");
		server_log('#', "%s", err);
		fprintf(stderr, "tips-server: %s\n", err);
		net_stop(&srv);
		scan_cursors_free(srv.cursors);
		return 1;
	}
	double open_ms = mono_ms() - t0;
	struct store_info si;
	store_info(ks_db_store(srv.db), &si);
	struct ks_stats ks;
	ks_db_stats(srv.db, &ks);
	server_log('*', "Pool %s %s: %llu bytes, media %s (%s)", srv.cfg.pool,
		   si.created ? "created" : "opened", (unsigned long long)si.pool_size, si.media,
		   si.media_reason);
	size_t max_ops, max_bytes;
	ks_db_max_txn(srv.db, &max_ops, &max_bytes);
	server_log('*', "Index %s (%s); one command writes at most %zu index keys and %zu "
		   "bytes; strings up to %zu bytes", si.index, si.ordered ? "ordered" :
		   "unordered: no member range scans", max_ops, max_bytes,
		   ks_db_max_string(srv.db));
	if (si.recovered)
		server_log('*', "Crash recovery done in %.3f ms", si.recovery_ms);
	else if (si.created)
		server_log('*', "New pool: nothing to recover");
	else
		server_log('*', "Clean shutdown found: nothing to replay (recovery %.3f ms)",
			   si.recovery_ms);
	server_log('*', "DB loaded: %llu keys (%llu with an expiry), counted in %.3f ms; open "
		   "took %.3f ms", (unsigned long long)ks.keys, (unsigned long long)ks.expires,
		   ks.start_scan_ms, open_ms);
	if (net_start(&srv, err, sizeof(err))) {
		server_log('#', "%s", err);
		net_stop(&srv);
		ks_db_close(&srv.db);
		scan_cursors_free(srv.cursors);
		return 1;
	}
	server_log('*', "%u event loop threads", srv.nloops);
	if (srv.tcp_fd >= 0)
		server_log('*', "Ready to accept connections tcp (%s:%d)", srv.cfg.bind,
			   srv.cfg.port);
	if (srv.unix_fd >= 0)
		server_log('*', "Ready to accept connections unix (%s)", srv.cfg.unixsocket);

	int sig = 0;
	while (sigwait(&set, &sig) == 0) {
		if (sig == SIGUSR1 && !atomic_load(&srv.shutdown_asked))
			continue;
		break;
	}
	if (sig == SIGTERM)
		server_log('#', "Received SIGTERM scheduling shutdown...");
	else if (sig == SIGINT)
		server_log('#', "Received SIGINT scheduling shutdown...");
	net_stop(&srv);
	rc = ks_db_close(&srv.db);
	scan_cursors_free(srv.cursors);
	if (rc) {
		server_log('#', "Closing the pool failed: %s: %s", tips_strerror(rc),
			   tips_errormsg());
		return 1;
	}
	server_log('#', "Pool closed cleanly (the next start replays nothing). "
		   "tips-server is now ready to exit, bye bye...");
	return 0;
}
