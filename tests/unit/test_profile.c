/* Sandbox profiles: the shipped ones, every directive, every error class. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "profile.h"
#include "verr.h"

static char tmpdir[64];

/* A fixed environment, so expansion results are known. */
static void
fixed_env(void)
{
	setenv("HOME", "/home/alice", 1);
	setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
	setenv("SSH_AUTH_SOCK", "/tmp/ssh-XYZ/agent.123", 1);
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus", 1);
	unsetenv("GNUPGHOME");
	unsetenv("XDG_CONFIG_HOME");
	unsetenv("VRUN_PROFILE_DIR");
}

static int
setup(void **state)
{
	(void)state;
	fixed_env();
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_profile.XXXXXX");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct profile *
ok(const char *text)
{
	struct profile *p = NULL;
	char err[512];
	int r = profile_parse(text, strlen(text), "t", &p, err, sizeof(err));

	if (r != 0)
		fail_msg("refused '%s': %d %s", text, r, err);
	assert_non_null(p);
	return p;
}

/* Parse must fail with code want and a message containing msg. */
static void
bad_len(const char *text, size_t len, int want, const char *msg)
{
	struct profile *p = (struct profile *)1;
	char err[512];
	int r = profile_parse(text, len, "t", &p, err, sizeof(err));

	if (r != want)
		fail_msg("'%.*s': got %d (%s), want %d", (int)len, text, r, err, want);
	assert_null(p);
	if (strstr(err, msg) == NULL)
		fail_msg("'%.*s': message '%s' lacks '%s'", (int)len, text, err, msg);
}

static void
bad(const char *text, int want, const char *msg)
{
	bad_len(text, strlen(text), want, msg);
}

static int
has_hide(const struct profile *p, const char *path)
{
	for (size_t i = 0; i < p->nhide; i++)
		if (strcmp(p->hide[i], path) == 0)
			return 1;
	return 0;
}

static int
has_runtime(const struct profile *p, const char *sub)
{
	for (size_t i = 0; i < p->nruntime_hide; i++)
		if (strcmp(p->runtime_hide[i], sub) == 0)
			return 1;
	return 0;
}

static void
one_hide(const char *text, const char *want)
{
	struct profile *p = ok(text);

	if (p->nhide != 1 || strcmp(p->hide[0], want) != 0)
		fail_msg("'%s': got %zu paths, first '%s', want '%s'", text, p->nhide,
		         p->nhide > 0 ? p->hide[0] : "", want);
	profile_free(p);
}

static void
no_hide(const char *text)
{
	struct profile *p = ok(text);

	if (p->nhide != 0)
		fail_msg("'%s' should hide nothing, hides '%s'", text, p->hide[0]);
	profile_free(p);
}

static void
write_file(const char *name, const char *text, mode_t mode)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	assert_non_null(f = fopen(path, "w"));
	assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static int
load(const char *name, struct profile **p, char *err, size_t errsize)
{
	return profile_load(name, tmpdir, p, err, errsize);
}

static const char *
source_profiles(void)
{
	static char dir[4096];
	const char *src = getenv("VRUN_SOURCE_DIR");

	snprintf(dir, sizeof(dir), "%s/profiles", src != NULL ? src : "../..");
	return dir;
}

static void
test_agent_parses(void **state)
{
	static const char *const want[] = {
	        "/home/alice/.ssh",
	        "/home/alice/.aws",
	        "/home/alice/.gnupg",
	        "/home/alice/.config/gcloud",
	        "/home/alice/.docker",
	        "/home/alice/.kube",
	        "/var/run/docker.sock",
	        "/run/docker.sock",
	        "/run/podman",
	        "/run/containerd",
	        "/run/user/1000/docker.sock",
	        "/run/user/1000/podman",
	        "/tmp/ssh-XYZ/agent.123",
	        "/run/user/1000/gnupg",
	        "/run/user/1000/bus",
	};
	struct profile *p = NULL, *s = NULL;
	char err[512];
	int r;

	(void)state;
	fixed_env();
	r = profile_load(PROFILE_DEFAULT, source_profiles(), &p, err, sizeof(err));
	if (r != 0)
		fail_msg("profiles/agent: %d %s", r, err);
	assert_string_equal(p->name, "agent");
	assert_int_equal(p->network, PROFILE_NET_PROXY_ONLY);
	assert_int_equal(p->nallow, 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!has_hide(p, want[i]))
			fail_msg("agent does not hide %s", want[i]);
	/* GNUPGHOME unset: its line is skipped, nothing else is. */
	for (size_t i = 0; i < p->nhide; i++)
		assert_null(strstr(p->hide[i], "$"));
	/* Everything under $XDG_RUNTIME_DIR is also to be hidden under /run/user/UID. */
	assert_int_equal(p->nruntime_hide, 7);
	assert_true(has_runtime(p, "/docker.sock") && has_runtime(p, "/podman") &&
	            has_runtime(p, "/containerd") && has_runtime(p, "/gnupg") &&
	            has_runtime(p, "/keyring") && has_runtime(p, "/bus") &&
	            has_runtime(p, "/systemd"));

	/* strict includes agent and adds to it. */
	r = profile_load("strict", source_profiles(), &s, err, sizeof(err));
	if (r != 0)
		fail_msg("profiles/strict: %d %s", r, err);
	assert_true(s->nhide > p->nhide);
	for (size_t i = 0; i < p->nhide; i++)
		assert_true(has_hide(s, p->hide[i]));
	assert_true(has_hide(s, "/home/alice/.netrc"));
	assert_true(has_hide(s, "/home/alice/Library/Application Support/Google/Chrome"));
	profile_free(p);
	profile_free(s);
}

static void
test_directives(void **state)
{
	struct profile *p;

	(void)state;
	p = ok("# comment\n"
	       "\n"
	       "   \t\n"
	       "  # indented comment\n"
	       "network proxy-only\n"
	       "network\tproxy-only\n"
	       "hide /etc/shadow\n"
	       "\thide   /var/lib/x   \n"
	       "hide \"/with space/and \\\"quote\\\" and \\\\\"\n"
	       "hide /a#b\n"
	       "hide-dbus-session-bus\n"
	       "allow-host example.com\n"
	       "allow-host *.example.org:8443");
	assert_int_equal(p->network, PROFILE_NET_PROXY_ONLY);
	assert_int_equal(p->nhide, 5);
	assert_string_equal(p->hide[0], "/etc/shadow");
	assert_string_equal(p->hide[1], "/var/lib/x");
	assert_string_equal(p->hide[2], "/with space/and \"quote\" and \\");
	assert_string_equal(p->hide[3], "/a#b");
	assert_string_equal(p->hide[4], "/run/user/1000/bus");
	assert_int_equal(p->nallow, 2);
	assert_string_equal(p->allow_hosts[0], "example.com:443");
	assert_string_equal(p->allow_hosts[1], "*.example.org:8443");
	assert_int_equal(p->allow[1].wildcard, 1);
	assert_int_equal(p->allow[1].port, 8443);
	assert_string_equal(p->name, "t");
	profile_free(p);

	/* Empty profile: no hides, the network mode still defaults to proxy-only. */
	p = ok("");
	assert_int_equal(p->nhide, 0);
	assert_int_equal(p->network, PROFILE_NET_PROXY_ONLY);
	profile_free(p);
	p = ok("\n\n# only comments\n");
	assert_int_equal(p->network, PROFILE_NET_PROXY_ONLY);
	profile_free(p);
	profile_free(NULL);
}

static void
test_syntax_errors(void **state)
{
	(void)state;
	bad("# c\n\nhid /x\n", VERR_PROFILE_SYNTAX, "t:3: unknown directive 'hid'");
	bad("Hide /x", VERR_PROFILE_SYNTAX, "t:1: unknown directive 'Hide'");
	bad("hide\n", VERR_PROFILE_SYNTAX, "t:1: missing argument");
	bad("\nhide /a /b\n", VERR_PROFILE_SYNTAX, "t:2: too many arguments");
	bad("hide /a /b /c /d", VERR_PROFILE_SYNTAX, "t:1: too many arguments");
	bad("hide /my dir", VERR_PROFILE_SYNTAX, "quote paths");
	bad("hide ~/.ssh # keys", VERR_PROFILE_SYNTAX, "t:1: comments must be on a line");
	bad("hide \"/a", VERR_PROFILE_SYNTAX, "t:1: unterminated quote");
	bad("hide \"/a\\n\"", VERR_PROFILE_SYNTAX, "t:1: only \\\" and \\\\ may be escaped");
	bad("hide \"/a\"b", VERR_PROFILE_SYNTAX, "t:1: garbage after closing quote");
	bad("hide /a\"b\"", VERR_PROFILE_SYNTAX, "t:1: stray");
	bad("hide-dbus-session-bus now", VERR_PROFILE_SYNTAX, "t:1: too many arguments");
	bad("network", VERR_PROFILE_SYNTAX, "t:1: missing argument");
	bad("network open", VERR_PROFILE_SYNTAX, "t:1: unknown network mode 'open'");
	bad("network proxy-only extra", VERR_PROFILE_SYNTAX, "t:1: too many arguments");
	bad("allow-host", VERR_PROFILE_SYNTAX, "t:1: missing argument");
	bad("include agent", VERR_PROFILE_SYNTAX, "t:1: include is not available");
	/* Messages never echo control bytes or escapes from the profile. */
	bad("\xe2\x80\x8bhide /x", VERR_PROFILE_SYNTAX, "unknown directive '???hide'");
}

static void
test_byte_errors(void **state)
{
	(void)state;
	bad_len("hide /a\nhide /b\0c\n", 17, VERR_PROFILE_SYNTAX, "t:2: NUL byte");
	bad("hide /a\r\n", VERR_PROFILE_SYNTAX, "t:1: carriage return");
	bad("\n\nhide /a\x1b[2J", VERR_PROFILE_SYNTAX, "t:3: control character 0x1b");
	bad("hide /a\x7f", VERR_PROFILE_SYNTAX, "t:1: control character 0x7f");
	bad("# \xc0\xaf overlong\n", VERR_PROFILE_SYNTAX, "t:1: invalid UTF-8");
	bad("\nhide /\xed\xa0\x80", VERR_PROFILE_SYNTAX, "t:2: invalid UTF-8");
	bad("hide /\xe2\x82", VERR_PROFILE_SYNTAX, "t:1: invalid UTF-8");
	bad("hide /\xf4\x90\x80\x80", VERR_PROFILE_SYNTAX, "t:1: invalid UTF-8");
	bad("hide /\xff", VERR_PROFILE_SYNTAX, "t:1: invalid UTF-8");
	/* Valid multi-byte UTF-8 is fine. */
	one_hide("hide /home/jos\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x94\x91",
	         "/home/jos\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x94\x91");
}

static void
test_paths(void **state)
{
	(void)state;
	fixed_env();
	one_hide("hide /a//b/./c/", "/a/b/c");
	one_hide("hide /a/./", "/a");
	one_hide("hide /...", "/...");
	one_hide("hide /a/..b", "/a/..b");
	one_hide("hide /x~y", "/x~y");
	bad("hide relative/path", VERR_PROFILE_SYNTAX,
	    "t:1: path 'relative/path' must be absolute");
	bad("hide ./x", VERR_PROFILE_SYNTAX, "must be absolute");
	bad("hide \"\"", VERR_PROFILE_SYNTAX, "t:1: empty path");
	bad("\nhide /a/../etc", VERR_PROFILE_SYNTAX, "t:2: '..' is not allowed");
	bad("hide /a/..", VERR_PROFILE_SYNTAX, "'..' is not allowed");
	bad("hide ~/../bob", VERR_PROFILE_SYNTAX, "'..' is not allowed");
	bad("hide /", VERR_PROFILE_SYNTAX, "t:1: refusing to hide '/'");
	bad("hide //./", VERR_PROFILE_SYNTAX, "refusing to hide '/'");
	bad("hide ~bob/.ssh", VERR_PROFILE_SYNTAX, "t:1: '~user' is not supported");
	bad("hide /a/$HOME", VERR_PROFILE_SYNTAX, "t:1: '$' is only allowed at the start");
	bad("hide ~/$x", VERR_PROFILE_SYNTAX, "'$' is only allowed at the start");
	bad("hide \"/a\tb\"", VERR_PROFILE_SYNTAX, "t:1: tab or control character in a path");
	bad("hide \"~/\t\"", VERR_PROFILE_SYNTAX, "tab or control character in a path");

	/* Duplicates, also after normalisation, are merged. */
	struct profile *p = ok("hide /a\nhide /a/\nhide ~/x\nhide $HOME/x\nhide /b");
	assert_int_equal(p->nhide, 3);
	assert_string_equal(p->hide[0], "/a");
	assert_string_equal(p->hide[1], "/home/alice/x");
	assert_string_equal(p->hide[2], "/b");
	profile_free(p);
}

static void
test_expansion(void **state)
{
	struct passwd *pw;
	char want[4200];

	(void)state;
	fixed_env();
	one_hide("hide ~", "/home/alice");
	one_hide("hide ~/", "/home/alice");
	one_hide("hide ~/.ssh", "/home/alice/.ssh");
	one_hide("hide $HOME/.aws", "/home/alice/.aws");
	one_hide("hide ${HOME}/.aws", "/home/alice/.aws");
	one_hide("hide $XDG_RUNTIME_DIR/docker.sock", "/run/user/1000/docker.sock");
	one_hide("hide $SSH_AUTH_SOCK", "/tmp/ssh-XYZ/agent.123");
	one_hide("hide \"${XDG_RUNTIME_DIR}/my dir\"", "/run/user/1000/my dir");

	/* Values are normalised too. */
	setenv("HOME", "/home//alice/", 1);
	one_hide("hide ~/.ssh", "/home/alice/.ssh");
	setenv("HOME", "/home/alice", 1);

	/* Unset or empty: the line is skipped, the rest still counts. */
	no_hide("hide $GNUPGHOME");
	no_hide("hide $XDG_CONFIG_HOME/gcloud");
	setenv("GNUPGHOME", "", 1);
	no_hide("hide $GNUPGHOME");
	setenv("GNUPGHOME", "/home/alice/.gnupg2", 1);
	one_hide("hide $GNUPGHOME", "/home/alice/.gnupg2");
	unsetenv("GNUPGHOME");
	unsetenv("SSH_AUTH_SOCK");
	one_hide("hide $SSH_AUTH_SOCK\nhide /x", "/x");

	/* HOME unset: the password database, as for the vault; never skipped. */
	unsetenv("HOME");
	assert_non_null(pw = getpwuid(getuid()));
	snprintf(want, sizeof(want), "%s/.ssh", strcmp(pw->pw_dir, "/") == 0 ? "" : pw->pw_dir);
	one_hide("hide ~/.ssh", want);
	one_hide("hide $HOME/.ssh", want);
	fixed_env();

	/* Only allowlisted variables, and only at the start. */
	bad("hide $PATH", VERR_PROFILE_SYNTAX, "t:1: variable '$PATH' is not allowed");
	bad("hide $HOMEX/a", VERR_PROFILE_SYNTAX, "variable '$HOMEX' is not allowed");
	bad("hide $home", VERR_PROFILE_SYNTAX, "variable '$home' is not allowed");
	bad("hide $/x", VERR_PROFILE_SYNTAX, "variable '$' is not allowed");
	bad("hide $HOME.bak", VERR_PROFILE_SYNTAX, "t:1: a variable must end at '/'");
	bad("hide ${HOME", VERR_PROFILE_SYNTAX, "t:1: unterminated '${'");

	/* A set variable that is not a clean absolute path fails closed. */
	setenv("SSH_AUTH_SOCK", "agent.sock", 1);
	bad("\nhide $SSH_AUTH_SOCK", VERR_PROFILE_SYNTAX, "t:2: $SSH_AUTH_SOCK is not an absolute");
	setenv("SSH_AUTH_SOCK", "/tmp/a\nb", 1);
	bad("hide $SSH_AUTH_SOCK", VERR_PROFILE_SYNTAX, "control character or invalid UTF-8");
	setenv("SSH_AUTH_SOCK", "/tmp/\xff", 1);
	bad("hide $SSH_AUTH_SOCK", VERR_PROFILE_SYNTAX, "control character or invalid UTF-8");
	setenv("SSH_AUTH_SOCK", "/tmp/../etc/x", 1);
	bad("hide $SSH_AUTH_SOCK", VERR_PROFILE_SYNTAX, "'..' is not allowed");
	fixed_env();
}

/*
 * gpg-agent, systemd and D-Bus use /run/user/UID whatever XDG_RUNTIME_DIR
 * says: what a profile hides under $XDG_RUNTIME_DIR is kept, relative, for
 * the runner to hide there too -- also when the variable is unset.
 */
static void
test_runtime(void **state)
{
	struct profile *p;

	(void)state;
	fixed_env();
	p = ok("hide $XDG_RUNTIME_DIR/gnupg\nhide ${XDG_RUNTIME_DIR}/./a//b/\n"
	       "hide $XDG_RUNTIME_DIR/gnupg/\nhide ~/.ssh\nhide /run/x\nhide $XDG_RUNTIME_DIR");
	assert_int_equal(p->nhide, 5);
	assert_string_equal(p->hide[0], "/run/user/1000/gnupg");
	assert_string_equal(p->hide[1], "/run/user/1000/a/b");
	assert_int_equal(p->nruntime_hide, 3);
	assert_string_equal(p->runtime_hide[0], "/gnupg");
	assert_string_equal(p->runtime_hide[1], "/a/b");
	assert_string_equal(p->runtime_hide[2], "");
	profile_free(p);

	/* Unset or empty: nothing to hide by the variable, the relative part still counts. */
	unsetenv("XDG_RUNTIME_DIR");
	p = ok("hide $XDG_RUNTIME_DIR/gnupg\nhide \"$XDG_RUNTIME_DIR/my dir\"");
	assert_int_equal(p->nhide, 0);
	assert_int_equal(p->nruntime_hide, 2);
	assert_string_equal(p->runtime_hide[0], "/gnupg");
	assert_string_equal(p->runtime_hide[1], "/my dir");
	profile_free(p);
	setenv("XDG_RUNTIME_DIR", "", 1);
	p = ok("hide $XDG_RUNTIME_DIR/keyring");
	assert_int_equal(p->nhide, 0);
	assert_true(p->nruntime_hide == 1 && has_runtime(p, "/keyring"));
	profile_free(p);
	/* unix:runtime=yes names $XDG_RUNTIME_DIR/bus. */
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:runtime=yes", 1);
	p = ok("hide-dbus-session-bus");
	assert_int_equal(p->nhide, 0);
	assert_true(p->nruntime_hide == 1 && has_runtime(p, "/bus"));
	profile_free(p);

	/* What follows a variable is checked whether or not it is set. */
	bad("\nhide $XDG_RUNTIME_DIR/../etc", VERR_PROFILE_SYNTAX, "t:2: '..' is not allowed");
	bad("hide $XDG_RUNTIME_DIR/a$b", VERR_PROFILE_SYNTAX, "'$' is only allowed at the start");
	bad("hide $GNUPGHOME/a$b", VERR_PROFILE_SYNTAX, "'$' is only allowed at the start");
	fixed_env();

	/* Other variables and plain paths have no second place. */
	p = ok("hide ~/.gnupg\nhide /run/user/1000/x\nhide $SSH_AUTH_SOCK\nhide-dbus-session-bus");
	assert_int_equal(p->nruntime_hide, 0);
	profile_free(p);
}

static void
test_dbus(void **state)
{
	struct profile *p;

	(void)state;
	fixed_env();
	one_hide("hide-dbus-session-bus", "/run/user/1000/bus");
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/tmp/a%20b,guid=0123;unix:runtime=yes", 1);
	p = ok("hide-dbus-session-bus");
	assert_int_equal(p->nhide, 2);
	assert_string_equal(p->hide[0], "/tmp/a b");
	assert_string_equal(p->hide[1], "/run/user/1000/bus");
	profile_free(p);
	/* Abstract sockets go with the network namespace; tcp with the network policy. */
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:abstract=/tmp/dbus-x,guid=1;tcp:host=h,port=1", 1);
	no_hide("hide-dbus-session-bus");
	setenv("DBUS_SESSION_BUS_ADDRESS", "launchd:env=DBUS_LAUNCHD_SESSION_BUS_SOCKET", 1);
	setenv("DBUS_LAUNCHD_SESSION_BUS_SOCKET",
	       "/private/tmp/com.apple.launchd.x/unix_domain_listener", 1);
	one_hide("hide-dbus-session-bus", "/private/tmp/com.apple.launchd.x/unix_domain_listener");
	unsetenv("DBUS_LAUNCHD_SESSION_BUS_SOCKET");
	unsetenv("DBUS_SESSION_BUS_ADDRESS");
	no_hide("hide-dbus-session-bus");
	setenv("DBUS_SESSION_BUS_ADDRESS", "", 1);
	no_hide("hide-dbus-session-bus");

	/* An address we do not understand is an error, never a silent skip. */
	setenv("DBUS_SESSION_BUS_ADDRESS", "garbage", 1);
	bad("\nhide-dbus-session-bus", VERR_PROFILE_SYNTAX, "t:2: DBUS_SESSION_BUS_ADDRESS");
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path", 1);
	bad("hide-dbus-session-bus", VERR_PROFILE_SYNTAX, "malformed key=value");
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/x%zz", 1);
	bad("hide-dbus-session-bus", VERR_PROFILE_SYNTAX, "malformed key=value");
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/x%2", 1);
	bad("hide-dbus-session-bus", VERR_PROFILE_SYNTAX, "malformed key=value");
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/x%00", 1);
	bad("hide-dbus-session-bus", VERR_PROFILE_SYNTAX, "malformed key=value");
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=bus", 1);
	bad("hide-dbus-session-bus", VERR_PROFILE_SYNTAX, "not an absolute path");
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/%2e%2e/x", 1);
	bad("hide-dbus-session-bus", VERR_PROFILE_SYNTAX, "'..' is not allowed");
	fixed_env();
}

static void
test_allow_host(void **state)
{
	struct profile *p;

	(void)state;
	p = ok("allow-host API.Example.COM.\n"
	       "allow-host api.example.com:443\n"
	       "allow-host [0:0::1]:80\n"
	       "allow-host 10.0.0.1:8080\n"
	       "allow-host *.Example.co.uk");
	assert_int_equal(p->nallow, 4);
	assert_string_equal(p->allow_hosts[0], "api.example.com:443");
	assert_string_equal(p->allow[0].host, "api.example.com");
	assert_int_equal(p->allow[0].port, 443);
	assert_string_equal(p->allow_hosts[1], "[::1]:80");
	assert_string_equal(p->allow_hosts[2], "10.0.0.1:8080");
	assert_string_equal(p->allow_hosts[3], "*.example.co.uk:443");
	profile_free(p);

	bad("\n\nallow-host exa_mple.com", VERR_PROFILE_SYNTAX, "t:3: invalid host 'exa_mple.com'");
	bad("allow-host example.com:0", VERR_PROFILE_SYNTAX, "invalid port");
	bad("allow-host example.com:0443", VERR_PROFILE_SYNTAX, "invalid port");
	bad("allow-host *.com", VERR_PROFILE_SYNTAX, "invalid wildcard");
	bad("allow-host 1.2.3", VERR_PROFILE_SYNTAX, "invalid host");
	bad("allow-host example.com extra", VERR_PROFILE_SYNTAX, "too many arguments");
	bad("allow-host \"\"", VERR_PROFILE_SYNTAX, "invalid host ''");
}

static void
test_limits(void **state)
{
	char *text;
	size_t n;

	(void)state;
	assert_non_null(text = malloc(PROFILE_FILE_MAX + 2));

	/* Longest line is fine, one more byte is not. */
	memcpy(text, "hide /", 6);
	memset(text + 6, 'a', PROFILE_LINE_MAX - 6);
	text[PROFILE_LINE_MAX] = '\0';
	bad(text, VERR_PROFILE_SYNTAX, "t:1: path longer than 4096 bytes");
	memcpy(text, "# ", 2);
	no_hide(text);
	text[0] = '\n';
	memcpy(text + 1, "# ", 2);
	memset(text + 3, 'a', PROFILE_LINE_MAX - 1);
	text[PROFILE_LINE_MAX + 2] = '\0';
	bad(text, VERR_TOO_LARGE, "t:2: line longer than");

	/* Exactly PROFILE_PATH_MAX bytes of path are allowed. */
	memcpy(text, "hide /", 6);
	memset(text + 6, 'b', PROFILE_PATH_MAX - 1);
	text[PROFILE_PATH_MAX + 5] = '\0';
	struct profile *p = ok(text);
	assert_int_equal(strlen(p->hide[0]), PROFILE_PATH_MAX);
	profile_free(p);

	/* File size: the limit counts, not the number of lines. */
	memset(text, '\n', PROFILE_FILE_MAX + 1);
	text[PROFILE_FILE_MAX + 1] = '\0';
	bad(text, VERR_TOO_LARGE, "t: larger than 65536 bytes");
	text[PROFILE_FILE_MAX] = '\0';
	no_hide(text);

	/* Directives. */
	n = 0;
	for (int i = 0; i <= PROFILE_DIRECTIVES_MAX; i++)
		n += (size_t)sprintf(text + n, "hide /d%d\n", i);
	bad(text, VERR_TOO_MANY, "t:513: more than 512 directives");
	text[n - strlen("hide /d512\n")] = '\0';
	p = ok(text);
	assert_int_equal(p->nhide, PROFILE_DIRECTIVES_MAX);
	profile_free(p);

	/* allow-host lines. */
	n = 0;
	for (int i = 0; i <= 32; i++)
		n += (size_t)sprintf(text + n, "allow-host h%d.example\n", i);
	bad(text, VERR_TOO_MANY, "t:33: more than 32 allow-host");
	free(text);
}

static void
test_load(void **state)
{
	struct profile *p = NULL;
	char err[512], path[256], want[300];

	(void)state;
	fixed_env();
	write_file("mine", "hide ~/.ssh\nallow-host example.com\n", 0644);
	assert_int_equal(load("mine", &p, err, sizeof(err)), 0);
	assert_string_equal(p->name, "mine");
	assert_string_equal(p->hide[0], "/home/alice/.ssh");
	profile_free(p);

	/* A value with '/' is a path; search_dir is not used. */
	snprintf(path, sizeof(path), "%s/mine", tmpdir);
	assert_int_equal(profile_load(path, NULL, &p, err, sizeof(err)), 0);
	assert_string_equal(p->name, "mine");
	profile_free(p);

	/* Errors name the file. */
	write_file("broken", "hide /a\n\nhid /b\n", 0644);
	assert_int_equal(load("broken", &p, err, sizeof(err)), VERR_PROFILE_SYNTAX);
	assert_null(p);
	snprintf(want, sizeof(want), "%s/broken:3: unknown directive 'hid'", tmpdir);
	assert_string_equal(err, want);

	assert_int_equal(load("missing", &p, err, sizeof(err)), VERR_PROFILE_NOT_FOUND);
	snprintf(want, sizeof(want), "%s/missing: no such profile", tmpdir);
	assert_string_equal(err, want);
	assert_int_equal(profile_load("/nonexistent/x", NULL, &p, err, sizeof(err)),
	                 VERR_PROFILE_NOT_FOUND);

	/* Names cannot walk out of the directory. */
	assert_int_equal(load("..", &p, err, sizeof(err)), VERR_PROFILE_NOT_FOUND);
	assert_non_null(strstr(err, "invalid profile name"));
	assert_int_equal(load(".hidden", &p, err, sizeof(err)), VERR_PROFILE_NOT_FOUND);
	assert_int_equal(load("", &p, err, sizeof(err)), VERR_PROFILE_NOT_FOUND);
	assert_int_equal(load("a b", &p, err, sizeof(err)), VERR_PROFILE_NOT_FOUND);
	assert_int_equal(profile_load("mine", NULL, &p, err, sizeof(err)), VERR_INVALID);

	/* Not a regular file: directories, and FIFOs (which must not hang). */
	snprintf(path, sizeof(path), "%s/dir", tmpdir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(load("dir", &p, err, sizeof(err)), VERR_PROFILE_NOT_FOUND);
	assert_non_null(strstr(err, "not a regular file"));
	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_int_equal(load("fifo", &p, err, sizeof(err)), VERR_PROFILE_NOT_FOUND);

	/* Anyone who can write the profile can weaken the sandbox. */
	write_file("loose", "hide /a\n", 0666);
	assert_int_equal(load("loose", &p, err, sizeof(err)), VERR_INSECURE_PATH);
	assert_non_null(strstr(err, "writable by others"));

	/* Oversized files are refused before parsing. */
	{
		char *big = malloc(PROFILE_FILE_MAX + 2);

		assert_non_null(big);
		memset(big, '#', PROFILE_FILE_MAX + 1);
		big[PROFILE_FILE_MAX + 1] = '\0';
		write_file("big", big, 0644);
		free(big);
	}
	assert_int_equal(load("big", &p, err, sizeof(err)), VERR_TOO_LARGE);
	assert_non_null(strstr(err, "larger than 65536 bytes"));

	/* Bad arguments. */
	assert_int_equal(profile_load("mine", tmpdir, NULL, err, sizeof(err)), VERR_INVALID);
	assert_int_equal(profile_load(NULL, tmpdir, &p, err, sizeof(err)), VERR_INVALID);
	assert_int_equal(profile_load("mine", tmpdir, &p, NULL, 0), 0);
	profile_free(p);
	assert_int_equal(profile_parse(NULL, 1, "t", &p, err, sizeof(err)), VERR_INVALID);
	assert_int_equal(profile_parse(NULL, 0, NULL, &p, NULL, 0), 0);
	assert_string_equal(p->name, "<profile>");
	profile_free(p);
}

static void
test_include(void **state)
{
	struct profile *p = NULL;
	char err[512], want[300];

	(void)state;
	fixed_env();
	write_file("base", "hide /base\nallow-host a.example\n", 0644);
	write_file("top", "include base\nhide /top\ninclude base\n", 0644);
	assert_int_equal(load("top", &p, err, sizeof(err)), 0);
	assert_string_equal(p->name, "top");
	assert_int_equal(p->nhide, 2);
	assert_string_equal(p->hide[0], "/base");
	assert_string_equal(p->hide[1], "/top");
	assert_int_equal(p->nallow, 1);
	profile_free(p);

	/* Cycles, direct and indirect. */
	write_file("self", "hide /x\ninclude self\n", 0644);
	assert_int_equal(load("self", &p, err, sizeof(err)), VERR_PROFILE_SYNTAX);
	snprintf(want, sizeof(want), "%s/self:2: include cycle", tmpdir);
	assert_non_null(strstr(err, want));
	write_file("ping", "include pong\n", 0644);
	write_file("pong", "\ninclude ping\n", 0644);
	assert_int_equal(load("ping", &p, err, sizeof(err)), VERR_PROFILE_SYNTAX);
	snprintf(want, sizeof(want), "%s/pong:2: include cycle", tmpdir);
	assert_non_null(strstr(err, want));

	/* Depth: 4 levels of include are fine, 5 are not. */
	write_file("d0", "hide /d0\n", 0644);
	write_file("d1", "include d0\n", 0644);
	write_file("d2", "include d1\n", 0644);
	write_file("d3", "include d2\n", 0644);
	write_file("d4", "include d3\n", 0644);
	write_file("d5", "include d4\n", 0644);
	assert_int_equal(load("d4", &p, err, sizeof(err)), 0);
	assert_string_equal(p->hide[0], "/d0");
	profile_free(p);
	assert_int_equal(load("d5", &p, err, sizeof(err)), VERR_PROFILE_SYNTAX);
	assert_non_null(strstr(err, "nested deeper than 4"));

	/* Names only, and missing ones are reported where they are included. */
	write_file("inc-path", "include ../etc/passwd\n", 0644);
	assert_int_equal(load("inc-path", &p, err, sizeof(err)), VERR_PROFILE_SYNTAX);
	assert_non_null(strstr(err, "inc-path:1: invalid profile name '../etc/passwd'"));
	write_file("inc-missing", "\n\ninclude nope\n", 0644);
	assert_int_equal(load("inc-missing", &p, err, sizeof(err)), VERR_PROFILE_NOT_FOUND);
	assert_non_null(strstr(err, "inc-missing:3: include"));
	assert_non_null(strstr(err, "no such profile"));

	/* An error inside an included file names that file and line. */
	write_file("inner-bad", "hide /ok\nhide relative\n", 0644);
	write_file("outer", "include inner-bad\n", 0644);
	assert_int_equal(load("outer", &p, err, sizeof(err)), VERR_PROFILE_SYNTAX);
	snprintf(want, sizeof(want), "%s/inner-bad:2: path 'relative' must be absolute", tmpdir);
	assert_non_null(strstr(err, want));

	/* Directive limit counts the included files too. */
	{
		char text[16 * 300];
		size_t n = 0;

		for (int i = 0; i < 300; i++)
			n += (size_t)sprintf(text + n, "hide /many%d\n", i);
		write_file("many", text, 0644);
	}
	write_file("twice", "include many\ninclude many\n", 0644);
	assert_int_equal(load("twice", &p, err, sizeof(err)), VERR_TOO_MANY);
}

static void
test_search_dir(void **state)
{
	(void)state;
	unsetenv(PROFILE_DIR_ENV);
	assert_string_equal(profile_search_dir("/usr/share/vrun/profiles"),
	                    "/usr/share/vrun/profiles");
	setenv(PROFILE_DIR_ENV, "relative", 1);
	assert_string_equal(profile_search_dir("/usr/share/vrun/profiles"),
	                    "/usr/share/vrun/profiles");
	setenv(PROFILE_DIR_ENV, "/src/profiles", 1);
	assert_string_equal(profile_search_dir("/usr/share/vrun/profiles"), "/src/profiles");
	unsetenv(PROFILE_DIR_ENV);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_parses),  cmocka_unit_test(test_directives),
	        cmocka_unit_test(test_syntax_errors), cmocka_unit_test(test_byte_errors),
	        cmocka_unit_test(test_paths),         cmocka_unit_test(test_expansion),
	        cmocka_unit_test(test_runtime),       cmocka_unit_test(test_dbus),
	        cmocka_unit_test(test_allow_host),    cmocka_unit_test(test_limits),
	        cmocka_unit_test(test_load),          cmocka_unit_test(test_include),
	        cmocka_unit_test(test_search_dir),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
