#define _GNU_SOURCE
#include "daemon.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctlproto.h"
#include "safefile.h"
#include "secbuf.h"
#include "session.h"
#include "verr.h"

#define MAX_CLIENTS        256
#define CLIENT_TIMEOUT_SEC 10 /* to send a message while holding no session */
#define COMMAND_MAX        1024
#define DAEMON_SECBUF_POOL (512 * 1024) /* wiped, locked buffers kept for reuse */
#define DAEMON_WATCH_SEC   5            /* how often the control socket is looked for */

_Static_assert(CTL_MAX_KEYS <= SESSION_KEYS_MAX, "a session must hold every key a request names");

struct daemon;

struct client {
	struct daemon *d;
	int fd;
	uid_t uid;
	struct event *ev;
	size_t want;   /* bytes of the message being read */
	int passed_fd; /* descriptor that came with it, or -1 */
	struct session *session;
	struct client *prev, *next;
	struct ctl_writer in;
};

struct daemon {
	struct event_base *base;
	struct vault *vault;
	const struct daemon_opts *o;
	int lockfd, ctlfd;
	struct event *accept_ev, *retry_ev, *sig_ev[3];
	struct event *watch_ev; /* checks the control socket is still there */
	dev_t sock_dev;
	ino_t sock_ino;
	int orphaned;
	struct client *clients;
	size_t nclients;
	time_t started;
	struct ctl_writer out;
};

static void client_close(struct client *c);

static int
socket_path(const struct paths *p, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if ((size_t)snprintf(sun->sun_path, sizeof(sun->sun_path), "%s/%s", p->runtime,
	                     DAEMON_SOCKET_NAME) >= sizeof(sun->sun_path))
		return VERR_TOO_LARGE;
	return VERR_OK;
}

/*
 * Session CA bundles (ca-<32 hex>.pem, sessca_write_bundle) left by a daemon
 * that did not end its sessions (killed, or the machine crashed).
 */
static void
remove_stale_bundles(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;

	if (dp == NULL)
		return;
	while ((de = readdir(dp)) != NULL) {
		size_t n = strlen(de->d_name);

		if (n == 3 + 32 + 4 && strncmp(de->d_name, "ca-", 3) == 0 &&
		    strcmp(de->d_name + n - 4, ".pem") == 0 &&
		    strspn(de->d_name + 3, "0123456789abcdef") == 32)
			(void)unlinkat(dirfd(dp), de->d_name, 0);
	}
	closedir(dp);
}

int
daemon_prepare(const struct paths *p, int *lockfd, int *ctlfd)
{
	struct sockaddr_un sun;
	char lock[4096];
	mode_t old;
	int r, lfd = -1, sfd = -1, saved;

	*lockfd = *ctlfd = -1;
	if ((r = safefile_dir(p->runtime, 1)) != 0 || (r = socket_path(p, &sun)) != 0)
		return r;
	if ((size_t)snprintf(lock, sizeof(lock), "%s/%s", p->runtime, DAEMON_LOCK_NAME) >=
	    sizeof(lock))
		return VERR_TOO_LARGE;
	lfd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
	if (lfd < 0)
		return errno == ELOOP ? VERR_INSECURE_PATH : VERR_SYSTEM;
	/* The lock lives as long as the daemon: a second start sees it held. */
	if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
		r = errno == EWOULDBLOCK ? VERR_DAEMON_RUNNING : VERR_SYSTEM;
		goto fail;
	}
	/* Holding the lock, any socket file or CA bundle left behind is stale. */
	remove_stale_bundles(p->runtime);
	if (unlink(sun.sun_path) != 0 && errno != ENOENT) {
		r = VERR_SYSTEM;
		goto fail;
	}
	if ((sfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
		r = VERR_SYSTEM;
		goto fail;
	}
	old = umask(0177); /* the socket is born 0600, no window */
	r = bind(sfd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (r != 0 || listen(sfd, 64) != 0) {
		r = VERR_SYSTEM;
		goto fail;
	}
	*lockfd = lfd;
	*ctlfd = sfd;
	return VERR_OK;
fail:
	saved = errno;
	if (sfd >= 0)
		close(sfd);
	close(lfd);
	errno = saved;
	return r;
}

/* ---- replies ---- */

static void
reply(struct client *c)
{
	if (ctl_finish(&c->d->out) != 0 || ctl_send(c->fd, &c->d->out, -1) != 0)
		client_close(c);
}

static void reply_error(struct client *c, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
reply_error(struct client *c, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctl_begin(&c->d->out, CTL_ERROR);
	ctl_add_i64(&c->d->out, CTL_T_CODE, code);
	ctl_add_str(&c->d->out, CTL_T_MESSAGE, msg);
	reply(c);
}

/* ---- operations ---- */

/* argv joined by spaces, control bytes shown as '?', bounded: for status and audit. */
static void
command_line(const struct ctl_msg *m, char *buf, size_t size)
{
	const struct ctl_field *f;
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; (f = ctl_nth(m, CTL_T_ARG, i)) != NULL; i++) {
		if (i > 0 && off + 1 < size)
			buf[off++] = ' ';
		for (uint32_t k = 0; k < f->len && off + 1 < size; k++) {
			unsigned char ch = f->data[k];

			buf[off++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
		}
	}
	buf[off] = '\0';
}

static void
op_open(struct client *c, const struct ctl_msg *m)
{
	struct daemon *d = c->d;
	const struct vault_entry *entries[CTL_MAX_KEYS];
	struct hostspec allow[SESSION_MAX_ALLOW];
	struct session_params sp;
	const struct ctl_field *f;
	char name[VAULT_NAME_MAX + 1], command[COMMAND_MAX], line[512];
	char cwd[COMMAND_MAX], profile[256], token[129];
	size_t nkeys = 0, nallow = 0;
	uint64_t pid = 0;
	int r, exact;

	if (c->session != NULL) {
		reply_error(c, VERR_CTL, "this connection already has a session");
		return;
	}
	if (c->passed_fd < 0) {
		reply_error(c, VERR_LISTENER, "no listener was passed with the request");
		return;
	}
	/* Keys added or removed with `vault` count from the next session on. */
	if ((r = vault_refresh(d->vault)) != 0) {
		reply_error(c, r, "vault: %s", verr_strerror(r));
		return;
	}
	for (size_t i = 0; (f = ctl_nth(m, CTL_T_KEY, i)) != NULL; i++) {
		const struct vault_entry *e;
		int dup = 0;

		if (i >= CTL_MAX_KEYS) {
			reply_error(c, VERR_TOO_MANY, "at most %d keys per session", CTL_MAX_KEYS);
			return;
		}
		if (ctl_field_str(f, name, sizeof(name)) != 0 || vault_check_name(name) != 0) {
			reply_error(c, VERR_KEY_NAME, "invalid key name");
			return;
		}
		if ((r = vault_resolve(d->vault, name, &e, &exact)) != 0) {
			reply_error(c, r, "key '%s': %s", name, verr_strerror(r));
			return;
		}
		for (size_t k = 0; k < nkeys; k++)
			dup |= entries[k] == e;
		if (!dup)
			entries[nkeys++] = e;
	}
	if (nkeys == 0) {
		reply_error(c, VERR_KEY_UNKNOWN, "no key named");
		return;
	}
	for (size_t i = 0; (f = ctl_nth(m, CTL_T_ALLOW_HOST, i)) != NULL; i++) {
		if (nallow == SESSION_MAX_ALLOW) {
			reply_error(c, VERR_TOO_MANY, "at most %d --allow-host", SESSION_MAX_ALLOW);
			return;
		}
		if (ctl_field_str(f, line, sizeof(line)) != 0 ||
		    (r = hostspec_parse(line, strlen(line), HOSTSPEC_ALLOW_WILDCARD,
		                        &allow[nallow])) != 0) {
			reply_error(c, VERR_HOST, "--allow-host: %s", verr_strerror(VERR_HOST));
			return;
		}
		nallow++;
	}
	if (ctl_nth(m, CTL_T_PROXY_AUTH, 0) != NULL &&
	    (ctl_get_str(m, CTL_T_PROXY_AUTH, token, sizeof(token)) != 0 || strlen(token) < 16)) {
		reply_error(c, VERR_CTL, "bad proxy credential");
		return;
	}
	if (ctl_nth(m, CTL_T_PID, 0) != NULL && ctl_get_u64(m, CTL_T_PID, &pid) != 0) {
		reply_error(c, VERR_CTL, "bad pid");
		return;
	}
	command_line(m, command, sizeof(command));
	if ((ctl_nth(m, CTL_T_CWD, 0) != NULL &&
	     ctl_get_str(m, CTL_T_CWD, cwd, sizeof(cwd)) != 0) ||
	    (ctl_nth(m, CTL_T_PROFILE, 0) != NULL &&
	     ctl_get_str(m, CTL_T_PROFILE, profile, sizeof(profile)) != 0)) {
		reply_error(c, VERR_CTL, "bad cwd or profile");
		return;
	}
	if (ctl_nth(m, CTL_T_CWD, 0) == NULL)
		cwd[0] = '\0';
	if (ctl_nth(m, CTL_T_PROFILE, 0) == NULL)
		profile[0] = '\0';
	memset(&sp, 0, sizeof(sp));
	sp.keys = entries;
	sp.nkeys = nkeys;
	sp.allow = allow;
	sp.nallow = nallow;
	sp.command = command;
	sp.pid = (pid_t)pid;
	sp.uid = c->uid;
	sp.cwd = cwd;
	sp.profile = profile;
	sp.listen_fd = c->passed_fd;
	sp.runtime_dir = d->o->paths->runtime;
	sp.resolve = d->o->resolve;
	sp.timeouts = d->o->timeouts;
	sp.audit = d->o->audit;
	sp.proxy_token = ctl_nth(m, CTL_T_PROXY_AUTH, 0) != NULL ? token : NULL;
	if ((r = session_open(d->base, &sp, &c->session)) != 0) {
		reply_error(c, r, "cannot open the session: %s", verr_strerror(r));
		return;
	}
	c->passed_fd = -1; /* the session owns it now */
	ctl_begin(&d->out, CTL_OPENED);
	ctl_add_str(&d->out, CTL_T_SESSION, session_id(c->session));
	ctl_add_str(&d->out, CTL_T_CA_PATH, session_ca_path(c->session));
	for (size_t i = 0; i < session_nkeys(c->session); i++) {
		snprintf(line, sizeof(line), "%s\t%s\t%s", session_key_name(c->session, i),
		         session_key_env(c->session, i), session_placeholder(c->session, i));
		ctl_add_str(&d->out, CTL_T_KEYINFO, line);
	}
	for (size_t i = 0; (f = ctl_nth(m, CTL_T_KEY, i)) != NULL; i++) {
		const struct vault_entry *e;

		if (ctl_field_str(f, name, sizeof(name)) == 0 &&
		    vault_resolve(d->vault, name, &e, &exact) == 0 && !exact) {
			snprintf(line, sizeof(line), "%s\t%s", name, e->name);
			ctl_add_str(&d->out, CTL_T_RESOLVED, line);
		}
	}
	reply(c);
}

static void
op_status(struct client *c)
{
	struct daemon *d = c->d;
	char line[COMMAND_MAX + 64];

	vault_refresh(d->vault); /* best effort: show what the next session would see */
	ctl_begin(&d->out, CTL_STATUS_REPLY);
	ctl_add_u64(&d->out, CTL_T_PID, (uint64_t)getpid());
	ctl_add_u64(&d->out, CTL_T_UPTIME, (uint64_t)(time(NULL) - d->started));
	for (size_t i = 0; i < vault_count(d->vault); i++)
		ctl_add_str(&d->out, CTL_T_KEYINFO, vault_entry_at(d->vault, i)->name);
	for (struct client *k = d->clients; k != NULL; k = k->next) {
		if (k->session == NULL)
			continue;
		snprintf(line, sizeof(line), "%s\t%llu\t%s", session_id(k->session),
		         (unsigned long long)session_requests(k->session),
		         session_command(k->session));
		ctl_add_str(&d->out, CTL_T_SESSINFO, line);
	}
	reply(c);
}

static void
dispatch(struct client *c, const struct ctl_msg *m)
{
	struct daemon *d = c->d;

	switch (m->type) {
	case CTL_OPEN:
		op_open(c, m);
		break;
	case CTL_CLOSE:
		if (c->session != NULL) {
			int64_t status;

			if (ctl_get_i64(m, CTL_T_EXIT, &status) == 0)
				session_set_exit(c->session, status);
			session_close(c->session);
			c->session = NULL;
		}
		ctl_begin(&d->out, CTL_OK);
		reply(c);
		break;
	case CTL_STATUS:
		op_status(c);
		break;
	case CTL_STOP:
		ctl_begin(&d->out, CTL_OK);
		reply(c);
		event_base_loopexit(d->base, NULL);
		break;
	default:
		/* Replies are not requests: a confused or hostile peer. */
		client_close(c);
		break;
	}
}

/* ---- control connections ---- */

static void
client_close(struct client *c)
{
	struct daemon *d = c->d;

	if (c->session != NULL)
		session_close(c->session);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	event_free(c->ev);
	close(c->fd);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		d->clients = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	d->nclients--;
	free(c);
}

static void
arm(struct client *c)
{
	struct timeval tv = {CLIENT_TIMEOUT_SEC, 0};

	/*
	 * A client with a live session may sit silent as long as its command
	 * runs. event_del first: event_add(NULL) would keep an old timeout.
	 */
	event_del(c->ev);
	event_add(c->ev, (c->session != NULL && c->in.len == 0) ? NULL : &tv);
}

static void
client_read(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	union {
		struct cmsghdr h;
		unsigned char b[CMSG_SPACE(4 * sizeof(int))];
	} cbuf;
	struct ctl_msg *m;
	struct iovec iov;
	struct msghdr mh;
	uint16_t type;
	uint32_t plen;
	ssize_t n;

	if (what & EV_TIMEOUT) {
		client_close(c);
		return;
	}
	iov.iov_base = c->in.buf + c->in.len;
	iov.iov_len = c->want - c->in.len;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf.b;
	mh.msg_controllen = sizeof(cbuf.b);
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h != NULL; h = CMSG_NXTHDR(&mh, h)) {
		size_t k;

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			/* One descriptor per message at most; extras never stay open. */
			if (c->passed_fd < 0)
				c->passed_fd = f;
			else
				close(f);
		}
	}
	if (n <= 0 || (mh.msg_flags & MSG_CTRUNC)) {
		client_close(c);
		return;
	}
	c->in.len += (size_t)n;
	if (c->in.len == CTL_HEADER_LEN && c->want == CTL_HEADER_LEN) {
		if (ctl_parse_header(c->in.buf, c->in.len, &type, &plen) != 0) {
			client_close(c);
			return;
		}
		c->want += plen;
	}
	if (c->in.len < c->want) {
		arm(c);
		return;
	}
	if ((m = malloc(sizeof(*m))) == NULL || ctl_parse(c->in.buf, c->in.len, m) != 0) {
		free(m);
		client_close(c); /* malformed: drop this peer, never the daemon */
		return;
	}
	dispatch(c, m);
	free(m);
	/* dispatch may have closed c: it is only touched again if still listed. */
	for (struct client *k = c->d->clients; k != NULL; k = k->next) {
		if (k != c)
			continue;
		if (c->passed_fd >= 0) {
			close(c->passed_fd);
			c->passed_fd = -1;
		}
		c->in.len = 0;
		c->want = CTL_HEADER_LEN;
		arm(c);
		break;
	}
}

static void
accept_retry(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	(void)fd;
	(void)what;
	event_add(d->accept_ev, NULL);
}

static void
accept_control(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct client *c;
	int cfd;

	(void)what;
	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (cfd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			/* Out of descriptors: pause accepting instead of spinning. */
			struct timeval tv = {0, 100 * 1000};

			event_del(d->accept_ev);
			event_add(d->retry_ev, &tv);
		}
		return;
	}
	/* Same user only: the socket mode says so too, the kernel's word is final. */
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid() ||
	    d->nclients >= MAX_CLIENTS || (c = calloc(1, sizeof(*c))) == NULL) {
		close(cfd);
		return;
	}
	c->d = d;
	c->fd = cfd;
	c->uid = cred.uid;
	c->passed_fd = -1;
	c->want = CTL_HEADER_LEN;
	if ((c->ev = event_new(d->base, cfd, EV_READ | EV_PERSIST, client_read, c)) == NULL) {
		close(cfd);
		free(c);
		return;
	}
	c->next = d->clients;
	if (d->clients != NULL)
		d->clients->prev = c;
	d->clients = c;
	d->nclients++;
	arm(c);
}

/* Whether the control socket's path still names the socket this daemon made. */
static int
socket_ours(const struct daemon *d, const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == d->sock_dev &&
	       st.st_ino == d->sock_ino;
}

/*
 * The control socket gone (its runtime directory removed, as logind does
 * at the last logout) leaves a daemon holding decrypted keys that nothing
 * can reach, stop or see: it exits.
 */
static void
watch_socket(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct sockaddr_un sun;

	(void)fd;
	(void)what;
	if (socket_path(d->o->paths, &sun) == 0 && socket_ours(d, sun.sun_path))
		return;
	d->orphaned = 1;
	event_base_loopexit(d->base, NULL);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
	if (sig == SIGTERM || sig == SIGINT)
		event_base_loopexit(d->base, NULL);
}

int
daemon_run(struct vault *v, const struct daemon_opts *o, int lockfd, int ctlfd, int ready_fd)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	struct sockaddr_un sun;
	struct daemon *d;
	int r = VERR_NOMEM;

	signal(SIGPIPE, SIG_IGN);
	/* A file size limit must fail the audit write (-> 503), not kill us. */
	signal(SIGXFSZ, SIG_IGN);
	/* Single-threaded: per-request secret buffers are reused, wiped, not remapped. */
	secbuf_pool_enable(DAEMON_SECBUF_POOL);
	if ((d = calloc(1, sizeof(*d))) == NULL)
		goto out;
	d->vault = v;
	d->o = o;
	d->lockfd = lockfd;
	d->ctlfd = ctlfd;
	d->started = time(NULL);
	if ((d->base = event_base_new()) == NULL)
		goto out;
	d->accept_ev = event_new(d->base, ctlfd, EV_READ | EV_PERSIST, accept_control, d);
	d->retry_ev = evtimer_new(d->base, accept_retry, d);
	if (d->accept_ev == NULL || d->retry_ev == NULL || event_add(d->accept_ev, NULL) != 0)
		goto out;
	{
		struct stat st;
		struct timeval every = {DAEMON_WATCH_SEC, 0};

		/* The path's inode (the descriptor's is the socket's, not the file's). */
		if (socket_path(o->paths, &sun) != 0 || lstat(sun.sun_path, &st) != 0) {
			r = VERR_SYSTEM;
			goto out;
		}
		d->sock_dev = st.st_dev;
		d->sock_ino = st.st_ino;
		d->watch_ev = event_new(d->base, -1, EV_PERSIST, watch_socket, d);
		if (d->watch_ev == NULL || event_add(d->watch_ev, &every) != 0)
			goto out;
	}
	for (size_t i = 0; i < 3; i++)
		if ((d->sig_ev[i] = evsignal_new(d->base, sigs[i], on_signal, d)) == NULL ||
		    event_add(d->sig_ev[i], NULL) != 0)
			goto out;
	if (ready_fd >= 0) {
		(void)!write(ready_fd, "", 1);
		close(ready_fd);
		ready_fd = -1;
	}
	r = event_base_dispatch(d->base) < 0 ? VERR_SYSTEM : VERR_OK;
	if (r == VERR_OK && d->orphaned)
		r = VERR_DAEMON_ORPHANED;
out:
	if (ready_fd >= 0)
		close(ready_fd);
	if (d != NULL) {
		while (d->clients != NULL)
			client_close(d->clients);
		for (size_t i = 0; i < 3; i++)
			if (d->sig_ev[i] != NULL)
				event_free(d->sig_ev[i]);
		if (d->accept_ev != NULL)
			event_free(d->accept_ev);
		if (d->retry_ev != NULL)
			event_free(d->retry_ev);
		if (d->watch_ev != NULL)
			event_free(d->watch_ev);
		if (d->base != NULL)
			event_base_free(d->base);
	}
	/* Only our own socket: another vproxy may have made a new one since. */
	if (d != NULL && d->sock_ino != 0 && socket_path(o->paths, &sun) == 0 &&
	    socket_ours(d, sun.sun_path))
		unlink(sun.sun_path);
	free(d);
	close(ctlfd);
	close(lockfd);
	vault_close(v);
	secbuf_pool_enable(0);
	return r;
}
