/*
 * vsession: the cost of opening a vproxy session, as vrun pays it.
 *
 * N times in a row: make a listening socket on 127.0.0.1 (what vrun's
 * sandboxed child hands over), connect to the control socket, send
 * CTL_OPEN with the listener (SCM_RIGHTS), wait for CTL_OPENED (the daemon
 * has checked the peer, looked the keys up, made the session CA, written
 * the CA bundle and the audit record), then CTL_CLOSE and wait for CTL_OK.
 * "open" is connect() to CTL_OPENED; "close" is CTL_CLOSE to CTL_OK. Making
 * the listener is the child's business and not timed. C, so that the
 * figure holds no interpreter overhead.
 *
 * Prints one JSON line. Exit status: 0 done, 1 failure, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctlproto.h"
#include "verr.h"

#define EXIT_USAGE 2

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double
pct_ms(const uint64_t *sorted, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);

	return (double)sorted[i] / 1e6;
}

static double
mean_ms(const uint64_t *v, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += (double)v[i];
	return s / (double)n / 1e6;
}

static int
make_listener(void)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One session: open and close timed; 0 or -1 with a message on stderr. */
static int
one(const char *sockpath, char *const *keys, size_t nkeys, uint64_t *t_open, uint64_t *t_close)
{
	static struct ctl_writer w, in;
	struct ctl_msg msg;
	struct sockaddr_un sun;
	int lfd = -1, s = -1, fd = -1, r = -1;
	uint64_t t0, t1;

	if ((lfd = make_listener()) < 0) {
		perror("vsession: listener");
		return -1;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sockpath);
	t0 = now_ns();
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(s, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		perror("vsession: control socket");
		goto out;
	}
	ctl_begin(&w, CTL_OPEN);
	for (size_t i = 0; i < nkeys; i++)
		ctl_add_str(&w, CTL_T_KEY, keys[i]);
	ctl_add_str(&w, CTL_T_ARG, "true");
	ctl_add_u64(&w, CTL_T_PID, (uint64_t)getpid());
	if (ctl_finish(&w) != 0 || ctl_send(s, &w, lfd) != 0) {
		fputs("vsession: cannot send CTL_OPEN\n", stderr);
		goto out;
	}
	close(lfd); /* the daemon holds its own copy */
	lfd = -1;
	if (ctl_recv(s, &in, &msg, &fd) != 0 || msg.type != CTL_OPENED) {
		char m[256] = "";

		if (msg.type == CTL_ERROR)
			(void)ctl_get_str(&msg, CTL_T_MESSAGE, m, sizeof(m));
		fprintf(stderr, "vsession: no session: %s\n", m[0] != '\0' ? m : "bad reply");
		goto out;
	}
	t1 = now_ns();
	ctl_begin(&w, CTL_CLOSE);
	ctl_add_i64(&w, CTL_T_EXIT, 0);
	if (ctl_finish(&w) != 0 || ctl_send(s, &w, -1) != 0 || ctl_recv(s, &in, &msg, &fd) != 0 ||
	    msg.type != CTL_OK) {
		fputs("vsession: CTL_CLOSE not acknowledged\n", stderr);
		goto out;
	}
	*t_open = t1 - t0;
	*t_close = now_ns() - t1;
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	if (s >= 0)
		close(s);
	return r;
}

int
main(int argc, char **argv)
{
	const char *sockpath = NULL;
	char *keys[CTL_MAX_KEYS];
	size_t nkeys = 0, n = 200, warm = 10;
	uint64_t *topen, *tclose, *ttotal, t0, wall;
	int opt;

	while ((opt = getopt(argc, argv, "s:k:n:w:h")) != -1) {
		switch (opt) {
		case 's':
			sockpath = optarg;
			break;
		case 'k':
			if (nkeys == CTL_MAX_KEYS) {
				fputs("vsession: too many keys\n", stderr);
				return EXIT_USAGE;
			}
			keys[nkeys++] = optarg;
			break;
		case 'n':
			n = strtoul(optarg, NULL, 10);
			break;
		case 'w':
			warm = strtoul(optarg, NULL, 10);
			break;
		case 'h':
		default:
			fputs("usage: vsession -s CONTROL_SOCKET -k KEY [-k KEY]... [-n N] [-w "
			      "WARMUP]\n",
			      opt == 'h' ? stdout : stderr);
			return opt == 'h' ? 0 : EXIT_USAGE;
		}
	}
	if (sockpath == NULL || nkeys == 0 || n == 0 || optind != argc) {
		fputs("usage: vsession -s CONTROL_SOCKET -k KEY [-k KEY]... [-n N] [-w WARMUP]\n",
		      stderr);
		return EXIT_USAGE;
	}
	if ((topen = calloc(n, sizeof(*topen))) == NULL ||
	    (tclose = calloc(n, sizeof(*tclose))) == NULL ||
	    (ttotal = calloc(n, sizeof(*ttotal))) == NULL)
		return 1;
	for (size_t i = 0; i < warm; i++) {
		uint64_t a, b;

		if (one(sockpath, keys, nkeys, &a, &b) != 0)
			return 1;
	}
	t0 = now_ns();
	for (size_t i = 0; i < n; i++) {
		if (one(sockpath, keys, nkeys, &topen[i], &tclose[i]) != 0)
			return 1;
		ttotal[i] = topen[i] + tclose[i];
	}
	wall = now_ns() - t0;
	qsort(topen, n, sizeof(*topen), cmp_u64);
	qsort(tclose, n, sizeof(*tclose), cmp_u64);
	qsort(ttotal, n, sizeof(*ttotal), cmp_u64);
	printf("{\"sessions\":%zu,\"open_p50_ms\":%.4f,\"open_p90_ms\":%.4f,\"open_p99_ms\":%.4f,"
	       "\"open_mean_ms\":%.4f,\"close_p50_ms\":%.4f,\"total_p50_ms\":%.4f,"
	       "\"wall_per_session_ms\":%.4f}\n",
	       n, pct_ms(topen, n, 0.5), pct_ms(topen, n, 0.9), pct_ms(topen, n, 0.99),
	       mean_ms(topen, n), pct_ms(tclose, n, 0.5), pct_ms(ttotal, n, 0.5),
	       (double)wall / (double)n / 1e6);
	free(topen);
	free(tclose);
	free(ttotal);
	return 0;
}
