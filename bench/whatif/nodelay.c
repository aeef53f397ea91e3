/*
 * What-if experiment: preloaded into vproxy by `bench/run --vproxy-env
 * LD_PRELOAD=.../libwhatif_nodelay.so`, it sets TCP_NODELAY on every TCP
 * socket vproxy accepts or connects, to measure the cost of Nagle's
 * algorithm holding back the small last TLS record of a response (the
 * chunked terminator) until the peer's delayed ACK.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <sys/socket.h>

static void
nodelay(int fd)
{
	int one = 1;

	if (fd >= 0)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int
accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	static int (*real)(int, struct sockaddr *, socklen_t *, int);
	int r;

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "accept4");
	r = real(fd, sa, len, flags);
	nodelay(r);
	return r;
}

int
accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	static int (*real)(int, struct sockaddr *, socklen_t *);
	int r;

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "accept");
	r = real(fd, sa, len);
	nodelay(r);
	return r;
}

int
connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "connect");
	if (sa != NULL && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6))
		nodelay(fd);
	return real(fd, sa, len);
}
