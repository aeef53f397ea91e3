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
