/*
 * sbpl: Seatbelt profile text from a vrun profile. Rules are written so
 * that the last matching rule decides (Seatbelt's order): a broad
 * "(allow default)" first, then everything vrun takes away.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "sbpl.h"
#include "verr.h"

struct sb {
	char *buf;
	size_t len, cap;
	int err;
};

struct list {
	char **v;
	size_t n, cap;
};

/* macOS spells these through /private; Seatbelt sees only the resolved path. */
static const char *const private_links[] = {"/var", "/tmp", "/etc"};

static void
sb_add(struct sb *b, const char *s, size_t n)
{
	if (b->err != 0)
		return;
	if (n + 1 > b->cap - b->len) {
		size_t cap = b->cap == 0 ? 4096 : b->cap;
		char *nb;

		while (n + 1 > cap - b->len)
			cap *= 2;
		if ((nb = realloc(b->buf, cap)) == NULL) {
			b->err = VERR_NOMEM;
			return;
		}
		b->buf = nb;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, s, n);
	b->len += n;
	b->buf[b->len] = '\0';
}

static void
sb_puts(struct sb *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

/* A filter form such as (subpath "...") with the path quoted. */
static void
sb_filter(struct sb *b, const char *pre, const char *path, const char *post)
{
	size_t size = 2 * strlen(path) + 3;
	char *q;
	int r;

	if (b->err != 0)
		return;
	if ((q = malloc(size)) == NULL) {
		b->err = VERR_NOMEM;
		return;
	}
	if ((r = sbpl_quote(path, q, size)) != 0) {
		b->err = r;
	} else {
		sb_puts(b, pre);
		sb_puts(b, q);
		sb_puts(b, post);
	}
	free(q);
}

int
sbpl_quote(const char *s, char *buf, size_t size)
{
	size_t n = strlen(s), o = 0;

	if (size > 0)
		buf[0] = '\0';
	/*
	 * Control bytes are refused, not escaped: SBPL's reader has escapes for
	 * a few of them only, and no real path we hide contains one.
	 */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return VERR_SBPL_STRING;
	if (!profile_utf8_valid(s, n))
		return VERR_SBPL_STRING;
	if (size == 0)
		return VERR_TOO_LARGE;
	buf[o++] = '"';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\') {
			if (o + 1 >= size)
				return VERR_TOO_LARGE;
			buf[o++] = '\\';
		}
		if (o + 1 >= size)
			return VERR_TOO_LARGE;
		buf[o++] = s[i];
	}
	if (o + 2 > size)
		return VERR_TOO_LARGE;
	buf[o++] = '"';
	buf[o] = '\0';
	return 0;
}

/*
 * Lexically tidy an absolute path (repeated and trailing slashes). "." and
 * ".." are refused: resolving them without the target's file system could
 * name a different file than the one meant.
 */
static int
clean_path(const char *in, char **out)
{
	size_t n = strlen(in), o = 0;
	char *buf;

	*out = NULL;
	if (n == 0 || in[0] != '/')
		return VERR_SBPL_STRING;
	if ((buf = malloc(n + 1)) == NULL)
		return VERR_NOMEM;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && in[j] != '/')
			j++;
		if ((j - i == 1 && in[i] == '.') ||
		    (j - i == 2 && in[i] == '.' && in[i + 1] == '.')) {
			free(buf);
			return VERR_SBPL_STRING;
		}
		if (j > i) {
			buf[o++] = '/';
			memcpy(buf + o, in + i, j - i);
			o += j - i;
		}
		i = j + 1;
	}
	/* Denying "/" would deny the whole file system: certainly a caller bug. */
	if (o == 0) {
		free(buf);
		return VERR_SBPL_STRING;
	}
	buf[o] = '\0';
	*out = buf;
	return 0;
}

/* Append s (taking ownership) unless already present. */
static int
list_add(struct list *l, char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0) {
			free(s);
			return 0;
		}
	if (l->n == l->cap) {
		size_t cap = l->cap == 0 ? 16 : l->cap * 2;
		char **nv = realloc(l->v, cap * sizeof(*nv));

		if (nv == NULL) {
			free(s);
			return VERR_NOMEM;
		}
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = s;
	return 0;
}

static void
list_free(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* The path itself and, for /var, /tmp and /etc, its /private spelling. */
static int
add_path(struct list *l, const char *path)
{
	char *clean, *alias;
	int r;

	if ((r = clean_path(path, &clean)) != 0)
		return r;
	for (size_t i = 0; i < sizeof(private_links) / sizeof(private_links[0]); i++) {
		size_t pl = strlen(private_links[i]);

		if (strncmp(clean, private_links[i], pl) != 0 ||
		    (clean[pl] != '\0' && clean[pl] != '/'))
			continue;
		if ((alias = malloc(strlen(clean) + sizeof("/private"))) == NULL) {
			free(clean);
			return VERR_NOMEM;
		}
		memcpy(alias, "/private", sizeof("/private") - 1);
		memcpy(alias + sizeof("/private") - 1, clean, strlen(clean) + 1);
		if ((r = list_add(l, clean)) != 0) {
			free(alias);
			return r;
		}
		return list_add(l, alias);
	}
	return list_add(l, clean);
}

int
sbpl_generate(const struct profile *p, int proxy_port, const char *const *deny_paths_extra,
              char **out, size_t *len)
{
	return sbpl_generate_session(p, proxy_port, deny_paths_extra, NULL, out, len);
}

int
sbpl_generate_session(const struct profile *p, int proxy_port, const char *const *deny_paths_extra,
                      const char *const *allow_read, char **out, size_t *len)
{
	struct sb b = {NULL, 0, 0, 0};
	struct list paths = {NULL, 0, 0}, parents = {NULL, 0, 0}, readable = {NULL, 0, 0};
	char line[256], name[2 * PROFILE_NAME_MAX + 3];
	int r = 0;

	if (out != NULL)
		*out = NULL;
	if (len != NULL)
		*len = 0;
	if (p == NULL || out == NULL || len == NULL || proxy_port < 1 || proxy_port > 65535 ||
	    p->network != PROFILE_NET_PROXY_ONLY)
		return VERR_INVALID;
	for (size_t i = 0; i < p->nhide && r == 0; i++)
		r = add_path(&paths, p->hide[i]);
	for (size_t i = 0; deny_paths_extra != NULL && deny_paths_extra[i] != NULL && r == 0; i++)
		r = add_path(&paths, deny_paths_extra[i]);
	for (size_t i = 0; allow_read != NULL && allow_read[i] != NULL && r == 0; i++)
		r = add_path(&readable, allow_read[i]);
	/*
	 * Seatbelt rules name paths, not files: renaming a parent of a hidden
	 * path would carry it out from under its rule. Rename and unlink of the
	 * parents are denied; creating files next to them stays allowed.
	 */
	for (size_t i = 0; i < paths.n && r == 0; i++) {
		const char *s = paths.v[i];

		for (const char *q = strchr(s + 1, '/'); q != NULL && r == 0;
		     q = strchr(q + 1, '/')) {
			char *parent = strndup(s, (size_t)(q - s));

			r = parent == NULL ? VERR_NOMEM : list_add(&parents, parent);
		}
	}
	if (r != 0)
		goto out;
	if (sbpl_quote(p->name, name, sizeof(name)) != 0)
		snprintf(name, sizeof(name), "\"?\"");

	sb_puts(&b, "(version 1)\n");
	sb_puts(&b, ";; Generated by vrun from profile ");
	sb_puts(&b, name);
	sb_puts(&b, ". Later rules override earlier ones.\n");
	sb_puts(&b, "(allow default)\n\n");

	sb_puts(&b, ";; Network: only the session's proxy listener on loopback. vrun also\n"
	            ";; holds [::1] on the same port, so localhost names nothing else.\n");
	sb_puts(&b, "(deny network*)\n");
	snprintf(line, sizeof(line), "(allow network-outbound (remote ip \"localhost:%d\"))\n",
	         proxy_port);
	sb_puts(&b, line);
	/* Background URL sessions are fetched by nsurlsessiond, outside this sandbox. */
	sb_puts(&b, "(deny mach-lookup (global-name \"com.apple.nsurlsessiond\"))\n\n");

	sb_puts(&b, ";; No signals to processes outside the sandbox (vproxy, vrun).\n");
	sb_puts(&b, "(deny signal)\n");
	sb_puts(&b, "(allow signal (target same-sandbox))\n");

	/* An empty (deny ...) would match everything: emit the blocks only with paths. */
	if (paths.n > 0) {
		sb_puts(&b, "\n;; Hidden paths: credentials, daemon sockets, vrun's own state.\n");
		sb_puts(&b, "(deny file-read* file-write*");
		for (size_t i = 0; i < paths.n; i++)
			sb_filter(&b, "\n    (subpath ", paths.v[i], ")");
		sb_puts(&b, ")\n");

		sb_puts(&b,
		        ";; Connecting to a unix socket is network-outbound, not a file access.\n");
		sb_puts(&b, "(deny network-outbound");
		for (size_t i = 0; i < paths.n; i++) {
			sb_filter(&b, "\n    (remote unix-socket (path-literal ", paths.v[i], "))");
			sb_filter(&b, "\n    (remote unix-socket (subpath ", paths.v[i], "))");
		}
		sb_puts(&b, ")\n");
	}
	if (parents.n > 0) {
		sb_puts(&b, ";; Parents stay in place, so hidden paths cannot be renamed away.\n");
		sb_puts(&b, "(deny file-write-unlink");
		for (size_t i = 0; i < parents.n; i++)
			sb_filter(&b, "\n    (literal ", parents.v[i], ")");
		sb_puts(&b, ")\n");
	}
	if (readable.n > 0) {
		/* Last, so that it wins over the runtime directory's deny; reading only. */
		sb_puts(&b, ";; The session's CA bundle, inside the hidden runtime directory.\n");
		sb_puts(&b, "(allow file-read*");
		for (size_t i = 0; i < readable.n; i++)
			sb_filter(&b, "\n    (literal ", readable.v[i], ")");
		sb_puts(&b, ")\n");
	}
	if ((r = b.err) != 0)
		goto out;
	*out = b.buf;
	*len = b.len;
	b.buf = NULL;
out:
	free(b.buf);
	list_free(&paths);
	list_free(&parents);
	list_free(&readable);
	return r;
}
