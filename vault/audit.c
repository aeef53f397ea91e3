/*
 * audit: the tamper-evident audit log (format and guarantees in audit.h).
 */
#define _GNU_SOURCE
#include "audit.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <libgen.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "safefile.h"
#include "verr.h"

#define HMAC_PREFIX     ",\"hmac\":\""
#define HMAC_PREFIX_LEN (sizeof(HMAC_PREFIX) - 1)
/* ,"hmac":"<64 hex>"} */
#define HMAC_SUFFIX_LEN (HMAC_PREFIX_LEN + AUDIT_HASH_HEX + 2)
#define PREV_PREFIX     "\"prev\":\""
#define PREV_PREFIX_LEN (sizeof(PREV_PREFIX) - 1)
/* "prev":"<64 hex>" */
#define PREV_MEMBER_LEN (PREV_PREFIX_LEN + AUDIT_HASH_HEX + 1)
#define TAIL_WINDOW     (2 * (size_t)AUDIT_LINE_MAX + 2)
#define READ_CHUNK      (64 * 1024)
#define NAME_MAX_SUFFIX 8 /* ".9" and then some */

static const char zero_hash[AUDIT_HASH_HEX + 1] =
        "0000000000000000000000000000000000000000000000000000000000000000";

struct audit {
	int fd;
	char *path;
	char *dir;
	/*
	 * HMAC state keyed once (read-only) and the state of the record being
	 * signed, both secret-equivalent: re-keying or unprotecting the key for
	 * every record would cost syscalls on each request.
	 */
	struct secbuf *keyed, *work;
	uint64_t seq;                  /* last record's seq; 0 when none */
	char prev[AUDIT_HASH_HEX + 1]; /* hash of the last record's line */
	uint64_t size;                 /* of the current file */
	uint64_t max;                  /* rotation limit; 0: none */
	int sync;
	int need_nl; /* the file ends inside a line (an interrupted write) */
	int64_t fixed_ms;
	/*
	 * Space allocated past the end of the current file (fallocate,
	 * FALLOC_FL_KEEP_SIZE) up to this offset, so that a record due at the
	 * end of a request does not meet a full disk; AUDIT_NO_RESERVE where
	 * the file system cannot reserve.
	 */
	uint64_t reserved;
	int failing; /* errno of the last failed write; 0 once one succeeds */
};

#define AUDIT_NO_RESERVE UINT64_MAX
#define RESERVE_CHUNK    (1024 * 1024)
#define RESERVE_LOW      (64 * 1024)

/* ---- small helpers ---- */

static int
private_stat(const struct stat *st)
{
	if (!S_ISREG(st->st_mode) || st->st_uid != geteuid() ||
	    (st->st_mode & (S_IRWXG | S_IRWXO)) != 0)
		return VERR_INSECURE_PATH;
	return VERR_OK;
}

/* Open an existing log file for reading; VERR_SYSTEM/ENOENT when missing. */
static int
open_private_ro(const char *path, int *fd)
{
	struct stat st;
	int f, r, saved;

	*fd = -1;
	f = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (f < 0)
		return errno == ELOOP ? VERR_INSECURE_PATH : VERR_SYSTEM;
	if (fstat(f, &st) != 0)
		r = VERR_SYSTEM;
	else
		r = private_stat(&st);
	if (r != 0) {
		saved = errno;
		close(f);
		errno = saved;
		return r;
	}
	*fd = f;
	return VERR_OK;
}

static void
hash_hex(const void *p, size_t len, char hex[AUDIT_HASH_HEX + 1])
{
	unsigned char h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(h, p, len);
	sodium_bin2hex(hex, AUDIT_HASH_HEX + 1, h, sizeof(h));
}

static int
is_lower_hex(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
	return 1;
}

static char *
numbered(const char *path, unsigned i)
{
	size_t n = strlen(path) + NAME_MAX_SUFFIX;
	char *s = malloc(n);

	if (s != NULL)
		snprintf(s, n, "%s.%u", path, i);
	return s;
}

static int
valid_type(const char *type)
{
	return type != NULL && (strcmp(type, "session_start") == 0 ||
	                        strcmp(type, "request") == 0 || strcmp(type, "session_end") == 0);
}

static int
reserved_name(const char *k)
{
	static const char *const names[] = {"v", "seq", "time", "type", "session", "prev", "hmac"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(k, names[i]) == 0)
			return 1;
	return 0;
}

static int64_t
now_ms(const struct audit *a)
{
	struct timespec ts;

	if (a->fixed_ms != 0)
		return a->fixed_ms;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
format_ms(int64_t ms, char buf[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms < 0 || gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		strcpy(buf, "1970-01-01T00:00:00.000Z");
		return;
	}
	snprintf(buf + strlen(buf), 32 - strlen(buf), ".%03dZ", (int)(ms % 1000));
}

/* ---- finding where the chain stands ---- */

/* The seq of a line that looks like a record, or 0. */
static uint64_t
line_seq(const char *p, size_t len)
{
	json_t *j = json_loadb(p, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *s = json_object_get(j, "seq");
	uint64_t seq = 0;

	if (json_is_integer(s) && json_integer_value(s) > 0)
		seq = (uint64_t)json_integer_value(s);
	json_decref(j);
	return seq;
}

/*
 * The last complete line of fd (size bytes) that carries a seq. Garbage
 * after it (a half-written line, complete lines that are no record) is
 * skipped: verification reports it, the writer only needs the chain.
 * *found is 0 when no record was seen in the window.
 */
static int
scan_tail(int fd, uint64_t size, uint64_t *seq, char prev[AUDIT_HASH_HEX + 1], int *found,
          int *whole)
{
	size_t win = size < TAIL_WINDOW ? (size_t)size : TAIL_WINDOW, got = 0, end;
	off_t base = (off_t)(size - win);
	char *buf;
	ssize_t n;

	*found = 0;
	*whole = win == size;
	if (win == 0)
		return VERR_OK;
	if ((buf = malloc(win)) == NULL)
		return VERR_NOMEM;
	while (got < win) {
		n = pread(fd, buf + got, win - got, base + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < win) {
		free(buf);
		if (n == 0)
			errno = EIO; /* shrank under us */
		return VERR_SYSTEM;
	}
	/* end: one past the newline of the last complete line still to look at */
	end = win;
	while (end > 0 && buf[end - 1] != '\n')
		end--;
	while (end > 0) {
		size_t e = end - 1, s = e;
		uint64_t q;

		while (s > 0 && buf[s - 1] != '\n')
			s--;
		/* A line starting at the window's edge may be cut; only trust a whole file's. */
		if (s == 0 && !*whole)
			break;
		if ((q = line_seq(buf + s, e - s)) != 0) {
			*seq = q;
			hash_hex(buf + s, e - s, prev);
			*found = 1;
			break;
		}
		end = s;
	}
	free(buf);
	return VERR_OK;
}

static int
load_tail(struct audit *a)
{
	char *older = NULL, last;
	int fd = -1, found = 0, whole = 1, r;
	struct stat st;

	a->seq = 0;
	memcpy(a->prev, zero_hash, sizeof(a->prev));
	if (a->size > 0) {
		ssize_t n = pread(a->fd, &last, 1, (off_t)a->size - 1);

		if (n != 1) {
			if (n == 0)
				errno = EIO; /* shrank under us */
			return VERR_SYSTEM;
		}
		a->need_nl = last != '\n';
		if ((r = scan_tail(a->fd, a->size, &a->seq, a->prev, &found, &whole)) != 0)
			return r;
		if (found)
			return VERR_OK;
		if (!whole)
			return VERR_AUDIT_DAMAGED;
	}
	/* Empty, or only an interrupted first write: continue from the rotated file. */
	if ((older = numbered(a->path, 1)) == NULL)
		return VERR_NOMEM;
	r = open_private_ro(older, &fd);
	free(older);
	if (r == VERR_SYSTEM && errno == ENOENT)
		return VERR_OK;
	if (r != 0)
		return r;
	if (fstat(fd, &st) != 0)
		r = VERR_SYSTEM;
	else if ((r = scan_tail(fd, (uint64_t)st.st_size, &a->seq, a->prev, &found, &whole)) == 0 &&
	         !found && st.st_size > 0)
		r = VERR_AUDIT_DAMAGED;
	close(fd);
	return r;
}

/* ---- writing ---- */

static int
open_current(struct audit *a)
{
	struct stat st;
	int fd;

	fd = open(a->path,
	          O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
	          0600);
	if (fd < 0)
		return errno == ELOOP ? VERR_INSECURE_PATH : VERR_SYSTEM;
	if (fstat(fd, &st) != 0) {
		int saved = errno;

		close(fd);
		errno = saved;
		return VERR_SYSTEM;
	}
	if (private_stat(&st) != 0) {
		close(fd);
		return VERR_INSECURE_PATH;
	}
	a->fd = fd;
	a->size = (uint64_t)st.st_size;
	a->need_nl = 0;
	a->reserved = a->reserved == AUDIT_NO_RESERVE ? AUDIT_NO_RESERVE : a->size;
	return VERR_OK;
}

/* Give back the space reserved past the end of the file (on close and rotation). */
static void
release_reserve(struct audit *a)
{
	if (a->fd < 0 || a->reserved == AUDIT_NO_RESERVE || a->reserved <= a->size)
		return;
	/* On failure the blocks stay allocated past the end: harmless. */
	if (ftruncate(a->fd, (off_t)a->size) == 0)
		a->reserved = a->size;
}

int
audit_open(const char *path, const struct secbuf *key, struct audit **out)
{
	struct audit *a;
	char *copy = NULL;
	int r;

	*out = NULL;
	if (path == NULL || *path == '\0' || key == NULL ||
	    key->len != crypto_auth_hmacsha256_KEYBYTES)
		return VERR_INVALID;
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return VERR_NOMEM;
	a->fd = -1;
	a->max = AUDIT_ROTATE_DEFAULT;
	if ((a->path = strdup(path)) == NULL || (copy = strdup(path)) == NULL ||
	    (a->dir = strdup(dirname(copy))) == NULL) {
		r = VERR_NOMEM;
		goto out;
	}
	/* Whoever can write the directory can swap the log; it must be ours alone. */
	if ((r = safefile_dir(a->dir, 0)) != 0)
		goto out;
	if ((r = secbuf_new(sizeof(crypto_auth_hmacsha256_state), &a->keyed)) != 0 ||
	    (r = secbuf_new(sizeof(crypto_auth_hmacsha256_state), &a->work)) != 0)
		goto out;
	if (crypto_auth_hmacsha256_init((crypto_auth_hmacsha256_state *)(void *)a->keyed->data,
	                                key->data, key->len) != 0 ||
	    secbuf_readonly(a->keyed) != 0) {
		r = VERR_CRYPTO;
		goto out;
	}
	if ((r = open_current(a)) != 0 || (r = load_tail(a)) != 0)
		goto out;
	*out = a;
	a = NULL;
out:
	free(copy);
	audit_close(a);
	return r;
}

void
audit_set_rotate(struct audit *a, uint64_t max_bytes)
{
	if (a != NULL)
		a->max = max_bytes;
}

void
audit_set_sync(struct audit *a, int on)
{
	if (a != NULL)
		a->sync = on != 0;
}

uint64_t
audit_last_seq(const struct audit *a)
{
	return a != NULL ? a->seq : 0;
}

void
audit_test_set_fd(struct audit *a, int fd)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = fd;
}

void
audit_test_set_time(struct audit *a, int64_t ms)
{
	a->fixed_ms = ms;
}

int
audit_ready(struct audit *a)
{
	uint64_t len = RESERVE_CHUNK;

	if (a == NULL)
		return VERR_INVALID;
	if (a->fd < 0 || a->failing != 0) {
		errno = a->fd < 0 ? EBADF : a->failing;
		return VERR_SYSTEM;
	}
	if (a->reserved == AUDIT_NO_RESERVE || a->reserved >= a->size + RESERVE_LOW)
		return VERR_OK;
	/* Not past the rotation limit: the rest would be left allocated in the old file. */
	if (a->max != 0)
		len = a->max > a->size ? a->max - a->size : 0;
	if (len > RESERVE_CHUNK)
		len = RESERVE_CHUNK;
	if (len < RESERVE_LOW)
		return VERR_OK; /* rotation is near: the next file gets its own */
	for (;;) {
		if (fallocate(a->fd, FALLOC_FL_KEEP_SIZE, (off_t)a->size, (off_t)len) == 0) {
			a->reserved = a->size + len;
			return VERR_OK;
		}
		if (errno != ENOSPC || len == RESERVE_LOW)
			break;
		len = RESERVE_LOW; /* short of space: the least worth going on with */
	}
	if (errno == EOPNOTSUPP || errno == ENOSYS) {
		a->reserved = AUDIT_NO_RESERVE; /* the write itself will tell */
		return VERR_OK;
	}
	a->failing = errno;
	return VERR_SYSTEM;
}

void
audit_close(struct audit *a)
{
	if (a == NULL)
		return;
	release_reserve(a);
	if (a->fd >= 0)
		close(a->fd);
	secbuf_free(a->keyed);
	secbuf_free(a->work);
	free(a->path);
	free(a->dir);
	free(a);
}

static int
fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = VERR_OK;

	if (fd < 0)
		return VERR_SYSTEM;
	if (fsync(fd) != 0)
		r = VERR_SYSTEM;
	close(fd);
	return r;
}

/*
 * audit.log -> .1 -> .2 ... -> .AUDIT_KEEP (deleted). Only the run .1...m
 * without a gap is shifted, so a hole left by a crash in here is filled
 * rather than overwriting an older file. On failure the current file stays
 * in use and the next record tries again.
 */
static int
rotate(struct audit *a)
{
	char *from = NULL, *to = NULL;
	struct stat st;
	unsigned m = 0;
	int r = VERR_OK, oldfd;

	for (int there = 1; there && m < AUDIT_KEEP;) {
		if ((from = numbered(a->path, m + 1)) == NULL)
			return VERR_NOMEM;
		there = lstat(from, &st) == 0;
		free(from);
		from = NULL;
		m += (unsigned)there;
	}
	if (m == AUDIT_KEEP) {
		if ((from = numbered(a->path, AUDIT_KEEP)) == NULL)
			return VERR_NOMEM;
		if (unlink(from) != 0 && errno != ENOENT)
			r = VERR_SYSTEM;
		free(from);
		from = NULL;
		m--;
		if (r != 0)
			return r;
	}
	for (unsigned i = m; i >= 1; i--) {
		from = numbered(a->path, i);
		to = numbered(a->path, i + 1);
		if (from == NULL || to == NULL)
			r = VERR_NOMEM;
		else if (rename(from, to) != 0)
			r = VERR_SYSTEM;
		free(from);
		free(to);
		from = to = NULL;
		if (r != 0)
			return r;
	}
	if ((to = numbered(a->path, 1)) == NULL)
		return VERR_NOMEM;
	release_reserve(a);
	if (rename(a->path, to) != 0) {
		free(to);
		return VERR_SYSTEM;
	}
	free(to);
	oldfd = a->fd;
	a->fd = -1;
	if ((r = open_current(a)) != 0) {
		/* The renamed file is still ours to append to until a new one opens. */
		a->fd = oldfd;
		return r;
	}
	close(oldfd);
	if (a->sync && (r = fsync_dir(a->dir)) != 0)
		return r;
	return VERR_OK;
}

static int
write_line(struct audit *a, const char *buf, size_t len)
{
	ssize_t n;

	do
		n = write(a->fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return VERR_SYSTEM;
	if ((size_t)n != len) {
		/* Take back the fragment so the log stays a list of whole records. */
		if (ftruncate(a->fd, (off_t)a->size) != 0)
			a->need_nl = 1;
		else if (a->reserved != AUDIT_NO_RESERVE)
			a->reserved = a->size; /* the truncation gave the reserve back */
		errno = ENOSPC;
		return VERR_SYSTEM;
	}
	return VERR_OK;
}

static size_t utf8_seq(const unsigned char *p, size_t n);

/* ---- record text: a growable buffer and JSON values as jansson writes them ---- */

struct text {
	char *p;
	size_t len, cap;
	int oom;
};

static void
text_add(struct text *t, const void *s, size_t n)
{
	if (t->oom)
		return;
	if (n > t->cap - t->len) {
		size_t cap = t->cap ? t->cap : 512;
		char *p;

		while (cap - t->len < n)
			cap *= 2;
		if ((p = realloc(t->p, cap)) == NULL) {
			t->oom = 1;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
}

static void
text_lit(struct text *t, const char *s)
{
	text_add(t, s, strlen(s));
}

static void
text_int(struct text *t, int64_t v)
{
	char num[24];

	text_add(t, num, (size_t)snprintf(num, sizeof(num), "%" PRId64, v));
}

/* The two-character escape json_dumps uses for c, or 0 for \u00XX. */
static char
short_escape(unsigned char c)
{
	switch (c) {
	case '"':
		return '"';
	case '\\':
		return '\\';
	case '\b':
		return 'b';
	case '\f':
		return 'f';
	case '\n':
		return 'n';
	case '\r':
		return 'r';
	case '\t':
		return 't';
	}
	return 0;
}

/* A JSON string of valid UTF-8, escaped exactly as json_dumps does. */
static void
text_str(struct text *t, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t run = 0;

	text_add(t, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6] = {'\\', short_escape(c), '0', '0', hex[c >> 4], hex[c & 15]};

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		text_add(t, s + run, i - run);
		run = i + 1;
		if (esc[1] != 0) {
			text_add(t, esc, 2);
		} else {
			esc[1] = 'u';
			text_add(t, esc, 6);
		}
	}
	text_add(t, s + run, n - run);
	text_add(t, "\"", 1);
}

static int
valid_utf8(const char *s, size_t n)
{
	size_t k;

	for (size_t i = 0; i < n; i += k)
		if ((k = utf8_seq((const unsigned char *)s + i, n - i)) == 0)
			return 0;
	return 1;
}

/*
 * Finish a record and write it: the common members, members[0..mlen)
 * (serialised members without braces, possibly empty), prev, then the
 * HMAC over all of that.
 */
static int
append_members(struct audit *a, const char *type, const char *session, const char *members,
               size_t mlen)
{
	struct text t = {0};
	char *line = NULL, when[32], mac_hex[AUDIT_HASH_HEX + 1];
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	size_t tlen, llen, off;
	crypto_auth_hmacsha256_state *st;
	int r = VERR_INVALID, macok;

	if (a->fd < 0) {
		errno = EBADF;
		return VERR_SYSTEM;
	}
	if (!valid_utf8(session, strlen(session)))
		return VERR_INVALID;
	format_ms(now_ms(a), when);
	text_lit(&t, "{\"v\":");
	text_int(&t, AUDIT_VERSION);
	text_lit(&t, ",\"seq\":");
	text_int(&t, (int64_t)(a->seq + 1));
	text_lit(&t, ",\"time\":");
	text_str(&t, when, strlen(when));
	text_lit(&t, ",\"type\":");
	text_str(&t, type, strlen(type));
	text_lit(&t, ",\"session\":");
	text_str(&t, session, strlen(session));
	if (mlen > 0) {
		text_add(&t, ",", 1);
		text_add(&t, members, mlen);
	}
	text_lit(&t, ",\"prev\":");
	text_str(&t, a->prev, strlen(a->prev));
	text_add(&t, "}", 1);
	if (t.oom) {
		r = VERR_NOMEM;
		goto out;
	}
	tlen = t.len;
	if (tlen - 1 + HMAC_SUFFIX_LEN > AUDIT_LINE_MAX) {
		r = VERR_TOO_LARGE;
		goto out;
	}
	/* The HMAC input is the record as serialised, ending in "prev":"..."} . */
	st = (crypto_auth_hmacsha256_state *)(void *)a->work->data;
	memcpy(st, a->keyed->data, sizeof(*st));
	macok = crypto_auth_hmacsha256_update(st, (const unsigned char *)t.p, tlen) == 0 &&
	        crypto_auth_hmacsha256_final(st, mac) == 0;
	secbuf_clear(a->work);
	if (!macok) {
		r = VERR_CRYPTO;
		goto out;
	}
	sodium_bin2hex(mac_hex, sizeof(mac_hex), mac, sizeof(mac));

	llen = tlen - 1 + HMAC_SUFFIX_LEN; /* without the newline */
	if (a->max != 0 && a->size > 0 && a->size + llen + 1 > a->max && (r = rotate(a)) != 0) {
		a->failing = errno != 0 ? errno : EIO;
		goto out;
	}
	if ((line = malloc(llen + 2)) == NULL) {
		r = VERR_NOMEM;
		goto out;
	}
	off = 0;
	if (a->need_nl)
		line[off++] = '\n';
	memcpy(line + off, t.p, tlen - 1);
	memcpy(line + off + tlen - 1, HMAC_PREFIX, HMAC_PREFIX_LEN);
	memcpy(line + off + tlen - 1 + HMAC_PREFIX_LEN, mac_hex, AUDIT_HASH_HEX);
	memcpy(line + off + llen - 2, "\"}\n", 3);
	if ((r = write_line(a, line, off + llen + 1)) != 0) {
		a->failing = errno != 0 ? errno : EIO;
		goto out;
	}
	a->failing = 0;
	a->size += off + llen + 1;
	a->need_nl = 0;
	a->seq++;
	hash_hex(line + off, llen, a->prev);
	/* The record is in the file either way; the chain has moved on. */
	if (a->sync && fdatasync(a->fd) != 0) {
		a->failing = errno;
		r = VERR_SYSTEM;
	}
out:
	free(line);
	free(t.p);
	return r;
}

int
audit_append(struct audit *a, const char *type, const char *session, json_t *fields)
{
	json_t *v;
	const char *k;
	char *text = NULL;
	size_t tlen;
	int r;

	if (a == NULL || !valid_type(type) || session == NULL || *session == '\0' ||
	    (fields != NULL && !json_is_object(fields)))
		return VERR_INVALID;
	if (fields == NULL || json_object_size(fields) == 0)
		return append_members(a, type, session, "", 0);
	json_object_foreach(fields, k, v)
	{
		(void)v;
		if (reserved_name(k))
			return VERR_INVALID;
	}
	if ((text = json_dumps(fields, JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL)
		return VERR_NOMEM;
	tlen = strlen(text);
	r = tlen < 2 || text[0] != '{' || text[tlen - 1] != '}'
	            ? VERR_INVALID
	            : append_members(a, type, session, text + 1, tlen - 2);
	free(text);
	return r;
}

/* ---- typed writers ---- */

static int redact(const char *in, size_t len, char *out, size_t outsize, size_t *outlen);

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t
utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t need, i;
	unsigned char lo = 0x80, hi = 0xBF;

	if (c >= 0x01 && c <= 0x7F)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		need = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		need = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F; /* no surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	if (n < need || p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < need; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
	return need;
}

/*
 * s[0..len) made fit for a record into buf (AUDIT_FIELD_MAX + 3 bytes):
 * invalid UTF-8 bytes as '?', cut at AUDIT_FIELD_MAX with "...". Its length.
 */
static size_t
sanitize(const char *s, size_t len, char *buf)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, o = 0, k;

	while (i < len) {
		k = utf8_seq(p + i, len - i);
		if (o + (k ? k : 1) > AUDIT_FIELD_MAX) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (k == 0) {
			buf[o++] = '?';
			i++;
		} else {
			memcpy(buf + o, p + i, k);
			o += k;
			i += k;
		}
	}
	return o;
}

/* A JSON string of s[0..len) (sanitized), or null for NULL. */
static json_t *
safe_stringn(const char *s, size_t len)
{
	char buf[AUDIT_FIELD_MAX + 3];

	if (s == NULL)
		return json_null();
	return json_stringn(buf, sanitize(s, len, buf));
}

/* The same, written straight into a record's text. */
static void
text_safe(struct text *t, const char *s, size_t len)
{
	char buf[AUDIT_FIELD_MAX + 3];

	if (s == NULL)
		text_lit(t, "null");
	else
		text_str(t, buf, sanitize(s, len, buf));
}

static json_t *
safe_string(const char *s)
{
	return safe_stringn(s, s != NULL ? strlen(s) : 0);
}

static json_t *
safe_array(const char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a != NULL && i < n; i++)
		if (json_array_append_new(a, safe_string(v[i])) != 0) {
			json_decref(a);
			a = NULL;
		}
	return a;
}

static json_t *
uint_json(uint64_t u)
{
	return json_integer(u > INT64_MAX ? INT64_MAX : (json_int_t)u);
}

/* Set in order; remember any failure (no memory) for one check at the end. */
static void
put(json_t *o, const char *k, json_t *v, int *bad)
{
	if (v == NULL || json_object_set_new(o, k, v) != 0)
		*bad = 1;
}

static int
append_built(struct audit *a, const char *type, const char *session, json_t *f, int bad)
{
	int r = bad || f == NULL ? VERR_NOMEM : audit_append(a, type, session, f);

	json_decref(f);
	return r;
}

int
audit_log_session_start(struct audit *a, const char *session, const struct audit_session_start *s)
{
	json_t *f = json_object();
	int bad = 0;

	if (s == NULL || f == NULL) {
		json_decref(f);
		return s == NULL ? VERR_INVALID : VERR_NOMEM;
	}
	put(f, "pid", json_integer((json_int_t)s->pid), &bad);
	put(f, "uid", json_integer((json_int_t)s->uid), &bad);
	put(f, "command", safe_string(s->command), &bad);
	put(f, "cwd", safe_string(s->cwd), &bad);
	put(f, "keys", safe_array(s->keys, s->nkeys), &bad);
	put(f, "profile", safe_string(s->profile), &bad);
	put(f, "allow_hosts", safe_array(s->allow_hosts, s->nallow_hosts), &bad);
	return append_built(a, "session_start", session, f, bad);
}

/*
 * The record of every request, so written straight as text rather than
 * through a jansson tree: the same bytes json_dumps would give (the unit
 * test compares the two), in a fraction of the time.
 */
int
audit_log_request(struct audit *a, const char *session, const struct audit_request *q)
{
	struct text t = {0};
	char *path = NULL;
	size_t n = 0;
	int r;

	if (a == NULL || session == NULL || *session == '\0' || q == NULL)
		return VERR_INVALID;
	if (q->target != NULL) {
		if ((path = malloc(q->target_len + 1)) == NULL)
			return VERR_NOMEM;
		/* Redaction never lengthens, so it always fits here. */
		redact(q->target, q->target_len, path, q->target_len + 1, &n);
	}
	text_lit(&t, "\"key\":");
	text_safe(&t, q->key, q->key != NULL ? strlen(q->key) : 0);
	text_lit(&t, ",\"method\":");
	text_safe(&t, q->method, q->method != NULL ? strlen(q->method) : 0);
	text_lit(&t, ",\"host\":");
	text_safe(&t, q->host, q->host != NULL ? strlen(q->host) : 0);
	text_lit(&t, ",\"port\":");
	text_int(&t, q->port);
	text_lit(&t, ",\"path\":");
	text_safe(&t, path, n);
	text_lit(&t, ",\"status\":");
	if (q->status > 0)
		text_int(&t, q->status);
	else
		text_lit(&t, "null");
	text_lit(&t, ",\"bytes_up\":");
	text_int(&t, q->bytes_up > INT64_MAX ? INT64_MAX : (int64_t)q->bytes_up);
	text_lit(&t, ",\"bytes_down\":");
	text_int(&t, q->bytes_down > INT64_MAX ? INT64_MAX : (int64_t)q->bytes_down);
	text_lit(&t, ",\"duration_ms\":");
	text_int(&t, q->duration_ms > INT64_MAX ? INT64_MAX : (int64_t)q->duration_ms);
	text_lit(&t, q->denied ? ",\"decision\":\"denied\"" : ",\"decision\":\"allowed\"");
	text_lit(&t, ",\"reason\":");
	text_safe(&t, q->reason, q->reason != NULL ? strlen(q->reason) : 0);
	text_lit(&t, q->injected ? ",\"injected\":true" : ",\"injected\":false");
	text_lit(&t, ",\"scrubbed\":");
	text_int(&t, q->scrubbed);
	free(path);
	r = t.oom ? VERR_NOMEM : append_members(a, "request", session, t.p, t.len);
	free(t.p);
	return r;
}

/* The same record through jansson, for the test that the two agree. */
int
audit_test_log_request_json(struct audit *a, const char *session, const struct audit_request *q)
{
	json_t *f = json_object();
	char *path = NULL;
	int bad = 0;

	if (q == NULL || f == NULL) {
		json_decref(f);
		return q == NULL ? VERR_INVALID : VERR_NOMEM;
	}
	put(f, "key", safe_string(q->key), &bad);
	put(f, "method", safe_string(q->method), &bad);
	put(f, "host", safe_string(q->host), &bad);
	put(f, "port", json_integer(q->port), &bad);
	if (q->target == NULL)
		put(f, "path", json_null(), &bad);
	else if ((path = malloc(q->target_len + 1)) == NULL)
		bad = 1;
	else {
		size_t n;

		redact(q->target, q->target_len, path, q->target_len + 1, &n);
		put(f, "path", safe_stringn(path, n), &bad);
	}
	free(path);
	put(f, "status", q->status > 0 ? json_integer(q->status) : json_null(), &bad);
	put(f, "bytes_up", uint_json(q->bytes_up), &bad);
	put(f, "bytes_down", uint_json(q->bytes_down), &bad);
	put(f, "duration_ms", uint_json(q->duration_ms), &bad);
	put(f, "decision", json_string(q->denied ? "denied" : "allowed"), &bad);
	put(f, "reason", safe_string(q->reason), &bad);
	put(f, "injected", json_boolean(q->injected), &bad);
	put(f, "scrubbed", json_integer(q->scrubbed), &bad);
	return append_built(a, "request", session, f, bad);
}

int
audit_log_session_end(struct audit *a, const char *session, const struct audit_session_end *e)
{
	json_t *f = json_object();
	int bad = 0;

	if (e == NULL || f == NULL) {
		json_decref(f);
		return e == NULL ? VERR_INVALID : VERR_NOMEM;
	}
	put(f, "exit", e->exited ? json_integer(e->exit_status) : json_null(), &bad);
	put(f, "requests", uint_json(e->requests), &bad);
	put(f, "denied", uint_json(e->denied), &bad);
	put(f, "bytes_up", uint_json(e->bytes_up), &bad);
	put(f, "bytes_down", uint_json(e->bytes_down), &bad);
	put(f, "duration_ms", uint_json(e->duration_ms), &bad);
	return append_built(a, "session_end", session, f, bad);
}

/* audit_redact_path, also telling the length (the target may hold NULs). */
static int
redact(const char *in, size_t len, char *out, size_t outsize, size_t *outlen)
{
	size_t o = 0, item = 0;
	int query = 0, value = 0, cut = 0;

	*outlen = 0;
	if (out == NULL || outsize == 0 || (in == NULL && len > 0))
		return VERR_INVALID;
	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (query && value && c != '&')
			continue; /* a value byte: dropped */
		if (query && c == '&') {
			if (!value)
				o = item; /* a bare item may be a token itself */
			value = 0;
		} else if (query && c == '=')
			value = 1;
		if (o + 1 < outsize)
			out[o++] = c;
		else
			cut = 1;
		if (!query && c == '?')
			query = 1;
		if (query && (c == '?' || c == '&'))
			item = o;
	}
	if (query && !value)
		o = item;
	out[o] = '\0';
	*outlen = o;
	return cut ? VERR_TOO_LARGE : VERR_OK;
}

int
audit_redact_path(const char *in, size_t len, char *out, size_t outsize)
{
	size_t n;

	return redact(in, len, out, outsize, &n);
}

/* ---- reading ---- */

struct audit_reader {
	char *path;
	int follow;
	int rot[AUDIT_KEEP]; /* rotated files still to read, oldest first */
	unsigned rotnum[AUDIT_KEEP];
	char rotname[AUDIT_KEEP][32];
	unsigned nrot, cur;
	unsigned oldest; /* number of the oldest rotated file at open, 0: none */
	int live;        /* fd of path, or -1 */
	int done;        /* fd of the file read last, to find it after a rotation */
	char livename[32];
	unsigned files;
	char *buf;
	size_t start, end;
	uint64_t lineno;
	int skipping;  /* inside an overlong line already reported */
	int rot_seen;  /* path was replaced: read the old file to its end once more */
	int eof_tries; /* waits for the rest of a line being written */
};

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void
reader_close_set(struct audit_reader *r)
{
	for (unsigned i = 0; i < r->nrot; i++)
		close_fd(&r->rot[i]);
	close_fd(&r->live);
	r->nrot = r->cur = 0;
}

static int
same_file(const char *name, int fd)
{
	struct stat a, b;

	return lstat(name, &a) == 0 && fstat(fd, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static void
set_name(char dst[32], const char *path)
{
	const char *b = strrchr(path, '/');

	snprintf(dst, 32, "%s", b != NULL ? b + 1 : path);
}

/*
 * Open path.(below-1) .. path.1 (those there) and path. 1 when a rotation
 * moved files meanwhile (close and try again), 0, or VERR_*.
 */
static int
open_set(struct audit_reader *r, unsigned below)
{
	char *name;
	int fd, rc, moved = 0;

	for (unsigned i = below - 1; i >= 1; i--) {
		if ((name = numbered(r->path, i)) == NULL)
			return VERR_NOMEM;
		rc = open_private_ro(name, &fd);
		if (rc == 0) {
			set_name(r->rotname[r->nrot], name);
			r->rotnum[r->nrot] = i;
			r->rot[r->nrot++] = fd;
		}
		free(name);
		if (rc != 0 && !(rc == VERR_SYSTEM && errno == ENOENT))
			return rc;
	}
	rc = open_private_ro(r->path, &r->live);
	if (rc != 0 && !(rc == VERR_SYSTEM && errno == ENOENT))
		return rc;
	/* Consistent only if every file is still under the name it was opened by. */
	for (unsigned i = 0; i < r->nrot && !moved; i++) {
		if ((name = numbered(r->path, r->rotnum[i])) == NULL)
			return VERR_NOMEM;
		moved = !same_file(name, r->rot[i]);
		free(name);
	}
	if (!moved && r->live >= 0)
		moved = !same_file(r->path, r->live);
	return moved;
}

/* Open the files newer than r->done (all, when it is gone or unknown). */
static int
open_newer(struct audit_reader *r)
{
	unsigned below;
	char *name;
	int rc = 1;

	for (int tries = 0; rc == 1 && tries < 5; tries++) {
		reader_close_set(r);
		below = AUDIT_KEEP + 1;
		for (unsigned i = 1; r->done >= 0 && i <= AUDIT_KEEP; i++) {
			if ((name = numbered(r->path, i)) == NULL)
				return VERR_NOMEM;
			if (same_file(name, r->done))
				below = i;
			free(name);
			if (below == i)
				break;
		}
		rc = open_set(r, below);
	}
	if (rc < 0) {
		reader_close_set(r);
		return rc;
	}
	r->files += r->nrot + (r->live >= 0);
	return VERR_OK;
}

int
audit_reader_open(const char *path, int follow, struct audit_reader **out)
{
	struct audit_reader *r;
	char *copy = NULL;
	int rc = VERR_NOMEM;

	*out = NULL;
	if (path == NULL || *path == '\0')
		return VERR_INVALID;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return VERR_NOMEM;
	r->live = r->done = -1;
	r->follow = follow;
	if ((r->path = strdup(path)) == NULL || (copy = strdup(path)) == NULL ||
	    (r->buf = malloc(AUDIT_LINE_MAX + READ_CHUNK + 1)) == NULL)
		goto out;
	set_name(r->livename, path);
	rc = safefile_dir(dirname(copy), 0);
	if (rc == VERR_SYSTEM && errno == ENOENT)
		rc = VERR_OK; /* no VAULT_HOME yet: an empty log */
	else if (rc == 0 && (rc = open_newer(r)) == 0 && r->nrot > 0)
		r->oldest = r->rotnum[0];
	if (rc != 0)
		goto out;
	*out = r;
	r = NULL;
out:
	free(copy);
	audit_reader_close(r);
	return rc;
}

unsigned
audit_reader_files(const struct audit_reader *r)
{
	return r->files;
}

void
audit_reader_close(struct audit_reader *r)
{
	if (r == NULL)
		return;
	reader_close_set(r);
	close_fd(&r->done);
	free(r->buf);
	free(r->path);
	free(r);
}

static void
emit(struct audit_reader *r, struct audit_line *ln, const char *name, size_t s, size_t len,
     int flags)
{
	r->buf[s + len] = '\0';
	ln->file = name;
	ln->lineno = ++r->lineno;
	ln->data = r->buf + s;
	ln->len = len;
	ln->flags = flags;
}

/* Has path been replaced (a rotation)? A missing path is "not yet". */
static int
live_replaced(struct audit_reader *r)
{
	struct stat a, b;

	if (lstat(r->path, &a) != 0 || fstat(r->live, &b) != 0)
		return 0;
	return a.st_dev != b.st_dev || a.st_ino != b.st_ino;
}

/* The current file is finished: remember it, go on with the next. */
static void
finish_file(struct audit_reader *r, int live)
{
	close_fd(&r->done);
	if (live) {
		r->done = r->live;
		r->live = -1;
	} else {
		r->done = r->rot[r->cur];
		r->rot[r->cur++] = -1;
	}
}

int
audit_reader_next(struct audit_reader *r, struct audit_line *ln)
{
	memset(ln, 0, sizeof(*ln));
	for (;;) {
		int fd, live, rc;
		const char *name;
		char *nl;
		ssize_t n;

		if (r->cur < r->nrot) {
			fd = r->rot[r->cur];
			name = r->rotname[r->cur];
			live = 0;
		} else {
			if (r->live < 0) {
				struct stat st;

				/* Follow: wait for path (again), then read whatever is newer. */
				if (!r->follow || lstat(r->path, &st) != 0)
					return 0;
				if ((rc = open_newer(r)) != 0)
					return rc;
				r->lineno = 0;
				continue;
			}
			fd = r->live;
			name = r->livename;
			live = 1;
		}
		nl = memchr(r->buf + r->start, '\n', r->end - r->start);
		if (nl != NULL) {
			size_t s = r->start, len = (size_t)(nl - (r->buf + s));

			r->start = s + len + 1;
			if (r->skipping) {
				r->skipping = 0;
				continue;
			}
			emit(r, ln, name, s, len, 0);
			return 1;
		}
		if (!r->skipping && r->end - r->start > AUDIT_LINE_MAX) {
			emit(r, ln, name, r->start, AUDIT_LINE_MAX, AUDIT_LINE_OVERLONG);
			r->skipping = 1;
			r->start = r->end;
			return 1;
		}
		if (r->skipping)
			r->start = r->end;
		if (r->start > 0) {
			memmove(r->buf, r->buf + r->start, r->end - r->start);
			r->end -= r->start;
			r->start = 0;
		}
		n = read(fd, r->buf + r->end, AUDIT_LINE_MAX + READ_CHUNK - r->end);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return VERR_SYSTEM;
		if (n > 0) {
			r->end += (size_t)n;
			r->eof_tries = 0;
			continue;
		}
		/* End of this file. */
		if (live && r->follow) {
			if (!live_replaced(r)) {
				r->rot_seen = 0;
				return 0; /* a partial line waits for its end */
			}
			if (!r->rot_seen) {
				r->rot_seen = 1; /* drain what was written before the rename */
				continue;
			}
			r->rot_seen = 0;
		} else if (live && r->end > r->start && !r->skipping && r->eof_tries < 5) {
			/* A writer may be in the middle of this very line: give it a moment. */
			struct timespec ts = {0, 10 * 1000 * 1000};

			r->eof_tries++;
			nanosleep(&ts, NULL);
			continue;
		}
		if (!live || r->follow)
			finish_file(r, live);
		if (r->end > r->start && !r->skipping) {
			size_t s = r->start, len = r->end - r->start;

			r->start = r->end = 0;
			emit(r, ln, name, s, len, AUDIT_LINE_UNTERMINATED);
			if (!live || r->follow)
				r->lineno = 0;
			return 1;
		}
		r->start = r->end = 0;
		r->skipping = 0;
		if (live && !r->follow)
			return 0;
		r->lineno = 0;
	}
}

/* ---- verification ---- */

const char *
audit_bad_str(int bad)
{
	switch (bad) {
	case AUDIT_OK:
		return "intact";
	case AUDIT_BAD_UNTERMINATED:
		return "truncated line (no newline at the end: cut, or a write interrupted by a "
		       "crash)";
	case AUDIT_BAD_TOO_LONG:
		return "line too long to be a record";
	case AUDIT_BAD_FORMAT:
		return "malformed record (not JSON, or members missing or out of place)";
	case AUDIT_BAD_NO_HMAC:
		return "no hmac (member removed)";
	case AUDIT_BAD_HMAC:
		return "hmac mismatch (record edited or forged)";
	case AUDIT_BAD_SEQ_GAP:
		return "seq gap (records deleted or reordered)";
	case AUDIT_BAD_SEQ_BACK:
		return "seq repeated or going back (record inserted, copied or reordered)";
	case AUDIT_BAD_PREV:
		return "prev mismatch (the record before it was edited, deleted, replaced or "
		       "reordered)";
	case AUDIT_BAD_START:
		return "the log starts after seq 1 although no rotation removed older files "
		       "(records deleted from the start, or a rotated file removed)";
	}
	return "unknown problem";
}

/*
 * Check one line on its own: shape, HMAC, members. On success *seq and
 * prev (the line's own prev member) are set.
 */
static int
check_line(const char *p, size_t len, const struct secbuf *key, uint64_t *seq,
           char prev[AUDIT_HASH_HEX + 1], char *detail, size_t dsize)
{
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	const char *suf, *pm;
	char *m = NULL;
	size_t mlen;
	json_t *j = NULL, *x;
	int bad = AUDIT_BAD_FORMAT;
	const char *type;

	suf = len >= HMAC_SUFFIX_LEN ? p + len - HMAC_SUFFIX_LEN : NULL;
	if (suf == NULL || memcmp(suf, HMAC_PREFIX, HMAC_PREFIX_LEN) != 0 ||
	    !is_lower_hex(suf + HMAC_PREFIX_LEN, AUDIT_HASH_HEX) ||
	    memcmp(suf + HMAC_PREFIX_LEN + AUDIT_HASH_HEX, "\"}", 2) != 0) {
		j = json_loadb(p, len, JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(j) && json_object_get(j, "hmac") == NULL)
			bad = AUDIT_BAD_NO_HMAC;
		else
			snprintf(detail, dsize, "%s",
			         j == NULL ? "not JSON" : "no hmac member at the end of the line");
		goto out;
	}
	mlen = len - HMAC_SUFFIX_LEN + 1;
	if ((m = malloc(mlen)) == NULL) {
		bad = -1;
		goto out;
	}
	memcpy(m, p, mlen - 1);
	m[mlen - 1] = '}';
	sodium_hex2bin(mac, sizeof(mac), suf + HMAC_PREFIX_LEN, AUDIT_HASH_HEX, NULL, NULL, NULL);
	if (crypto_auth_hmacsha256_verify(mac, (const unsigned char *)m, mlen, key->data) != 0) {
		bad = AUDIT_BAD_HMAC;
		goto out;
	}
	/* Authentic; still hold it to the format, in case of a future version. */
	pm = mlen >= PREV_MEMBER_LEN + 2 ? m + mlen - 1 - PREV_MEMBER_LEN : NULL;
	j = json_loadb(p, len, JSON_REJECT_DUPLICATES, NULL);
	type = json_string_value(json_object_get(j, "type"));
	x = json_object_get(j, "seq");
	if (!json_is_object(j)) {
		snprintf(detail, dsize, "not a JSON object (or one with duplicate members)");
		goto out;
	}
	if (pm == NULL || pm[-1] != ',' || memcmp(pm, PREV_PREFIX, PREV_PREFIX_LEN) != 0 ||
	    !is_lower_hex(pm + PREV_PREFIX_LEN, AUDIT_HASH_HEX) ||
	    pm[PREV_PREFIX_LEN + AUDIT_HASH_HEX] != '"') {
		snprintf(detail, dsize, "prev member not where it belongs");
		goto out;
	}
	if (json_integer_value(json_object_get(j, "v")) != AUDIT_VERSION ||
	    !json_is_integer(json_object_get(j, "v"))) {
		snprintf(detail, dsize, "unknown version");
		goto out;
	}
	if (!json_is_integer(x) || json_integer_value(x) < 1 || !valid_type(type) ||
	    !json_is_string(json_object_get(j, "time")) ||
	    !json_is_string(json_object_get(j, "session"))) {
		snprintf(detail, dsize, "seq, time, type or session missing or invalid");
		goto out;
	}
	*seq = (uint64_t)json_integer_value(x);
	memcpy(prev, pm + PREV_PREFIX_LEN, AUDIT_HASH_HEX);
	prev[AUDIT_HASH_HEX] = '\0';
	bad = AUDIT_OK;
out:
	json_decref(j);
	free(m);
	return bad;
}

int
audit_verify(const char *path, const struct secbuf *key, struct audit_verify_result *res)
{
	struct audit_reader *r = NULL;
	struct audit_line ln;
	char last_hash[AUDIT_HASH_HEX + 1], prev[AUDIT_HASH_HEX + 1];
	uint64_t seq = 0;
	int rc, bad = AUDIT_OK;

	memset(res, 0, sizeof(*res));
	if (key == NULL || key->len != crypto_auth_hmacsha256_KEYBYTES)
		return VERR_INVALID;
	if ((rc = audit_reader_open(path, 0, &r)) != 0)
		return rc;
	while (bad == AUDIT_OK && (rc = audit_reader_next(r, &ln)) == 1) {
		if (ln.flags & AUDIT_LINE_OVERLONG)
			bad = AUDIT_BAD_TOO_LONG;
		else if (ln.flags & AUDIT_LINE_UNTERMINATED)
			bad = AUDIT_BAD_UNTERMINATED;
		else
			bad = check_line(ln.data, ln.len, key, &seq, prev, res->detail,
			                 sizeof(res->detail));
		if (bad < 0) {
			rc = VERR_NOMEM;
			break;
		}
		if (bad != AUDIT_OK)
			break;
		if (res->records == 0) {
			res->first_seq = seq;
			if (seq == 1 && strcmp(prev, zero_hash) != 0) {
				bad = AUDIT_BAD_PREV;
				snprintf(res->detail, sizeof(res->detail),
				         "seq 1 must have an all-zero prev");
			} else if (seq != 1 && r->oldest == AUDIT_KEEP && r->nrot > 0 &&
			           strcmp(ln.file, r->rotname[0]) == 0)
				/*
				 * Rotation may have deleted what came before. Rotation never
				 * leaves an empty file, so the record must be in the oldest
				 * file itself: a planted empty audit.log.9 excuses nothing.
				 */
				res->start_unchecked = 1;
			else if (seq != 1) {
				bad = AUDIT_BAD_START;
				snprintf(res->detail, sizeof(res->detail),
				         "first record is seq %llu", (unsigned long long)seq);
			}
		} else if (seq != res->last_seq + 1) {
			bad = seq > res->last_seq ? AUDIT_BAD_SEQ_GAP : AUDIT_BAD_SEQ_BACK;
			snprintf(res->detail, sizeof(res->detail),
			         "seq %llu where %llu was expected%s", (unsigned long long)seq,
			         (unsigned long long)res->last_seq + 1,
			         ln.lineno == 1 ? ", at the start of a file" : "");
		} else if (strcmp(prev, last_hash) != 0) {
			bad = AUDIT_BAD_PREV;
		}
		if (bad != AUDIT_OK)
			break;
		hash_hex(ln.data, ln.len, last_hash);
		res->last_seq = seq;
		res->records++;
	}
	res->files = r->files;
	if (bad > 0) {
		res->bad = bad;
		snprintf(res->file, sizeof(res->file), "%s", ln.file);
		res->line = ln.lineno;
		rc = VERR_AUDIT_TAMPERED;
	} else if (rc > 0)
		rc = VERR_OK;
	audit_reader_close(r);
	return rc;
}

/* ---- time ---- */

static int
digits(const char **s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*s)++) {
		if (**s < '0' || **s > '9')
			return -1;
		*v = *v * 10 + (**s - '0');
	}
	return 0;
}

int
audit_parse_time(const char *s, int64_t *ms)
{
	struct tm tm = {0};
	int y, mo, d, h, mi, sec, frac = 0, oh = 0, om = 0, sign = 0, mdays;
	time_t t;
	static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	*ms = 0;
	if (s == NULL || digits(&s, 4, &y) || *s++ != '-' || digits(&s, 2, &mo) || *s++ != '-' ||
	    digits(&s, 2, &d) || (*s != 'T' && *s != 't' && *s != ' ') || !*s++ ||
	    digits(&s, 2, &h) || *s++ != ':' || digits(&s, 2, &mi) || *s++ != ':' ||
	    digits(&s, 2, &sec))
		return VERR_INVALID;
	if (*s == '.') {
		int n = 0;

		s++;
		while (*s >= '0' && *s <= '9') {
			if (n < 3)
				frac = frac * 10 + (*s - '0');
			n++;
			s++;
		}
		if (n == 0)
			return VERR_INVALID;
		for (; n < 3; n++)
			frac *= 10;
	}
	if (*s == 'Z' || *s == 'z')
		s++;
	else if (*s == '+' || *s == '-') {
		sign = *s++ == '-' ? -1 : 1;
		if (digits(&s, 2, &oh) || *s++ != ':' || digits(&s, 2, &om) || oh > 23 || om > 59)
			return VERR_INVALID;
	} else
		return VERR_INVALID;
	if (*s != '\0' || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 60)
		return VERR_INVALID;
	mdays = days[mo - 1];
	if (mo == 2 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
		mdays = 28;
	if (d > mdays)
		return VERR_INVALID;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec == 60 ? 59 : sec;
	if ((t = timegm(&tm)) == (time_t)-1 && y != 1969)
		return VERR_INVALID;
	*ms = ((int64_t)t - sign * (oh * 3600 + om * 60)) * 1000 + frac;
	return VERR_OK;
}
