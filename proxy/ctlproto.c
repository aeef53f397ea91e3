#include "ctlproto.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "verr.h"

static uint16_t
get16(const unsigned char *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t
get32(const unsigned char *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void
put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* Which tags each message type may carry: anything else is malformed. */
static int
tag_allowed(uint16_t type, uint16_t tag)
{
	switch (type) {
	case CTL_OPEN:
		return tag == CTL_T_KEY || tag == CTL_T_ALLOW_HOST || tag == CTL_T_ARG ||
		       tag == CTL_T_CWD || tag == CTL_T_PID || tag == CTL_T_PROFILE ||
		       tag == CTL_T_PROXY_AUTH;
	case CTL_OPENED:
		return tag == CTL_T_SESSION || tag == CTL_T_CA_PATH || tag == CTL_T_KEYINFO ||
		       tag == CTL_T_RESOLVED;
	case CTL_ERROR:
		return tag == CTL_T_CODE || tag == CTL_T_MESSAGE;
	case CTL_CLOSE:
		return tag == CTL_T_EXIT;
	case CTL_STATUS_REPLY:
		return tag == CTL_T_PID || tag == CTL_T_UPTIME || tag == CTL_T_KEYINFO ||
		       tag == CTL_T_SESSINFO;
	case CTL_STATUS:
	case CTL_STOP:
	case CTL_OK:
		return 0;
	}
	return 0;
}

int
ctl_parse_header(const unsigned char *buf, size_t len, uint16_t *type, uint32_t *payload_len)
{
	*type = 0;
	*payload_len = 0;
	if (len < CTL_HEADER_LEN || get16(buf) != CTL_VERSION)
		return VERR_CTL;
	*type = get16(buf + 2);
	*payload_len = get32(buf + 4);
	if (*type < CTL_OPEN || *type > CTL_OK || *payload_len > CTL_MAX_PAYLOAD)
		return VERR_CTL;
	return VERR_OK;
}

int
ctl_parse(const unsigned char *buf, size_t len, struct ctl_msg *out)
{
	uint32_t plen;
	size_t off = CTL_HEADER_LEN;
	int r;

	out->type = 0;
	out->nfields = 0;
	if ((r = ctl_parse_header(buf, len, &out->type, &plen)) != 0)
		return r;
	if (len != CTL_HEADER_LEN + (size_t)plen)
		return VERR_CTL;
	while (off < len) {
		struct ctl_field *f;

		if (len - off < 6 || out->nfields == CTL_MAX_FIELDS)
			return VERR_CTL;
		f = &out->fields[out->nfields];
		f->tag = get16(buf + off);
		f->len = get32(buf + off + 2);
		off += 6;
		if (f->len > len - off || !tag_allowed(out->type, f->tag))
			return VERR_CTL;
		f->data = buf + off;
		off += f->len;
		out->nfields++;
	}
	return VERR_OK;
}

const struct ctl_field *
ctl_nth(const struct ctl_msg *m, uint16_t tag, size_t i)
{
	for (size_t k = 0; k < m->nfields; k++)
		if (m->fields[k].tag == tag && i-- == 0)
			return &m->fields[k];
	return NULL;
}

int
ctl_get_u64(const struct ctl_msg *m, uint16_t tag, uint64_t *v)
{
	const struct ctl_field *f = ctl_nth(m, tag, 0);

	*v = 0;
	if (f == NULL || f->len != 8)
		return VERR_CTL;
	for (int i = 0; i < 8; i++)
		*v = (*v << 8) | f->data[i];
	return VERR_OK;
}

int
ctl_get_i64(const struct ctl_msg *m, uint16_t tag, int64_t *v)
{
	uint64_t u;
	int r = ctl_get_u64(m, tag, &u);

	*v = (int64_t)u;
	return r;
}

int
ctl_field_str(const struct ctl_field *f, char *buf, size_t size)
{
	if (size == 0)
		return VERR_INVALID;
	buf[0] = '\0';
	if (f == NULL || f->len >= size || memchr(f->data, '\0', f->len) != NULL)
		return VERR_CTL;
	memcpy(buf, f->data, f->len);
	buf[f->len] = '\0';
	return VERR_OK;
}

int
ctl_get_str(const struct ctl_msg *m, uint16_t tag, char *buf, size_t size)
{
	return ctl_field_str(ctl_nth(m, tag, 0), buf, size);
}

void
ctl_begin(struct ctl_writer *w, uint16_t type)
{
	put16(w->buf, CTL_VERSION);
	put16(w->buf + 2, type);
	put32(w->buf + 4, 0);
	w->len = CTL_HEADER_LEN;
	w->err = 0;
}

void
ctl_add(struct ctl_writer *w, uint16_t tag, const void *data, size_t len)
{
	if (w->err != 0)
		return;
	if (len > sizeof(w->buf) - w->len || sizeof(w->buf) - w->len - len < 6) {
		w->err = VERR_TOO_LARGE;
		return;
	}
	put16(w->buf + w->len, tag);
	put32(w->buf + w->len + 2, (uint32_t)len);
	if (len > 0)
		memcpy(w->buf + w->len + 6, data, len);
	w->len += 6 + len;
}

void
ctl_add_str(struct ctl_writer *w, uint16_t tag, const char *s)
{
	ctl_add(w, tag, s, strlen(s));
}

void
ctl_add_u64(struct ctl_writer *w, uint16_t tag, uint64_t v)
{
	unsigned char b[8];

	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (unsigned char)v;
	ctl_add(w, tag, b, sizeof(b));
}

void
ctl_add_i64(struct ctl_writer *w, uint16_t tag, int64_t v)
{
	ctl_add_u64(w, tag, (uint64_t)v);
}

int
ctl_finish(struct ctl_writer *w)
{
	if (w->err != 0)
		return w->err;
	put32(w->buf + 4, (uint32_t)(w->len - CTL_HEADER_LEN));
	return VERR_OK;
}

int
ctl_send(int sock, const struct ctl_writer *w, int pass_fd)
{
	union {
		struct cmsghdr h;
		unsigned char b[CMSG_SPACE(sizeof(int))];
	} cbuf;
	struct iovec iov = {(void *)w->buf, w->len};
	struct msghdr mh;
	size_t off = 0;
	ssize_t n;

	while (off < w->len) {
		memset(&mh, 0, sizeof(mh));
		iov.iov_base = (void *)(w->buf + off);
		iov.iov_len = w->len - off;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (off == 0 && pass_fd >= 0) {
			struct cmsghdr *c;

			memset(&cbuf, 0, sizeof(cbuf));
			mh.msg_control = cbuf.b;
			mh.msg_controllen = sizeof(cbuf.b);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
		}
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return VERR_SYSTEM;
		off += (size_t)n;
	}
	return VERR_OK;
}

/* Keep the first descriptor of a control message, close all others. */
static void
take_fds(struct msghdr *mh, int *fd)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = f;
			else
				close(f);
		}
	}
}

int
ctl_recv(int sock, struct ctl_writer *w, struct ctl_msg *msg, int *fd)
{
	union {
		struct cmsghdr h;
		unsigned char b[CMSG_SPACE(4 * sizeof(int))];
	} cbuf;
	size_t want = CTL_HEADER_LEN;
	uint16_t type;
	uint32_t plen;
	int r;

	*fd = -1;
	w->len = 0;
	msg->nfields = 0;
	while (w->len < want) {
		struct iovec iov = {w->buf + w->len, want - w->len};
		struct msghdr mh;
		ssize_t n;

		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf.b;
		mh.msg_controllen = sizeof(cbuf.b);
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = VERR_SYSTEM;
			goto fail;
		}
		take_fds(&mh, fd);
		if (mh.msg_flags & MSG_CTRUNC) {
			r = VERR_CTL;
			goto fail;
		}
		if (n == 0) {
			r = w->len == 0 ? VERR_CTL_EOF : VERR_CTL;
			goto fail;
		}
		w->len += (size_t)n;
		if (want == CTL_HEADER_LEN && w->len == CTL_HEADER_LEN) {
			if ((r = ctl_parse_header(w->buf, w->len, &type, &plen)) != 0)
				goto fail;
			want += plen;
		}
	}
	if ((r = ctl_parse(w->buf, w->len, msg)) != 0)
		goto fail;
	return VERR_OK;
fail:
	if (*fd >= 0) {
		int saved = errno;

		close(*fd);
		errno = saved;
		*fd = -1;
	}
	return r;
}
