/*
 * conn: one client connection accepted on a session listener, from the
 * CONNECT (or absolute-form request) to the close. Each connection has
 * one state variable, one function that changes it, and one close path
 * that also accounts for the request.
 */
#ifndef VRUN_CONN_H
#define VRUN_CONN_H

#include <stddef.h>

struct conn;
struct session;

/*
 * Timeouts of a connection, in seconds (vproxy start --timeout NAME=SEC).
 * head: to send a complete request head; idle: between requests on a
 * kept-alive connection; connect: resolve + TCP + upstream TLS; handshake:
 * the client's TLS handshake; exchange: no byte moved either way while a
 * request is relayed (slow bodies, slow readers).
 */
struct conn_timeouts {
	int head, idle, connect, handshake, exchange;
};

#define CONN_TIMEOUTS_DEFAULT                                                                      \
	{                                                                                          \
		30, 60, 10, 10, 120                                                                \
	}
#define CONN_TIMEOUT_MAX 86400

/*
 * Set one timeout from "NAME=SECONDS" (1..CONN_TIMEOUT_MAX). VERR_INVALID
 * for an unknown name or a bad number.
 */
int conn_timeout_set(struct conn_timeouts *t, const char *spec);

/* The connections of one session, so the session can end them all. */
struct conn_list {
	struct conn *first;
	size_t n;
};

/* Take over fd, a client socket accepted on s's listener. */
void conn_start(struct session *s, struct conn_list *list, int fd);

/* Close every connection in list (session end, daemon shutdown). */
void conn_close_all(struct conn_list *list);

#endif
