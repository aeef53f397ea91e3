/*
 * profile: strict parser for vrun sandbox profiles. The format is
 * documented in profiles/README.md; every deviation from it is an error
 * with a line number, because a silently skipped "hide" line would leave a
 * credential visible to the sandboxed command.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile.h"
#include "verr.h"

/* All files of one load together: includes cannot multiply the work. */
#define PROFILE_TOTAL_MAX (4 * PROFILE_FILE_MAX)
/* vproxy takes at most SESSION_MAX_ALLOW (64) hosts; leave half to --allow-host. */
#define PROFILE_ALLOW_MAX 32
/* Directive plus at most this many arguments are tokenised; more is an error. */
#define MAX_TOKENS 3

struct file_id {
	dev_t dev;
	ino_t ino;
};

struct ctx {
	struct profile *p;
	char *err;
	size_t errsize;
	size_t ndirectives;
	size_t total;
	int network; /* 0 until a network directive was seen */
	struct file_id stack[PROFILE_INCLUDE_DEPTH + 1];
	size_t depth; /* files on the stack */
};

/* Where the current line comes from, for messages and includes. */
struct src {
	const char *name; /* shown in messages */
	const char *dir;  /* directory for includes; NULL: include refused */
	size_t line;
};

struct token {
	const char *s; /* NUL-terminated, no NUL inside */
	size_t len;
};

static const char *const allowed_vars[] = {
        "HOME",           "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
        "XDG_STATE_HOME", "XDG_CACHE_HOME",  "SSH_AUTH_SOCK",   "GNUPGHOME",
};

static void errf(struct ctx *c, const struct src *s, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
errf(struct ctx *c, const struct src *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (c->err == NULL || c->errsize == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (s != NULL && s->line > 0)
		snprintf(c->err, c->errsize, "%s:%zu: %s", s->name, s->line, msg);
	else if (s != NULL)
		snprintf(c->err, c->errsize, "%s: %s", s->name, msg);
	else
		snprintf(c->err, c->errsize, "%s", msg);
}

/*
 * Copy untrusted bytes into buf for a message: printable ASCII only, so a
 * hostile profile cannot put terminal escapes into vrun's stderr.
 */
static const char *
show(const char *s, size_t n, char *buf, size_t size)
{
	size_t o = 0, limit = size > 4 ? size - 4 : 0;

	for (size_t i = 0; i < n && o < limit; i++)
		buf[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (o == limit && limit < n) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	if (size > 0)
		buf[o < size ? o : size - 1] = '\0';
	return buf;
}

int
profile_utf8_valid(const void *data, size_t n)
{
	const unsigned char *s = data;

	size_t i = 0;

	while (i < n) {
		unsigned char b = s[i];
		size_t k;
		unsigned char lo = 0x80, hi = 0xbf;

		if (b < 0x80) {
			i++;
			continue;
		}
		if (b >= 0xc2 && b <= 0xdf)
			k = 1;
		else if (b >= 0xe0 && b <= 0xef)
			k = 2;
		else if (b >= 0xf0 && b <= 0xf4)
			k = 3;
		else
			return 0;
		if (b == 0xe0)
			lo = 0xa0;
		else if (b == 0xed)
			hi = 0x9f;
		else if (b == 0xf0)
			lo = 0x90;
		else if (b == 0xf4)
			hi = 0x8f;
		if (n - i <= k)
			return 0;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return 0;
		for (size_t j = 2; j <= k; j++)
			if (s[i + j] < 0x80 || s[i + j] > 0xbf)
				return 0;
		i += k + 1;
	}
	return 1;
}

/* Control bytes (and DEL) have no business in a path we hand to mount or SBPL. */
static int
has_control(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 1;
	return 0;
}

static int
valid_name(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > PROFILE_NAME_MAX || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return 0;
	}
	return 1;
}

static void
set_name(struct profile *p, const char *source)
{
	const char *base = strrchr(source, '/');

	base = base != NULL ? base + 1 : source;
	snprintf(p->name, sizeof(p->name), "%s", base);
}

static int
grow(void **arr, size_t n, size_t elem)
{
	void *np;
	size_t cap;

	/* Capacity is implicit: powers of two from 8, reallocated when n hits one. */
	if (n != 0 && (n < 8 || (n & (n - 1)) != 0))
		return 0;
	cap = n == 0 ? 8 : n * 2;
	if ((np = realloc(*arr, cap * elem)) == NULL)
		return VERR_NOMEM;
	*arr = np;
	return 0;
}

/*
 * Normalise an absolute path into a fresh string: repeated slashes and "."
 * components dropped, no trailing slash. ".." is refused rather than
 * resolved: resolving it lexically is wrong across symlinks, and a profile
 * has no reason to use it.
 */
static int
normalise(struct ctx *c, const struct src *s, const char *in, char **out)
{
	size_t n = strlen(in), o = 0;
	char *buf;

	*out = NULL;
	if ((buf = malloc(n + 2)) == NULL)
		return VERR_NOMEM;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && in[j] != '/')
			j++;
		if ((j - i == 1 && in[i] == '.') || j == i) {
			/* nothing */
		} else if (j - i == 2 && in[i] == '.' && in[i + 1] == '.') {
			free(buf);
			errf(c, s, "'..' is not allowed in a path");
			return VERR_PROFILE_SYNTAX;
		} else {
			buf[o++] = '/';
			memcpy(buf + o, in + i, j - i);
			o += j - i;
		}
		i = j + 1;
	}
	if (o == 0) {
		free(buf);
		errf(c, s, "refusing to hide '/'");
		return VERR_PROFILE_SYNTAX;
	}
	buf[o] = '\0';
	*out = buf;
	return 0;
}

/* $HOME, else the password database, as paths.c does for the vault. */
static const char *
home_dir(void)
{
	const char *h = getenv("HOME");
	struct passwd *pw;

	if (h != NULL && h[0] != '\0')
		return h;
	if ((pw = getpwuid(getuid())) != NULL && pw->pw_dir != NULL && pw->pw_dir[0] != '\0')
		return pw->pw_dir;
	return NULL;
}

/*
 * Join base (an environment value, trusted as the user's but still checked)
 * and rest (from the profile), then normalise. Returns 0, or an error.
 */
static int
join_path(struct ctx *c, const struct src *s, const char *what, const char *base, const char *rest,
          char **out)
{
	size_t bl = strlen(base), rl = strlen(rest);
	char *tmp;
	int r;

	*out = NULL;
	if (bl > 0 && base[0] != '/') {
		errf(c, s, "%s is not an absolute path", what);
		return VERR_PROFILE_SYNTAX;
	}
	if (has_control(base, bl) || !profile_utf8_valid(base, bl)) {
		errf(c, s, "%s holds a control character or invalid UTF-8", what);
		return VERR_PROFILE_SYNTAX;
	}
	/* Tabs can only come from a quoted word; other control bytes never get this far. */
	if (has_control(rest, rl)) {
		errf(c, s, "tab or control character in a path");
		return VERR_PROFILE_SYNTAX;
	}
	if (bl + rl > PROFILE_PATH_MAX) {
		errf(c, s, "path longer than %d bytes", PROFILE_PATH_MAX);
		return VERR_PROFILE_SYNTAX;
	}
	if ((tmp = malloc(bl + rl + 1)) == NULL)
		return VERR_NOMEM;
	memcpy(tmp, base, bl);
	memcpy(tmp + bl, rest, rl + 1);
	r = normalise(c, s, tmp, out);
	free(tmp);
	return r;
}

/*
 * Record what follows $XDG_RUNTIME_DIR (rest: from the profile, "" or
 * "/..."), normalised: "" for the directory itself. Whether the variable
 * is set does not matter: gpg-agent, systemd and D-Bus keep their sockets
 * in /run/user/UID whatever it says, so the runner hides them there too.
 */
static int
add_runtime(struct ctx *c, const struct src *s, const char *rest)
{
	struct profile *p = c->p;
	char *joined = NULL, *sub;
	int r;

	/* Normalised under a stand-in root, which keeps "" (the directory) legal. */
	if ((r = join_path(c, s, "path", "/x", rest, &joined)) != 0)
		return r;
	sub = strdup(joined + 2);
	free(joined);
	if (sub == NULL)
		return VERR_NOMEM;
	for (size_t i = 0; i < p->nruntime_hide; i++)
		if (strcmp(p->runtime_hide[i], sub) == 0) {
			free(sub);
			return 0;
		}
	if ((r = grow((void **)&p->runtime_hide, p->nruntime_hide, sizeof(*p->runtime_hide))) !=
	    0) {
		free(sub);
		return r;
	}
	p->runtime_hide[p->nruntime_hide++] = sub;
	return 0;
}

/*
 * Expand a hide argument. Returns 0 with *out set, 1 when the line is to
 * be skipped (its variable is unset or empty), or an error.
 */
static int
expand(struct ctx *c, const struct src *s, const struct token *t, char **out)
{
	char shown[80], var[32];
	const char *p = t->s, *rest, *val;
	size_t vl = 0;

	*out = NULL;
	if (t->len == 0) {
		errf(c, s, "empty path");
		return VERR_PROFILE_SYNTAX;
	}
	if (p[0] == '~') {
		if (p[1] != '\0' && p[1] != '/') {
			errf(c, s, "'~user' is not supported in '%s': use ~/ or an absolute path",
			     show(p, t->len, shown, sizeof(shown)));
			return VERR_PROFILE_SYNTAX;
		}
		rest = p + 1;
		if ((val = home_dir()) == NULL) {
			errf(c, s, "cannot expand '~': HOME is unset and the user has no home");
			return VERR_PROFILE_SYNTAX;
		}
		snprintf(var, sizeof(var), "HOME");
	} else if (p[0] == '$') {
		int braced = p[1] == '{';
		const char *q = p + 1 + braced;

		while ((q[vl] >= 'A' && q[vl] <= 'Z') || (q[vl] >= 'a' && q[vl] <= 'z') ||
		       (q[vl] >= '0' && q[vl] <= '9') || q[vl] == '_')
			vl++;
		rest = q + vl;
		if (braced) {
			if (*rest != '}') {
				errf(c, s, "unterminated '${' in '%s'",
				     show(p, t->len, shown, sizeof(shown)));
				return VERR_PROFILE_SYNTAX;
			}
			rest++;
		}
		if (*rest != '\0' && *rest != '/') {
			errf(c, s, "a variable must end at '/' or the end of the path in '%s'",
			     show(p, t->len, shown, sizeof(shown)));
			return VERR_PROFILE_SYNTAX;
		}
		val = NULL;
		for (size_t i = 0; i < sizeof(allowed_vars) / sizeof(allowed_vars[0]); i++)
			if (strlen(allowed_vars[i]) == vl && memcmp(allowed_vars[i], q, vl) == 0)
				val = allowed_vars[i];
		if (val == NULL) {
			errf(c, s,
			     "variable '%s' is not allowed (allowed: HOME, XDG_RUNTIME_DIR, "
			     "XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_STATE_HOME, XDG_CACHE_HOME, "
			     "SSH_AUTH_SOCK, GNUPGHOME)",
			     show(p, (size_t)(rest - p), shown, sizeof(shown)));
			return VERR_PROFILE_SYNTAX;
		}
		snprintf(var, sizeof(var), "%s", val);
		val = strcmp(var, "HOME") == 0 ? home_dir() : getenv(var);
	} else if (p[0] == '/') {
		rest = p;
		val = "";
		var[0] = '\0';
	} else {
		errf(c, s, "path '%s' must be absolute, or start with ~/ or an allowed $VARIABLE",
		     show(p, t->len, shown, sizeof(shown)));
		return VERR_PROFILE_SYNTAX;
	}
	/* A '$' later on would look like a variable but is not expanded: refuse the doubt. */
	if (strchr(rest, '$') != NULL) {
		errf(c, s, "'$' is only allowed at the start of a path: '%s'",
		     show(p, t->len, shown, sizeof(shown)));
		return VERR_PROFILE_SYNTAX;
	}
	if (strcmp(var, "XDG_RUNTIME_DIR") == 0) {
		int r = add_runtime(c, s, rest);

		if (r != 0)
			return r;
	}
	if (var[0] != '\0' && (val == NULL || val[0] == '\0')) {
		char *tmp = NULL;
		int r;

		/* Skipped, but checked as if set: a bad line is bad on every machine. */
		if ((r = join_path(c, s, "path", "/x", rest, &tmp)) != 0)
			return r;
		free(tmp);
		return 1;
	}
	if (var[0] != '\0') {
		char what[48];

		snprintf(what, sizeof(what), "$%s", var);
		return join_path(c, s, what, val, rest, out);
	}
	return join_path(c, s, "path", "", rest, out);
}

/* Takes ownership of path. */
static int
add_hide(struct ctx *c, char *path)
{
	struct profile *p = c->p;
	int r;

	for (size_t i = 0; i < p->nhide; i++)
		if (strcmp(p->hide[i], path) == 0) {
			free(path);
			return 0;
		}
	if ((r = grow((void **)&p->hide, p->nhide, sizeof(*p->hide))) != 0) {
		free(path);
		return r;
	}
	p->hide[p->nhide++] = path;
	return 0;
}

static int
hex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* D-Bus address values: %XX escapes, everything else literal. */
static int
dbus_unescape(const char *v, size_t n, char *out, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int ch = (unsigned char)v[i];

		if (ch == '%') {
			int h, l;

			if (n - i < 3 || (h = hex(v[i + 1])) < 0 || (l = hex(v[i + 2])) < 0)
				return -1;
			ch = h * 16 + l;
			i += 2;
		}
		if (ch == 0 || o + 1 >= size)
			return -1;
		out[o++] = (char)ch;
	}
	out[o] = '\0';
	return 0;
}

/*
 * hide-dbus-session-bus: every unix:path= (and unix:runtime=yes, and
 * launchd:env=) socket named by DBUS_SESSION_BUS_ADDRESS. Abstract sockets
 * are left alone: they belong to the network namespace, which the Linux
 * sandbox replaces, and macOS has none. TCP transports are cut off by the
 * network policy anyway. A malformed address is an error, not a skip, so
 * a bus the parser does not understand is never silently left reachable.
 */
static int
hide_dbus(struct ctx *c, const struct src *s)
{
	const char *addr = getenv("DBUS_SESSION_BUS_ADDRESS");
	char val[PROFILE_PATH_MAX + 1];
	size_t n;

	if (addr == NULL || addr[0] == '\0')
		return 0;
	if ((n = strlen(addr)) > 4 * PROFILE_PATH_MAX) {
		errf(c, s, "DBUS_SESSION_BUS_ADDRESS is too long");
		return VERR_PROFILE_SYNTAX;
	}
	for (size_t i = 0; i < n;) {
		size_t end = i, colon;
		int is_unix, is_launchd;

		while (end < n && addr[end] != ';')
			end++;
		for (colon = i; colon < end && addr[colon] != ':'; colon++)
			;
		if (end == i) {
			i = end + 1;
			continue;
		}
		if (colon == end) {
			errf(c, s, "DBUS_SESSION_BUS_ADDRESS: an address without ':'");
			return VERR_PROFILE_SYNTAX;
		}
		is_unix = colon - i == 4 && memcmp(addr + i, "unix", 4) == 0;
		is_launchd = colon - i == 7 && memcmp(addr + i, "launchd", 7) == 0;
		for (size_t k = colon + 1; k < end;) {
			size_t ke = k, eq;
			char *path = NULL;
			const char *base = NULL, *rest = "";
			int r;

			while (ke < end && addr[ke] != ',')
				ke++;
			for (eq = k; eq < ke && addr[eq] != '='; eq++)
				;
			if (ke == k) {
				k = ke + 1;
				continue;
			}
			if (eq == ke ||
			    dbus_unescape(addr + eq + 1, ke - eq - 1, val, sizeof(val)) != 0) {
				errf(c, s, "DBUS_SESSION_BUS_ADDRESS: malformed key=value");
				return VERR_PROFILE_SYNTAX;
			}
#define KEY(lit) (eq - k == sizeof(lit) - 1 && memcmp(addr + k, lit, sizeof(lit) - 1) == 0)
			if (is_unix && KEY("path")) {
				base = val;
			} else if (is_unix && KEY("runtime") && strcmp(val, "yes") == 0) {
				base = getenv("XDG_RUNTIME_DIR");
				rest = "/bus";
				if ((r = add_runtime(c, s, rest)) != 0)
					return r;
			} else if (is_launchd && KEY("env")) {
				base = valid_name(val) ? getenv(val) : NULL;
			}
#undef KEY
			k = ke + 1;
			if (base == NULL || base[0] == '\0')
				continue;
			if ((r = join_path(c, s, "DBUS_SESSION_BUS_ADDRESS", base, rest, &path)) !=
			    0)
				return r;
			if (path[0] != '/') {
				free(path);
				errf(c, s, "DBUS_SESSION_BUS_ADDRESS: socket path is not absolute");
				return VERR_PROFILE_SYNTAX;
			}
			if ((r = add_hide(c, path)) != 0)
				return r;
		}
		i = end + 1;
	}
	return 0;
}

static int
allow_host(struct ctx *c, const struct src *s, const struct token *t)
{
	struct profile *p = c->p;
	struct hostspec h;
	char canon[HOSTSPEC_NAME_MAX + 16], shown[80];
	char *dup;
	int r;

	/* Wildcards as vproxy accepts them from --allow-host. */
	if ((r = hostspec_parse(t->s, t->len, HOSTSPEC_ALLOW_WILDCARD, &h)) != 0) {
		errf(c, s, "invalid host '%s': %s", show(t->s, t->len, shown, sizeof(shown)),
		     verr_strerror(r));
		return VERR_PROFILE_SYNTAX;
	}
	if ((r = hostspec_format(&h, canon, sizeof(canon))) != 0)
		return r;
	for (size_t i = 0; i < p->nallow; i++)
		if (strcmp(p->allow_hosts[i], canon) == 0)
			return 0;
	if (p->nallow == PROFILE_ALLOW_MAX) {
		errf(c, s, "more than %d allow-host lines", PROFILE_ALLOW_MAX);
		return VERR_TOO_MANY;
	}
	if ((dup = strdup(canon)) == NULL)
		return VERR_NOMEM;
	if ((r = grow((void **)&p->allow_hosts, p->nallow, sizeof(*p->allow_hosts))) != 0 ||
	    (r = grow((void **)&p->allow, p->nallow, sizeof(*p->allow))) != 0) {
		free(dup);
		return r;
	}
	p->allow_hosts[p->nallow] = dup;
	p->allow[p->nallow] = h;
	p->nallow++;
	return 0;
}

static int load_file(struct ctx *c, const char *path, const char *dir, const struct src *from);

static int
include(struct ctx *c, const struct src *s, const struct token *t)
{
	char shown[80], *path;
	size_t dl;
	int r;

	if (s->dir == NULL) {
		errf(c, s, "include is not available for a profile given as text");
		return VERR_PROFILE_SYNTAX;
	}
	/* Names only: an include can never reach outside the profile's directory. */
	if (!valid_name(t->s)) {
		errf(c, s, "invalid profile name '%s' in include",
		     show(t->s, t->len, shown, sizeof(shown)));
		return VERR_PROFILE_SYNTAX;
	}
	/* The stack holds the top file plus PROFILE_INCLUDE_DEPTH included ones. */
	if (c->depth > PROFILE_INCLUDE_DEPTH) {
		errf(c, s, "includes nested deeper than %d", PROFILE_INCLUDE_DEPTH);
		return VERR_PROFILE_SYNTAX;
	}
	dl = strlen(s->dir);
	if ((path = malloc(dl + t->len + 2)) == NULL)
		return VERR_NOMEM;
	memcpy(path, s->dir, dl);
	path[dl] = '/';
	memcpy(path + dl + 1, t->s, t->len + 1);
	r = load_file(c, path, s->dir, s);
	free(path);
	return r;
}

/*
 * Split a line into tokens: bare words, or "double quoted" ones with \" and
 * \\ escapes (for paths with spaces). Returns the token count, or an error.
 * A '#' starting the first token makes the line a comment (0 tokens).
 */
static int
tokenise(struct ctx *c, const struct src *s, const char *line, size_t n, char *buf,
         struct token *tok)
{
	size_t i = 0, o = 0;
	int nt = 0;

	for (;;) {
		size_t start = o;

		while (i < n && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i == n)
			break;
		if (line[i] == '#') {
			if (nt == 0)
				return 0;
			errf(c, s, "comments must be on a line of their own");
			return VERR_PROFILE_SYNTAX;
		}
		if (nt == MAX_TOKENS) {
			errf(c, s, "too many arguments (quote paths that contain spaces)");
			return VERR_PROFILE_SYNTAX;
		}
		if (line[i] == '"') {
			for (i++;; i++) {
				if (i == n) {
					errf(c, s, "unterminated quote");
					return VERR_PROFILE_SYNTAX;
				}
				if (line[i] == '"')
					break;
				if (line[i] == '\\') {
					if (i + 1 == n ||
					    (line[i + 1] != '"' && line[i + 1] != '\\')) {
						errf(c, s, "only \\\" and \\\\ may be escaped");
						return VERR_PROFILE_SYNTAX;
					}
					i++;
				}
				buf[o++] = line[i];
			}
			i++;
			if (i < n && line[i] != ' ' && line[i] != '\t') {
				errf(c, s, "garbage after closing quote");
				return VERR_PROFILE_SYNTAX;
			}
		} else {
			for (; i < n && line[i] != ' ' && line[i] != '\t'; i++) {
				if (line[i] == '"') {
					errf(c, s, "stray '\"' inside a word");
					return VERR_PROFILE_SYNTAX;
				}
				buf[o++] = line[i];
			}
		}
		buf[o++] = '\0';
		tok[nt].s = buf + start;
		tok[nt].len = o - start - 1;
		nt++;
	}
	return nt;
}

static int
want_args(struct ctx *c, const struct src *s, int nt, int want, const char *usage)
{
	if (nt - 1 == want)
		return 0;
	errf(c, s, "%s: expected '%s'%s", nt - 1 < want ? "missing argument" : "too many arguments",
	     usage, want > 0 ? " (quote paths that contain spaces)" : "");
	return VERR_PROFILE_SYNTAX;
}

static int
directive(struct ctx *c, const struct src *s, const char *line, size_t n)
{
	char buf[PROFILE_LINE_MAX + MAX_TOKENS + 1], shown[80];
	struct token tok[MAX_TOKENS];
	const char *d;
	int nt, r;

	if ((nt = tokenise(c, s, line, n, buf, tok)) <= 0)
		return nt;
	if (++c->ndirectives > PROFILE_DIRECTIVES_MAX) {
		errf(c, s, "more than %d directives", PROFILE_DIRECTIVES_MAX);
		return VERR_TOO_MANY;
	}
	d = tok[0].s;
	if (strcmp(d, "hide") == 0) {
		char *path;

		if ((r = want_args(c, s, nt, 1, "hide PATH")) != 0)
			return r;
		if ((r = expand(c, s, &tok[1], &path)) != 0)
			return r < 0 ? r : 0;
		return add_hide(c, path);
	}
	if (strcmp(d, "hide-dbus-session-bus") == 0) {
		if ((r = want_args(c, s, nt, 0, "hide-dbus-session-bus")) != 0)
			return r;
		return hide_dbus(c, s);
	}
	if (strcmp(d, "allow-host") == 0) {
		if ((r = want_args(c, s, nt, 1, "allow-host HOST[:PORT]")) != 0)
			return r;
		return allow_host(c, s, &tok[1]);
	}
	if (strcmp(d, "network") == 0) {
		int mode;

		if ((r = want_args(c, s, nt, 1, "network proxy-only")) != 0)
			return r;
		if (strcmp(tok[1].s, "proxy-only") == 0) {
			mode = PROFILE_NET_PROXY_ONLY;
		} else {
			errf(c, s, "unknown network mode '%s' (supported: proxy-only)",
			     show(tok[1].s, tok[1].len, shown, sizeof(shown)));
			return VERR_PROFILE_SYNTAX;
		}
		if (c->network != 0 && c->network != mode) {
			errf(c, s, "conflicting network directives");
			return VERR_PROFILE_SYNTAX;
		}
		c->network = mode;
		return 0;
	}
	if (strcmp(d, "include") == 0) {
		if ((r = want_args(c, s, nt, 1, "include NAME")) != 0)
			return r;
		return include(c, s, &tok[1]);
	}
	errf(c, s, "unknown directive '%s'", show(tok[0].s, tok[0].len, shown, sizeof(shown)));
	return VERR_PROFILE_SYNTAX;
}

static int
parse_text(struct ctx *c, const char *text, size_t len, const char *name, const char *dir)
{
	struct src s = {name, dir, 0};
	int r;

	if (len > PROFILE_FILE_MAX) {
		errf(c, &s, "larger than %d bytes", PROFILE_FILE_MAX);
		return VERR_TOO_LARGE;
	}
	if (len > PROFILE_TOTAL_MAX - c->total) {
		errf(c, &s, "profile and its includes larger than %d bytes", PROFILE_TOTAL_MAX);
		return VERR_TOO_LARGE;
	}
	c->total += len;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl != NULL ? (size_t)(nl - (text + i)) : len - i;
		const char *line = text + i;

		s.line++;
		if (n > PROFILE_LINE_MAX) {
			errf(c, &s, "line longer than %d bytes", PROFILE_LINE_MAX);
			return VERR_TOO_LARGE;
		}
		for (size_t k = 0; k < n; k++) {
			unsigned char b = (unsigned char)line[k];

			if (b == 0) {
				errf(c, &s, "NUL byte");
				return VERR_PROFILE_SYNTAX;
			}
			if (b == '\r') {
				errf(c, &s, "carriage return (profiles use LF line endings)");
				return VERR_PROFILE_SYNTAX;
			}
			if ((b < 0x20 && b != '\t') || b == 0x7f) {
				errf(c, &s, "control character 0x%02x", b);
				return VERR_PROFILE_SYNTAX;
			}
		}
		if (!profile_utf8_valid(line, n)) {
			errf(c, &s, "invalid UTF-8");
			return VERR_PROFILE_SYNTAX;
		}
		if ((r = directive(c, &s, line, n)) != 0)
			return r;
		i += n + 1;
	}
	return 0;
}

/*
 * Read a profile file, bounded. from is the including line (NULL at the
 * top), so that a missing include is reported where it is written.
 */
static int
load_file(struct ctx *c, const char *path, const char *dir, const struct src *from)
{
	struct src top = {path, NULL, 0};
	const struct src *where = from != NULL ? from : &top;
	struct stat st;
	char *buf = NULL, shown[80];
	size_t len = 0;
	int fd, r, saved;

	/* O_NONBLOCK: a FIFO named as a profile must not hang vrun. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) == -1) {
		saved = errno;
		if (saved == ENOENT || saved == ENOTDIR) {
			if (from != NULL)
				errf(c, where, "include '%s': no such profile",
				     show(path, strlen(path), shown, sizeof(shown)));
			else
				errf(c, where, "no such profile");
			return VERR_PROFILE_NOT_FOUND;
		}
		errf(c, where, "cannot open %s: %s", show(path, strlen(path), shown, sizeof(shown)),
		     strerror(saved));
		errno = saved;
		return VERR_SYSTEM;
	}
	if (fstat(fd, &st) == -1) {
		saved = errno;
		close(fd);
		errf(c, where, "cannot stat: %s", strerror(saved));
		errno = saved;
		return VERR_SYSTEM;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		errf(c, where, "%s is not a regular file",
		     show(path, strlen(path), shown, sizeof(shown)));
		return VERR_PROFILE_NOT_FOUND;
	}
	/* Anyone could weaken the sandbox by deleting its hide lines. */
	if (st.st_mode & S_IWOTH) {
		close(fd);
		errf(c, where, "%s is writable by others (chmod o-w)",
		     show(path, strlen(path), shown, sizeof(shown)));
		return VERR_INSECURE_PATH;
	}
	for (size_t i = 0; i < c->depth; i++)
		if (c->stack[i].dev == st.st_dev && c->stack[i].ino == st.st_ino) {
			close(fd);
			errf(c, where, "include cycle: %s is already being read",
			     show(path, strlen(path), shown, sizeof(shown)));
			return VERR_PROFILE_SYNTAX;
		}
	if (st.st_size > PROFILE_FILE_MAX) {
		close(fd);
		errf(c, &top, "larger than %d bytes", PROFILE_FILE_MAX);
		return VERR_TOO_LARGE;
	}
	if ((buf = malloc(PROFILE_FILE_MAX + 1)) == NULL) {
		close(fd);
		return VERR_NOMEM;
	}
	/* Bounded by the buffer, not by st_size: the file may change under us. */
	while (len < PROFILE_FILE_MAX + 1) {
		ssize_t got = read(fd, buf + len, PROFILE_FILE_MAX + 1 - len);

		if (got == 0)
			break;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			saved = errno;
			close(fd);
			free(buf);
			errf(c, &top, "cannot read: %s", strerror(saved));
			errno = saved;
			return VERR_SYSTEM;
		}
		len += (size_t)got;
	}
	close(fd);
	c->stack[c->depth].dev = st.st_dev;
	c->stack[c->depth].ino = st.st_ino;
	c->depth++;
	r = parse_text(c, buf, len, path, dir);
	c->depth--;
	free(buf);
	return r;
}

static int
start(struct ctx *c, char *err, size_t errsize)
{
	memset(c, 0, sizeof(*c));
	c->err = err;
	c->errsize = errsize;
	if (err != NULL && errsize > 0)
		err[0] = '\0';
	if ((c->p = calloc(1, sizeof(*c->p))) == NULL)
		return VERR_NOMEM;
	return 0;
}

static int
finish(struct ctx *c, int r, struct profile **out)
{
	if (r != 0) {
		if (c->err != NULL && c->errsize > 0 && c->err[0] == '\0')
			snprintf(c->err, c->errsize, "%s", verr_strerror(r));
		profile_free(c->p);
		return r;
	}
	c->p->network = c->network != 0 ? c->network : PROFILE_NET_PROXY_ONLY;
	*out = c->p;
	return 0;
}

int
profile_parse(const char *text, size_t len, const char *source_name, struct profile **out,
              char *err, size_t errsize)
{
	struct ctx c;
	int r;

	if (out != NULL)
		*out = NULL;
	if (out == NULL || (text == NULL && len > 0) || (err == NULL && errsize > 0))
		return VERR_INVALID;
	if (source_name == NULL)
		source_name = "<profile>";
	if ((r = start(&c, err, errsize)) != 0)
		return r;
	set_name(c.p, source_name);
	r = parse_text(&c, text != NULL ? text : "", len, source_name, NULL);
	return finish(&c, r, out);
}

int
profile_load(const char *name_or_path, const char *search_dir, struct profile **out, char *err,
             size_t errsize)
{
	struct ctx c;
	char *path = NULL, *dir = NULL, shown[80];
	const char *slash;
	int r;

	if (out != NULL)
		*out = NULL;
	if (out == NULL || name_or_path == NULL || (err == NULL && errsize > 0))
		return VERR_INVALID;
	if ((r = start(&c, err, errsize)) != 0)
		return r;
	if (strchr(name_or_path, '/') == NULL) {
		size_t dl;

		if (!valid_name(name_or_path)) {
			errf(&c, NULL, "invalid profile name '%s'",
			     show(name_or_path, strlen(name_or_path), shown, sizeof(shown)));
			r = VERR_PROFILE_NOT_FOUND;
			goto out;
		}
		if (search_dir == NULL || search_dir[0] == '\0') {
			r = VERR_INVALID;
			goto out;
		}
		dl = strlen(search_dir);
		if ((path = malloc(dl + strlen(name_or_path) + 2)) == NULL) {
			r = VERR_NOMEM;
			goto out;
		}
		snprintf(path, dl + strlen(name_or_path) + 2, "%s/%s", search_dir, name_or_path);
	} else if ((path = strdup(name_or_path)) == NULL) {
		r = VERR_NOMEM;
		goto out;
	}
	set_name(c.p, name_or_path);
	slash = strrchr(path, '/');
	if ((dir = strndup(path, (size_t)(slash - path))) == NULL) {
		r = VERR_NOMEM;
		goto out;
	}
	r = load_file(&c, path, dir, NULL);
out:
	free(path);
	free(dir);
	return finish(&c, r, out);
}

void
profile_free(struct profile *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->nhide; i++)
		free(p->hide[i]);
	for (size_t i = 0; i < p->nruntime_hide; i++)
		free(p->runtime_hide[i]);
	for (size_t i = 0; i < p->nallow; i++)
		free(p->allow_hosts[i]);
	free(p->hide);
	free(p->runtime_hide);
	free(p->allow_hosts);
	free(p->allow);
	free(p);
}

const char *
profile_search_dir(const char *installed_dir)
{
	const char *d = getenv(PROFILE_DIR_ENV);

	if (d != NULL && d[0] == '/')
		return d;
	return installed_dir;
}
