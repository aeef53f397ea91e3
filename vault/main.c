/*
 * vault: the person's command for the encrypted key store.
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "cliopt.h"
#include "hostspec.h"
#include "passphrase.h"
#include "paths.h"
#include "safefile.h"
#include "secbuf.h"
#include "vault.h"
#include "vaultfmt.h"
#include "verr.h"

#ifndef VRUN_VERSION
#define VRUN_VERSION "0.0.0"
#endif

#define EXIT_USAGE 2

static const char usage_text[] =
        "usage: vault COMMAND [ARGS]\n"
        "\n"
        "Keep API keys in an encrypted vault, each bound to the hosts that may receive it.\n"
        "\n"
        "commands:\n"
        "  init [--kdf COST]       create the vault (asks for a new passphrase twice)\n"
        "  add NAME [--host HOST[:PORT]]... [--inject MODE] [--env VAR] [--ca FILE]\n"
        "      [--allow-http]      store a key; the secret is read without echo from the\n"
        "                          terminal, or all of stdin when stdin is not a terminal\n"
        "  list [--json]           names, hosts and options of all keys (never secrets)\n"
        "  show NAME [--json]      details of one key (never the secret)\n"
        "  rm NAME                 delete a key\n"
        "  passwd [--kdf COST]     change the passphrase\n"
        "  audit [--session ID] [--key NAME] [--since WHEN] [--denied] [-n N | --all]\n"
        "        [--json] [--follow]\n"
        "                          show the audit log vproxy writes (no passphrase needed):\n"
        "                          the table shows the last 50 matching records\n"
        "  audit --summary [...]   one line per session\n"
        "  audit verify            check that no audit record was edited, removed, reordered\n"
        "                          or forged (asks for the passphrase)\n"
        "  doctor [-v]             check files, permissions, vproxy and the sandbox\n"
        "                          (runs `vrun --check`); no passphrase needed\n"
        "  help [COMMAND]          this help, or one command's (also `vault COMMAND --help`)\n"
        "\n"
        "add, list, show, rm, passwd and audit verify ask for the vault passphrase on the\n"
        "terminal (or read VAULT_PASSPHRASE_FILE). Commands that change the vault confirm\n"
        "in one line on stderr; stdout carries only what was asked for.\n"
        "\n"
        "add options:\n"
        "  --host HOST[:PORT]      host allowed to receive the key; repeatable; port 443 by\n"
        "                          default; *.example.com matches subdomains only. Asked for\n"
        "                          when missing on a terminal, required otherwise.\n"
        "  --inject MODE           placeholder (default), bearer, basic:USER, header:NAME,\n"
        "                          query:PARAM\n"
        "  --env VAR               variable that carries the placeholder (default: NAME in\n"
        "                          upper case, other characters turned into '_')\n"
        "  --ca FILE               extra PEM CA bundle trusted for this key's hosts\n"
        "  --allow-http            permit injection over plain HTTP to these hosts\n"
        "\n"
        "  --kdf COST              Argon2id cost: interactive, moderate (default), sensitive\n"
        "\n"
        "audit options (filters combine):\n"
        "  --session ID            sessions whose id starts with ID\n"
        "  --key NAME              records that involve key NAME\n"
        "  --since WHEN            records since a time ago (30s, 15m, 2h, 7d) or since an\n"
        "                          RFC 3339 time (2026-11-29T10:00:00Z) or date (2026-11-29)\n"
        "  --denied                denied requests only\n"
        "  -n, --limit N           the last N matching records (default 50; with --json,\n"
        "                          all unless given); with --summary, the last N sessions\n"
        "  --all                   every matching record\n"
        "  --json                  matching records as stored (JSON Lines); with --summary,\n"
        "                          one JSON object per session\n"
        "  --follow                the last records, then each one as it is appended\n"
        "  --summary               per session: start, requests, denied, bytes, hosts, command\n"
        "\n"
        "environment:\n"
        "  VAULT_HOME              where vault.db lives (default ~/.local/share/vrun)\n"
        "  VAULT_PASSPHRASE_FILE   read the passphrase from this file's first line\n"
        "  VAULT_NEW_PASSPHRASE_FILE  the new passphrase for init and passwd\n"
        "  NO_COLOR                when set and not empty, never colour (audit, doctor)\n"
        "\n"
        "exit status: 0 success, 1 failure, 2 usage error. More in vault(1).\n";

/* One entry per command: `vault COMMAND --help` and `vault help COMMAND`. */
static const struct {
	const char *name, *text;
} command_help[] = {
        {"init", "usage: vault init [--kdf interactive|moderate|sensitive]\n"
                 "\n"
                 "Create the vault in $VAULT_HOME (default ~/.local/share/vrun). Asks for a\n"
                 "new passphrase twice, or reads the first line of $VAULT_NEW_PASSPHRASE_FILE\n"
                 "(else $VAULT_PASSPHRASE_FILE). Fails if a vault exists.\n"
                 "\n"
                 "  --kdf COST    Argon2id cost: interactive, moderate (default), sensitive\n"
                 "  -h, --help    this help\n"},
        {"add", "usage: vault add NAME [--host HOST[:PORT]]... [--inject MODE] [--env VAR]\n"
                "                [--ca FILE] [--allow-http]\n"
                "\n"
                "Store a key, bound to the hosts that may receive it. The secret is read\n"
                "without echo from the terminal, or as all of stdin when stdin is not a\n"
                "terminal (one trailing newline stripped):  echo \"$TOKEN\" | vault add ...\n"
                "Asks for the vault passphrase on the terminal (or reads\n"
                "VAULT_PASSPHRASE_FILE), also when the secret comes from stdin.\n"
                "\n"
                "  --host HOST[:PORT]  host allowed to receive the key; repeatable; port 443\n"
                "                      by default; *.example.com matches subdomains only.\n"
                "                      Asked for on a terminal, required otherwise.\n"
                "  --inject MODE       placeholder (default), bearer, basic:USER, header:NAME,\n"
                "                      query:PARAM\n"
                "  --env VAR           variable that carries the placeholder (default: NAME\n"
                "                      upper-cased, other characters turned into '_')\n"
                "  --ca FILE           extra PEM CA bundle trusted for this key's hosts\n"
                "  --allow-http        permit injection over plain HTTP to these hosts\n"
                "  -h, --help          this help\n"},
        {"list", "usage: vault list [--json]\n"
                 "\n"
                 "Names, hosts and options of all keys; never secrets. Asks for the passphrase\n"
                 "(or reads VAULT_PASSPHRASE_FILE).\n"
                 "\n"
                 "  --json        a JSON array, one object per key\n"
                 "  -h, --help    this help\n"},
        {"show", "usage: vault show NAME [--json]\n"
                 "\n"
                 "Details of one key: hosts, injection, variable, dates, the secret's length;\n"
                 "never the secret. Asks for the passphrase (or reads VAULT_PASSPHRASE_FILE).\n"
                 "\n"
                 "  --json        one JSON object\n"
                 "  -h, --help    this help\n"},
        {"rm", "usage: vault rm NAME\n"
               "\n"
               "Delete a key. A running vproxy stops offering it from the next session on.\n"
               "Asks for the passphrase (or reads VAULT_PASSPHRASE_FILE).\n"
               "\n"
               "  -h, --help    this help\n"},
        {"passwd", "usage: vault passwd [--kdf interactive|moderate|sensitive]\n"
                   "\n"
                   "Change the passphrase (new one from the terminal, twice, or the first line\n"
                   "of $VAULT_NEW_PASSPHRASE_FILE). Restart vproxy afterwards.\n"
                   "\n"
                   "  --kdf COST    Argon2id cost for the new passphrase (default: keep)\n"
                   "  -h, --help    this help\n"},
        {"audit", "usage: vault audit [--session ID] [--key NAME] [--since WHEN] [--denied]\n"
                  "                   [-n N | --all] [--json] [--follow | --summary]\n"
                  "       vault audit verify\n"
                  "\n"
                  "Show the audit log vproxy writes: one record per session start and end and\n"
                  "per request; every row names its session's command. The table shows the\n"
                  "last 50 matching records (sessions, with --summary). Needs no passphrase.\n"
                  "Filters combine, and apply before -n.\n"
                  "\n"
                  "  --session ID  sessions whose id starts with ID\n"
                  "  --key NAME    records that involve key NAME\n"
                  "  --since WHEN  since a time ago (30s, 15m, 2h, 7d) or since an RFC 3339\n"
                  "                time (2026-11-29T10:00:00Z) or date (2026-11-29)\n"
                  "  --denied      denied requests only\n"
                  "  -n, --limit N the last N matching records (default 50 in the table;\n"
                  "                --json prints all unless -n is given); with --summary,\n"
                  "                the last N sessions\n"
                  "  --all         every matching record\n"
                  "  --json        matching records exactly as stored (JSON Lines); with\n"
                  "                --summary, one JSON object per session instead\n"
                  "  --follow      the last records, then each new one as it is appended\n"
                  "                (Ctrl-C stops)\n"
                  "  --summary     one line per session: requests, denied, bytes, hosts\n"
                  "  -h, --help    this help\n"
                  "\n"
                  "`vault audit verify` checks the hash chain and HMACs (see its --help).\n"},
        {"audit verify", "usage: vault audit verify\n"
                         "\n"
                         "Check that no audit record was edited, removed, reordered, inserted or\n"
                         "forged. Asks for the passphrase (the HMAC key is in the vault). Exit 0\n"
                         "when intact; else 1 and the first bad record as audit.log:LINE.\n"
                         "Takes no filters: it always checks the whole log.\n"
                         "\n"
                         "  -h, --help    this help\n"},
        {"doctor", "usage: vault doctor [-v]\n"
                   "\n"
                   "Check the installation before relying on it: the vault directory and files\n"
                   "and their permissions, the audit log, vproxy's files, then the containment\n"
                   "probes of `vrun --check` (user namespaces, loopback-only network, masks,\n"
                   "seccomp, Landlock, the proxy, the CA bundle). One ok/FAIL line per check;\n"
                   "exit 1 when any fails. Needs no passphrase; with VAULT_PASSPHRASE_FILE set\n"
                   "it also verifies the audit chain.\n"
                   "\n"
                   "  -v, --verbose  more detail (passed on to `vrun --check`)\n"
                   "  -h, --help     this help\n"},
        {"help", "usage: vault help [COMMAND]\n"},
};

/* The command being run, for the help hint of a usage error. */
static const char *current_cmd;

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("vault: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (current_cmd != NULL)
		fprintf(stderr, "\nTry `vault %s --help`.\n", current_cmd);
	else
		fputs("\nTry `vault --help`.\n", stderr);
}

/* What getopt_exact refused: the typed option and the one it abbreviates. */
static struct cliopt_abbrev abbrev;

static int
getopt_exact(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	return cliopt_getopt(argc, argv, shortopts, longopts, &abbrev);
}

/* getopt's '?' (unknown option) or ':' (missing value), with opterr = 0. */
static void
bad_option(const char *cmd, int c, char **argv)
{
	const char *arg = argv[optind - 1];

	if (abbrev.typed != NULL)
		usage_error("%s: option '%.*s' is abbreviated: write '--%s'", cmd,
		            (int)strcspn(abbrev.typed, "="), abbrev.typed, abbrev.full);
	else if (c == ':')
		usage_error("%s: option '%s' needs a value", cmd, arg);
	else if (optopt != 0 && strncmp(arg, "--", 2) != 0)
		usage_error("%s: bad option '-%c'", cmd, optopt);
	else
		usage_error("%s: bad option '%s'", cmd, arg);
}

/* Report r; for system errors, errno and the object involved. */
static int
fail(int r, const char *what)
{
	int saved = errno;

	if (r == VERR_SYSTEM)
		fprintf(stderr, "vault: %s: %s\n", what, strerror(saved));
	else
		fprintf(stderr, "vault: %s: %s\n", what, verr_strerror(r));
	return EXIT_FAILURE;
}

/* Colour only on a terminal, and never when NO_COLOR is set to something (no-color.org). */
static int
use_color(void)
{
	const char *nc = getenv("NO_COLOR");

	return (nc == NULL || nc[0] == '\0') && isatty(STDOUT_FILENO);
}

/* Output that did not reach its destination is a failure, not a success. */
static int
finish_stdout(void)
{
	if (fflush(stdout) != 0 || ferror(stdout))
		return fail(VERR_SYSTEM, "stdout");
	return EXIT_SUCCESS;
}

static int
print_usage(void)
{
	fputs(usage_text, stdout);
	return finish_stdout();
}

/* Help for one command ("audit verify" included); the overview for NULL. */
static int
print_help(const char *cmd)
{
	if (cmd == NULL)
		return print_usage();
	for (size_t i = 0; i < sizeof(command_help) / sizeof(command_help[0]); i++)
		if (strcmp(command_help[i].name, cmd) == 0) {
			fputs(command_help[i].text, stdout);
			return finish_stdout();
		}
	usage_error("help: no command '%s'", cmd);
	return EXIT_USAGE;
}

static int
load_paths(struct paths *p)
{
	int r = paths_resolve(p);

	if (r != 0)
		fail(r, "VAULT_HOME");
	return r;
}

static int
get_passphrase(struct secbuf **pass)
{
	int r = passphrase_get("VAULT_PASSPHRASE_FILE", "Vault passphrase: ", 0, pass);

	if (r != 0)
		fail(r, "passphrase");
	return r;
}

static int
open_vault(const struct paths *p, int mode, struct vault **v)
{
	struct secbuf *pass = NULL;
	struct stat st;
	int r;

	*v = NULL;
	/* Say "no vault" before asking for a passphrase that cannot help. */
	if (lstat(p->db, &st) != 0 && errno == ENOENT) {
		fail(VERR_VAULT_MISSING, p->home);
		return VERR_VAULT_MISSING;
	}
	if ((r = get_passphrase(&pass)) != 0)
		return r;
	r = vault_open(p, pass, mode, v);
	secbuf_free(pass);
	if (r != 0)
		fail(r, r == VERR_SYSTEM || r == VERR_INSECURE_PATH ? p->db : "open");
	return r;
}

static int
parse_kdf(const char *arg, struct vault_kdf *kdf)
{
	if (vault_kdf_named(arg, kdf) != 0) {
		usage_error("--kdf: expected interactive, moderate or sensitive, not '%s'", arg);
		return -1;
	}
	return 0;
}

static void
format_time(int64_t t, char *buf, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, size, "%lld", (long long)t);
}

/* ---- init / passwd ---- */

static int
kdf_only_opts(int argc, char **argv, struct vault_kdf *kdf, const char *cmd)
{
	static const struct option opts[] = {{"kdf", required_argument, NULL, 'k'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_exact(argc, argv, "+:h", opts)) != -1) {
		switch (c) {
		case 'k':
			if (parse_kdf(optarg, kdf) != 0)
				return EXIT_USAGE;
			break;
		case 'h':
			return print_help(cmd);
		default:
			bad_option(cmd, c, argv);
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		usage_error("%s: unexpected argument '%s'", cmd, argv[optind]);
		return EXIT_USAGE;
	}
	return -1;
}

static int
cmd_init(int argc, char **argv)
{
	struct vault_kdf kdf;
	struct paths p = {0};
	struct secbuf *pass = NULL;
	struct vault *v = NULL;
	struct stat st;
	const char *var;
	int r, ret = EXIT_FAILURE;

	vault_kdf_named(NULL, &kdf);
	if ((r = kdf_only_opts(argc, argv, &kdf, "init")) >= 0)
		return r;
	if (load_paths(&p) != 0)
		goto out;
	if (lstat(p.db, &st) == 0) {
		fail(VERR_VAULT_EXISTS, p.db);
		goto out;
	}
	/* A new vault's passphrase may come from either file variable. */
	var = getenv("VAULT_NEW_PASSPHRASE_FILE") != NULL ? "VAULT_NEW_PASSPHRASE_FILE"
	                                                  : "VAULT_PASSPHRASE_FILE";
	if ((r = passphrase_get(var, "New vault passphrase: ", 1, &pass)) != 0) {
		fail(r, "passphrase");
		goto out;
	}
	if ((r = vault_create(&p, pass, &kdf, &v)) != 0) {
		fail(r, r == VERR_SYSTEM || r == VERR_INSECURE_PATH ? p.home : "init");
		goto out;
	}
	fprintf(stderr, "vault: created %s\n", p.db);
	ret = EXIT_SUCCESS;
out:
	vault_close(v);
	secbuf_free(pass);
	paths_clear(&p);
	return ret;
}

static int
cmd_passwd(int argc, char **argv)
{
	struct vault_kdf kdf = {0, 0};
	struct paths p = {0};
	struct secbuf *pass = NULL;
	struct vault *v = NULL;
	int r, ret = EXIT_FAILURE;

	if ((r = kdf_only_opts(argc, argv, &kdf, "passwd")) >= 0)
		return r;
	if (load_paths(&p) != 0 || open_vault(&p, VAULT_WRITE, &v) != 0)
		goto out;
	if (kdf.opslimit == 0)
		kdf = *vault_kdf(v);
	if ((r = passphrase_get("VAULT_NEW_PASSPHRASE_FILE", "New vault passphrase: ", 1, &pass)) !=
	    0) {
		fail(r, "new passphrase");
		goto out;
	}
	if ((r = vault_rekey(v, pass, &kdf)) != 0) {
		fail(r, r == VERR_SYSTEM ? p.db : "passwd");
		goto out;
	}
	fprintf(stderr, "vault: passphrase changed\n");
	ret = EXIT_SUCCESS;
out:
	vault_close(v);
	secbuf_free(pass);
	paths_clear(&p);
	return ret;
}

/* ---- add ---- */

/*
 * A URL where a host belongs ("https://api.example.com/v1") would otherwise
 * be refused as a bad port; say what to type instead.
 */
static int
refuse_url(const char *arg)
{
	const char *sep = strstr(arg, "://"), *auth, *at, *bracket, *colon;
	size_t n;
	int http, port;

	if (sep == NULL)
		return 0;
	auth = sep + 3;
	n = strcspn(auth, "/?#");
	if ((at = memchr(auth, '@', n)) != NULL) {
		n -= (size_t)(at + 1 - auth);
		auth = at + 1;
	}
	if (n == 0) {
		usage_error("add: --host '%s': give a host name, not a URL", arg);
		return -1;
	}
	http = sep - arg == 4 && strncasecmp(arg, "http", 4) == 0;
	bracket = memchr(auth, ']', n);
	colon = memchr(bracket != NULL ? bracket : auth, ':',
	               n - (size_t)((bracket != NULL ? bracket : auth) - auth));
	port = colon != NULL;
	/* Not the argument itself: a URL may carry user:token@ before the host. */
	usage_error("add: --host: give a host name, not a URL: --host %.*s%s%s", (int)n, auth,
	            http && !port ? ":80" : "",
	            http ? " (and --allow-http to inject over plain HTTP)" : "");
	return -1;
}

static int
add_host(struct vault_entry *e, const char *arg)
{
	int r;

	if (refuse_url(arg) != 0)
		return -1;
	if (e->nhosts >= VAULT_HOSTS_MAX) {
		usage_error("add: at most %d --host values", VAULT_HOSTS_MAX);
		return -1;
	}
	if ((r = hostspec_parse(arg, strlen(arg), HOSTSPEC_ALLOW_WILDCARD, &e->hosts[e->nhosts])) !=
	    0) {
		usage_error("add: --host '%s': %s", arg, verr_strerror(r));
		return -1;
	}
	for (size_t i = 0; i < e->nhosts; i++)
		if (memcmp(&e->hosts[i], &e->hosts[e->nhosts], sizeof(e->hosts[i])) == 0)
			return 0; /* duplicate: keep one */
	e->nhosts++;
	return 0;
}

static int
read_ca_file(struct vault_entry *e, const char *path)
{
	unsigned char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd, r;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0) {
		fprintf(stderr, "vault: --ca %s: %s\n", path, strerror(errno));
		return -1;
	}
	if ((buf = malloc(VAULT_CA_MAX + 1)) == NULL) {
		close(fd);
		return fail(VERR_NOMEM, "--ca"), -1;
	}
	while (len <= VAULT_CA_MAX) {
		n = read(fd, buf + len, VAULT_CA_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (n < 0) {
		fprintf(stderr, "vault: --ca %s: %s\n", path, strerror(errno));
		free(buf);
		return -1;
	}
	if ((r = vault_check_ca(buf, len)) != 0) {
		fprintf(stderr, "vault: --ca %s: %s\n", path,
		        len > VAULT_CA_MAX ? "larger than 256 KiB" : verr_strerror(r));
		free(buf);
		return -1;
	}
	e->ca = buf;
	e->ca_len = len;
	return 0;
}

/* Ask on the terminal for the hosts of an entry given without --host. */
static int
ask_hosts(struct vault_entry *e)
{
	struct secbuf *line = NULL;
	char *copy, *tok, *save = NULL;
	int r;

	r = passphrase_tty("Hosts that may receive this key (HOST[:PORT], space-separated): ", 1024,
	                   1, &line);
	if (r != 0) {
		fail(r, "host");
		return -1;
	}
	if ((copy = strndup((const char *)line->data, line->len)) == NULL) {
		secbuf_free(line);
		return fail(VERR_NOMEM, "host"), -1;
	}
	secbuf_free(line);
	r = 0;
	for (tok = strtok_r(copy, " \t,", &save); tok != NULL && r == 0;
	     tok = strtok_r(NULL, " \t,", &save))
		r = add_host(e, tok);
	free(copy);
	if (r == 0 && e->nhosts == 0) {
		usage_error("add: no host given");
		r = -1;
	}
	return r;
}

/* All of stdin into secret memory, one trailing newline stripped. */
static int
read_secret_stdin(struct secbuf **out)
{
	struct secbuf *b = NULL;
	ssize_t n;
	int r;

	*out = NULL;
	/* Room for the limit, a newline, and one byte to detect overflow. */
	if ((r = secbuf_new(VAULT_SECRET_MAX + 2, &b)) != 0)
		return r;
	for (;;) {
		if (b->len == b->cap) {
			secbuf_free(b);
			return VERR_TOO_LARGE;
		}
		n = read(STDIN_FILENO, b->data + b->len, b->cap - b->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			secbuf_free(b);
			return VERR_SYSTEM;
		}
		if (n == 0)
			break;
		b->len += (size_t)n;
	}
	if (b->len > 0 && b->data[b->len - 1] == '\n')
		b->data[--b->len] = 0;
	*out = b;
	return VERR_OK;
}

static int
cmd_add(int argc, char **argv)
{
	static const struct option opts[] = {{"host", required_argument, NULL, 'H'},
	                                     {"inject", required_argument, NULL, 'i'},
	                                     {"env", required_argument, NULL, 'e'},
	                                     {"ca", required_argument, NULL, 'c'},
	                                     {"allow-http", no_argument, NULL, 'a'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	struct vault_entry *e = NULL;
	const struct vault_entry *other;
	struct paths p = {0};
	struct vault *v = NULL;
	const char *env = NULL, *inject = NULL, *ca = NULL;
	int c, r, ret = EXIT_USAGE, tty_in = isatty(STDIN_FILENO);

	if (vault_entry_new(&e) != 0)
		return fail(VERR_NOMEM, "add");
	while ((c = getopt_exact(argc, argv, ":h", opts)) != -1) {
		switch (c) {
		case 'H':
			if (add_host(e, optarg) != 0)
				goto out;
			break;
		case 'i':
			inject = optarg;
			break;
		case 'e':
			env = optarg;
			break;
		case 'c':
			ca = optarg;
			break;
		case 'a':
			e->allow_http = 1;
			break;
		case 'h':
			ret = print_help("add");
			goto out;
		default:
			bad_option("add", c, argv);
			goto out;
		}
	}
	if (optind + 1 != argc) {
		usage_error(optind == argc ? "add: missing NAME" : "add: unexpected argument '%s'",
		            argv[optind + 1 < argc ? optind + 1 : 0]);
		goto out;
	}
	if ((r = vault_check_name(argv[optind])) != 0) {
		usage_error("add: '%s': %s", argv[optind], verr_strerror(r));
		goto out;
	}
	strcpy(e->name, argv[optind]);
	if (inject != NULL && (r = vault_parse_inject(inject, &e->inject, e->inject_arg,
	                                              sizeof(e->inject_arg))) != 0) {
		usage_error("add: --inject '%s': %s", inject, verr_strerror(r));
		goto out;
	}
	if (env != NULL) {
		if (strlen(env) >= sizeof(e->env) || (r = vault_check_env(env)) != 0) {
			usage_error(
			        "add: --env '%s': %s", env,
			        verr_strerror(strlen(env) >= sizeof(e->env) ? VERR_ENV_NAME : r));
			goto out;
		}
		strcpy(e->env, env);
	} else if ((r = vault_default_env(e->name, e->env, sizeof(e->env))) != 0) {
		usage_error("add: the default variable '%s' for '%s': %s", e->env, e->name,
		            verr_strerror(r));
		goto out;
	}
	ret = EXIT_FAILURE;
	if (ca != NULL && read_ca_file(e, ca) != 0)
		goto out;
	if (e->nhosts == 0) {
		if (!tty_in) {
			usage_error("add: --host is required when stdin is not a terminal");
			ret = EXIT_USAGE;
			goto out;
		}
		if (ask_hosts(e) != 0)
			goto out;
	}
	if (load_paths(&p) != 0 || open_vault(&p, VAULT_WRITE, &v) != 0)
		goto out;
	/* Refuse clashes before the person types or pipes the secret in. */
	if (vault_find(v, e->name, &other) == 0) {
		fail(VERR_KEY_EXISTS, e->name);
		goto out;
	}
	for (size_t i = 0; i < vault_count(v); i++)
		if (strcmp(vault_entry_at(v, i)->env, e->env) == 0) {
			fprintf(stderr,
			        "vault: %s: key '%s' already uses it: choose another with --env\n",
			        e->env, vault_entry_at(v, i)->name);
			goto out;
		}
	if (tty_in)
		r = passphrase_tty("Secret (input hidden): ", VAULT_SECRET_MAX + 1, 0, &e->secret);
	else
		r = read_secret_stdin(&e->secret);
	if (r != 0) {
		fail(r, r == VERR_TOO_LARGE ? "secret (at most 16384 bytes)" : "secret");
		goto out;
	}
	if ((r = vault_check_secret(e->secret)) != 0) {
		fail(r, r == VERR_TOO_LARGE ? "secret (at most 16384 bytes)" : "secret");
		goto out;
	}
	if ((r = vault_add(v, &e)) != 0) {
		fail(r, "add");
		goto out;
	}
	if ((r = vault_save(v)) != 0) {
		fail(r, r == VERR_SYSTEM ? p.db : "save");
		goto out;
	}
	fprintf(stderr, "vault: added '%s'\n", argv[optind]);
	ret = EXIT_SUCCESS;
out:
	vault_entry_free(e);
	vault_close(v);
	paths_clear(&p);
	return ret;
}

/* ---- list / show ---- */

static json_t *
entry_json(const struct vault_entry *e)
{
	json_t *o = json_object(), *hosts = json_array();
	char buf[HOSTSPEC_NAME_MAX + VAULT_INJECT_ARG_MAX + 16];

	for (size_t i = 0; i < e->nhosts; i++) {
		hostspec_format(&e->hosts[i], buf, sizeof(buf));
		json_array_append_new(hosts, json_string(buf));
	}
	json_object_set_new(o, "name", json_string(e->name));
	json_object_set_new(o, "hosts", hosts);
	vault_format_inject(e->inject, e->inject_arg, buf, sizeof(buf));
	json_object_set_new(o, "inject", json_string(buf));
	json_object_set_new(o, "env", json_string(e->env));
	json_object_set_new(o, "allow_http", json_boolean(e->allow_http));
	json_object_set_new(o, "ca", json_boolean(e->ca_len > 0));
	format_time(e->created, buf, sizeof(buf));
	json_object_set_new(o, "created", json_string(buf));
	format_time(e->changed, buf, sizeof(buf));
	json_object_set_new(o, "changed", json_string(buf));
	return o;
}

static int
print_json(json_t *j)
{
	int r = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

	json_decref(j);
	if (r != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
		return fail(VERR_SYSTEM, "stdout");
	return EXIT_SUCCESS;
}

static void
hosts_text(const struct vault_entry *e, char *buf, size_t size)
{
	size_t off = 0;
	char one[HOSTSPEC_NAME_MAX + 16];

	buf[0] = '\0';
	for (size_t i = 0; i < e->nhosts && off + 1 < size; i++) {
		hostspec_format(&e->hosts[i], one, sizeof(one));
		off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? "," : "", one);
	}
}

static int
json_only_opts(int argc, char **argv, int *json, int nargs, const char *cmd)
{
	static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	int c;

	*json = 0;
	while ((c = getopt_exact(argc, argv, ":h", opts)) != -1) {
		switch (c) {
		case 'j':
			*json = 1;
			break;
		case 'h':
			return print_help(cmd);
		default:
			bad_option(cmd, c, argv);
			return EXIT_USAGE;
		}
	}
	if (argc - optind > nargs) {
		usage_error(nargs ? "%s: expected one NAME, not also '%s'"
		                  : "%s: unexpected argument '%s'",
		            cmd, argv[optind + nargs]);
		return EXIT_USAGE;
	}
	if (argc - optind < nargs) {
		usage_error("%s: expected one NAME", cmd);
		return EXIT_USAGE;
	}
	return -1;
}

static int
cmd_list(int argc, char **argv)
{
	struct paths p = {0};
	struct vault *v = NULL;
	char hosts[VAULT_HOSTS_MAX * (HOSTSPEC_NAME_MAX + 8)], inj[VAULT_INJECT_ARG_MAX + 16];
	int json, r, ret = EXIT_FAILURE;

	if ((r = json_only_opts(argc, argv, &json, 0, "list")) >= 0)
		return r;
	if (load_paths(&p) != 0 || open_vault(&p, VAULT_READ, &v) != 0)
		goto out;
	if (json) {
		json_t *a = json_array();

		for (size_t i = 0; i < vault_count(v); i++)
			json_array_append_new(a, entry_json(vault_entry_at(v, i)));
		ret = print_json(a);
		goto out;
	}
	if (vault_count(v) == 0) {
		fprintf(stderr, "vault: no keys yet: add one with `vault add NAME --host HOST`\n");
		ret = EXIT_SUCCESS;
		goto out;
	}
	printf("%-20s %-14s %-20s %s\n", "NAME", "INJECT", "ENV", "HOSTS");
	for (size_t i = 0; i < vault_count(v); i++) {
		const struct vault_entry *e = vault_entry_at(v, i);

		hosts_text(e, hosts, sizeof(hosts));
		vault_format_inject(e->inject, e->inject_arg, inj, sizeof(inj));
		printf("%-20s %-14s %-20s %s%s\n", e->name, inj, e->env, hosts,
		       e->allow_http ? " (http allowed)" : "");
	}
	ret = finish_stdout();
out:
	vault_close(v);
	paths_clear(&p);
	return ret;
}

static int
cmd_show(int argc, char **argv)
{
	struct paths p = {0};
	struct vault *v = NULL;
	const struct vault_entry *e;
	char buf[VAULT_HOSTS_MAX * (HOSTSPEC_NAME_MAX + 8)];
	int json, r, ret = EXIT_FAILURE;

	if ((r = json_only_opts(argc, argv, &json, 1, "show")) >= 0)
		return r;
	if (load_paths(&p) != 0 || open_vault(&p, VAULT_READ, &v) != 0)
		goto out;
	if ((r = vault_find(v, argv[optind], &e)) != 0) {
		fail(r, argv[optind]);
		goto out;
	}
	if (json) {
		ret = print_json(entry_json(e));
		goto out;
	}
	printf("name:       %s\n", e->name);
	for (size_t i = 0; i < e->nhosts; i++) {
		hostspec_format(&e->hosts[i], buf, sizeof(buf));
		printf("host:       %s\n", buf);
	}
	vault_format_inject(e->inject, e->inject_arg, buf, sizeof(buf));
	printf("inject:     %s\n", buf);
	printf("env:        %s\n", e->env);
	printf("allow-http: %s\n", e->allow_http ? "yes" : "no");
	printf("ca:         %s\n", e->ca_len > 0 ? "extra CA bundle stored" : "system roots only");
	printf("secret:     %zu bytes (never shown)\n", e->secret->len);
	format_time(e->created, buf, sizeof(buf));
	printf("created:    %s\n", buf);
	format_time(e->changed, buf, sizeof(buf));
	printf("changed:    %s\n", buf);
	ret = finish_stdout();
out:
	vault_close(v);
	paths_clear(&p);
	return ret;
}

static int
cmd_rm(int argc, char **argv)
{
	struct paths p = {0};
	struct vault *v = NULL;
	int json, r, ret = EXIT_FAILURE;

	if ((r = json_only_opts(argc, argv, &json, 1, "rm")) >= 0)
		return r;
	if (json) {
		usage_error("rm: --json is not an option of rm");
		return EXIT_USAGE;
	}
	if (load_paths(&p) != 0 || open_vault(&p, VAULT_WRITE, &v) != 0)
		goto out;
	if ((r = vault_remove(v, argv[optind])) != 0) {
		fail(r, argv[optind]);
		goto out;
	}
	if ((r = vault_save(v)) != 0) {
		fail(r, r == VERR_SYSTEM ? p.db : "save");
		goto out;
	}
	fprintf(stderr, "vault: removed '%s'\n", argv[optind]);
	ret = EXIT_SUCCESS;
out:
	vault_close(v);
	paths_clear(&p);
	return ret;
}

/* ---- audit ---- */

struct audit_filter {
	const char *session; /* id prefix */
	const char *key;
	int has_since;
	int64_t since_ms;
	int denied;
};

/* The table's default: the last records, not a whole day's scroll. */
#define AUDIT_DEFAULT_LIMIT 50
#define AUDIT_LIMIT_MAX     100000000
#define AUDIT_CMD_WIDTH     16

/* A matching record held back until we know it is among the last N. */
struct audit_kept {
	json_t *rec;
	char *raw; /* --json: the line as stored */
	size_t len;
};

struct audit_view {
	int json, summary, color;
	uint64_t shown, malformed, matched;
	uint64_t limit;          /* show the last `limit` matching records (sessions); 0: all */
	int holding;             /* keep matches in `kept` instead of printing them */
	struct audit_kept *kept; /* ring of the last matches: `nkept` from `head` */
	size_t capkept, nkept, head;
	json_t *commands; /* table: session id -> its command, from session_start */
	json_t *sessions; /* --summary: id -> aggregate */
	json_t *order;    /* --summary: ids in order of first appearance */
};

/* A duration ago (30s, 15m, 2h, 7d, 1w), an RFC 3339 time, or a date. */
static int
parse_since(const char *arg, int64_t *ms)
{
	static const struct {
		char unit;
		int64_t ms;
	} units[] = {{'s', 1000}, {'m', 60000}, {'h', 3600000}, {'d', 86400000}, {'w', 604800000}};
	struct timespec now;
	unsigned long long n;
	char *end, buf[32];

	if (arg[0] >= '0' && arg[0] <= '9') {
		errno = 0;
		n = strtoull(arg, &end, 10);
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (errno == 0 && end[0] == units[i].unit && end[1] == '\0') {
				if (n > (unsigned long long)(INT64_MAX / units[i].ms))
					return -1;
				clock_gettime(CLOCK_REALTIME, &now);
				*ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 -
				      (int64_t)n * units[i].ms;
				return 0;
			}
	}
	if (strlen(arg) == 10) {
		snprintf(buf, sizeof(buf), "%sT00:00:00Z", arg);
		return audit_parse_time(buf, ms) == 0 ? 0 : -1;
	}
	return audit_parse_time(arg, ms) == 0 ? 0 : -1;
}

static const char *
jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int
record_matches(json_t *rec, const struct audit_filter *f)
{
	const char *s;
	int64_t t;

	if (f->session != NULL &&
	    ((s = jstr(rec, "session")) == NULL || strncmp(s, f->session, strlen(f->session)) != 0))
		return 0;
	if (f->key != NULL) {
		json_t *keys = json_object_get(rec, "keys"), *k;
		size_t i;
		int hit = (s = jstr(rec, "key")) != NULL && strcmp(s, f->key) == 0;

		json_array_foreach(keys, i, k) hit |=
		        json_is_string(k) && strcmp(json_string_value(k), f->key) == 0;
		if (!hit)
			return 0;
	}
	if (f->has_since &&
	    ((s = jstr(rec, "time")) == NULL || audit_parse_time(s, &t) != 0 || t < f->since_ms))
		return 0;
	if (f->denied && ((s = jstr(rec, "decision")) == NULL || strcmp(s, "denied") != 0))
		return 0;
	return 1;
}

/*
 * Print untrusted text (the command and paths come from the sandboxed side)
 * with C0/C1 controls and DEL as '?', so a record cannot drive the terminal;
 * pad to width characters.
 */
static void
put_text(const char *s, size_t max, int width)
{
	const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
	int n = 0;

	for (size_t i = 0; p[i] != '\0' && i < max; i++) {
		if (p[i] == 0xC2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F) {
			putchar('?');
			i++;
		} else if (p[i] < 0x20 || p[i] == 0x7F)
			putchar('?');
		else
			putchar(p[i]);
		n += (p[i] & 0xC0) != 0x80;
	}
	for (; n < width; n++)
		putchar(' ');
}

/* Untrusted text in a column of width characters, cut with "..." when longer. */
static void
put_column(const char *s, int width)
{
	const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
	size_t i, cut = 0;
	int n = 0;

	for (i = 0; p[i] != '\0'; i++)
		if ((p[i] & 0xC0) != 0x80) {
			if (n == width - 3)
				cut = i;
			n++;
		}
	if (n <= width) {
		put_text((const char *)p, i, width);
		return;
	}
	put_text((const char *)p, cut, 0);
	fputs("...", stdout);
}

static void
format_bytes(json_int_t v, char *buf, size_t size)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
	double d = (double)v;
	size_t u = 0;

	if (v < 1024) {
		snprintf(buf, size, "%lldB", (long long)v);
		return;
	}
	for (d /= 1024; d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]); d /= 1024)
		u++;
	snprintf(buf, size, "%.1f%s", d, units[u]);
}

/* "2026-11-29T10:00:00.123Z" -> "2026-11-29T10:00:00Z" */
static void
short_time(const char *t, char buf[32])
{
	if (t != NULL && strlen(t) == 24 && t[19] == '.' && t[23] == 'Z')
		snprintf(buf, 32, "%.19sZ", t);
	else
		snprintf(buf, 32, "%s", t != NULL ? t : "?");
}

static void
print_header(void)
{
	printf("%-20s %-8s %-*s %-7s %-16s %-7s %-24s %-6s %-8s %s\n", "TIME (UTC)", "SESSION",
	       AUDIT_CMD_WIDTH, "COMMAND", "EVENT", "KEY", "METHOD", "HOST", "STATUS", "DECISION",
	       "PATH / COMMAND");
}

/*
 * One table row. cmd is the session's command (from its session_start
 * record, NULL when that was rotated away), so that every row says which
 * command it belongs to.
 */
static void
print_record(json_t *rec, const char *cmd, int color)
{
	const char *type = jstr(rec, "type"), *s;
	json_t *x;
	char buf[64];
	int denied = (s = jstr(rec, "decision")) != NULL && strcmp(s, "denied") == 0;

	if (color && denied)
		fputs("\033[31m", stdout);
	short_time(jstr(rec, "time"), buf);
	put_text(buf, sizeof(buf), 20);
	putchar(' ');
	put_text(jstr(rec, "session"), 8, 8);
	putchar(' ');
	put_column(cmd != NULL ? cmd : "?", AUDIT_CMD_WIDTH);
	putchar(' ');
	if (strcmp(type, "session_start") == 0) {
		json_t *keys = json_object_get(rec, "keys"), *k;
		size_t i;
		int n = 0;

		put_text("start", 8, 7);
		putchar(' ');
		json_array_foreach(keys, i, k)
		{
			if (i > 0)
				putchar(',');
			put_text(json_string_value(k), 256, 0);
			n += (int)strlen(json_string_value(k) ? json_string_value(k) : "") +
			     (i > 0);
		}
		for (; n < 16; n++)
			putchar(' ');
		printf(" %-7s %-24s %-6s %-8s ", "", "", "", "");
		put_text(jstr(rec, "command"), 4096, 0);
	} else if (strcmp(type, "request") == 0) {
		put_text("request", 8, 7);
		putchar(' ');
		put_text(jstr(rec, "key") != NULL ? jstr(rec, "key") : "-", 256, 16);
		putchar(' ');
		put_text(jstr(rec, "method"), 32, 7);
		putchar(' ');
		x = json_object_get(rec, "port");
		if (json_is_integer(x) && json_integer_value(x) != 443) {
			snprintf(buf, sizeof(buf), "%s:%lld",
			         jstr(rec, "host") ? jstr(rec, "host") : "?",
			         (long long)json_integer_value(x));
			put_text(buf, sizeof(buf), 24);
		} else
			put_text(jstr(rec, "host"), 256, 24);
		putchar(' ');
		x = json_object_get(rec, "status");
		if (json_is_integer(x))
			printf("%-6lld ", (long long)json_integer_value(x));
		else
			printf("%-6s ", "-");
		put_text(jstr(rec, "decision"), 16, 8);
		putchar(' ');
		put_text(jstr(rec, "path"), 4096, 0);
		if (denied && (s = jstr(rec, "reason")) != NULL && *s != '\0') {
			fputs(" (", stdout);
			put_text(s, 256, 0);
			putchar(')');
		}
	} else {
		char up[32], down[32];

		put_text(strcmp(type, "session_end") == 0 ? "end" : type, 16, 7);
		printf(" %-16s %-7s %-24s ", "", "", "");
		x = json_object_get(rec, "exit");
		if (json_is_integer(x))
			snprintf(buf, sizeof(buf), "exit %lld", (long long)json_integer_value(x));
		else
			snprintf(buf, sizeof(buf), "-");
		printf("%-15s ", buf);
		format_bytes(json_integer_value(json_object_get(rec, "bytes_up")), up, sizeof(up));
		format_bytes(json_integer_value(json_object_get(rec, "bytes_down")), down,
		             sizeof(down));
		printf("%lld requests, %lld denied, %s up, %s down",
		       (long long)json_integer_value(json_object_get(rec, "requests")),
		       (long long)json_integer_value(json_object_get(rec, "denied")), up, down);
	}
	if (color && denied)
		fputs("\033[0m", stdout);
	putchar('\n');
}

/* --summary: fold a record into its session's aggregate. */
static int
summarize(struct audit_view *view, json_t *rec)
{
	const char *id = jstr(rec, "session"), *type = jstr(rec, "type"), *host;
	json_t *s = json_object_get(view->sessions, id), *hosts, *h;
	char buf[320];
	size_t i;

	if (s == NULL) {
		s = json_pack("{s:s, s:O?, s:n, s:i, s:i, s:i, s:i, s:[], s:n}", "session", id,
		              "start", json_object_get(rec, "time"), "command", "requests", 0,
		              "denied", 0, "bytes_up", 0, "bytes_down", 0, "hosts", "exit");
		if (s == NULL || json_object_set_new(view->sessions, id, s) != 0 ||
		    json_array_append_new(view->order, json_string(id)) != 0)
			return -1;
	}
	if (strcmp(type, "session_start") == 0) {
		json_object_set(s, "start", json_object_get(rec, "time"));
		json_object_set(s, "command", json_object_get(rec, "command"));
	} else if (strcmp(type, "session_end") == 0) {
		json_object_set(s, "exit", json_object_get(rec, "exit"));
	} else if (strcmp(type, "request") == 0) {
		static const char *const sums[] = {"bytes_up", "bytes_down"};

		json_object_set_new(
		        s, "requests",
		        json_integer(json_integer_value(json_object_get(s, "requests")) + 1));
		if ((host = jstr(rec, "decision")) != NULL && strcmp(host, "denied") == 0)
			json_object_set_new(
			        s, "denied",
			        json_integer(json_integer_value(json_object_get(s, "denied")) + 1));
		for (i = 0; i < 2; i++)
			json_object_set_new(
			        s, sums[i],
			        json_integer(json_integer_value(json_object_get(s, sums[i])) +
			                     json_integer_value(json_object_get(rec, sums[i]))));
		if ((host = jstr(rec, "host")) == NULL)
			return 0;
		if (json_integer_value(json_object_get(rec, "port")) != 443)
			snprintf(buf, sizeof(buf), "%s:%lld", host,
			         (long long)json_integer_value(json_object_get(rec, "port")));
		else
			snprintf(buf, sizeof(buf), "%s", host);
		hosts = json_object_get(s, "hosts");
		json_array_foreach(hosts, i,
		                   h) if (strcmp(json_string_value(h), buf) == 0) return 0;
		json_array_append_new(hosts, json_string(buf));
	}
	return 0;
}

static void
print_summary(struct audit_view *view)
{
	json_t *id, *s, *h;
	size_t i, j, first = 0;
	char buf[32], up[32], down[32];

	if (view->limit > 0 && json_array_size(view->order) > view->limit)
		first = json_array_size(view->order) - (size_t)view->limit;
	if (!view->json && json_array_size(view->order) > 0)
		printf("%-16s %-20s %8s %6s %9s %9s %-30s %s\n", "SESSION", "START (UTC)",
		       "REQUESTS", "DENIED", "UP", "DOWN", "HOSTS", "COMMAND");
	json_array_foreach(view->order, i, id)
	{
		if (i < first)
			continue;
		s = json_object_get(view->sessions, json_string_value(id));
		if (view->json) {
			json_dumpf(s, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
			putchar('\n');
			continue;
		}
		put_text(json_string_value(id), 256, 16);
		putchar(' ');
		short_time(jstr(s, "start"), buf);
		put_text(buf, sizeof(buf), 20);
		format_bytes(json_integer_value(json_object_get(s, "bytes_up")), up, sizeof(up));
		format_bytes(json_integer_value(json_object_get(s, "bytes_down")), down,
		             sizeof(down));
		if (view->color && json_integer_value(json_object_get(s, "denied")) > 0)
			printf(" %8lld \033[31m%6lld\033[0m %9s %9s ",
			       (long long)json_integer_value(json_object_get(s, "requests")),
			       (long long)json_integer_value(json_object_get(s, "denied")), up,
			       down);
		else
			printf(" %8lld %6lld %9s %9s ",
			       (long long)json_integer_value(json_object_get(s, "requests")),
			       (long long)json_integer_value(json_object_get(s, "denied")), up,
			       down);
		{
			int n = 0;

			json_array_foreach(json_object_get(s, "hosts"), j, h)
			{
				if (j > 0)
					putchar(',');
				put_text(json_string_value(h), 320, 0);
				n += (int)strlen(json_string_value(h)) + (j > 0);
			}
			if (j == 0) {
				putchar('-');
				n = 1;
			}
			for (; n < 30; n++)
				putchar(' ');
		}
		putchar(' ');
		put_text(jstr(s, "command") != NULL ? jstr(s, "command") : "?", 4096, 0);
		putchar('\n');
	}
}

/* Print one matching record: the stored line (--json) or a table row. */
static void
show_record(struct audit_view *view, json_t *rec, const char *raw, size_t len)
{
	if (view->json) {
		fwrite(raw, 1, len, stdout);
		putchar('\n');
	} else {
		if (view->shown == 0)
			print_header();
		print_record(
		        rec,
		        json_string_value(json_object_get(view->commands, jstr(rec, "session"))),
		        view->color);
	}
	view->shown++;
}

/* Hold a match back; once `limit` are held, the oldest is dropped. */
static int
keep_record(struct audit_view *view, json_t *rec, const struct audit_line *ln)
{
	struct audit_kept *k;
	size_t cap;

	if (view->nkept == view->limit) {
		k = &view->kept[view->head];
		json_decref(k->rec);
		free(k->raw);
		view->head = (view->head + 1) % view->capkept;
		view->nkept--;
	} else if (view->nkept == view->capkept) {
		/* Grows only before it first wraps, so head is still 0 here. */
		cap = view->capkept > 0 ? view->capkept * 2 : 64;
		if (cap > view->limit)
			cap = (size_t)view->limit;
		if ((k = realloc(view->kept, cap * sizeof(*k))) == NULL)
			return -1;
		view->kept = k;
		view->capkept = cap;
	}
	k = &view->kept[(view->head + view->nkept) % view->capkept];
	k->rec = NULL;
	k->len = ln->len;
	k->raw = NULL; /* the line as stored: only --json prints it */
	if (view->json) {
		if ((k->raw = malloc(ln->len + 1)) == NULL)
			return -1;
		memcpy(k->raw, ln->data, ln->len);
	}
	k->rec = json_incref(rec);
	view->nkept++;
	return 0;
}

/* Print the held records, oldest first, and let go of them. */
static void
flush_kept(struct audit_view *view)
{
	struct audit_kept *k;

	for (size_t i = 0; i < view->nkept; i++) {
		k = &view->kept[(view->head + i) % view->capkept];
		show_record(view, k->rec, k->raw, k->len);
		json_decref(k->rec);
		free(k->raw);
	}
	view->nkept = view->head = 0;
}

/* Say on stderr, after the table, that older matches were left out and how to see them. */
static void
note_omitted(const struct audit_view *view)
{
	uint64_t total = view->summary ? json_array_size(view->order) : view->matched;
	uint64_t shown = view->summary
	                         ? (view->limit > 0 && total > view->limit ? view->limit : total)
	                         : view->shown;

	if (view->json || shown >= total)
		return;
	fflush(stdout);
	fprintf(stderr,
	        "vault: showing the last %llu of %llu matching %s; --all shows every one, -n N "
	        "the last N\n",
	        (unsigned long long)shown, (unsigned long long)total,
	        view->summary ? "sessions" : "records");
}

/* One line from the log: warn about damage, filter, then print, hold or aggregate. */
static int
audit_show_line(struct audit_view *view, const struct audit_filter *f, const struct audit_line *ln)
{
	json_t *rec = NULL, *cmd;
	const char *type;
	int r = 0;

	if ((ln->flags & (AUDIT_LINE_OVERLONG | AUDIT_LINE_UNTERMINATED)) == 0)
		rec = json_loadb(ln->data, ln->len, 0, NULL);
	type = jstr(rec, "type");
	if (!json_is_object(rec) || type == NULL || jstr(rec, "session") == NULL) {
		fflush(stdout);
		fprintf(stderr,
		        "vault: warning: %s:%llu: %s skipped; check the log with `vault audit "
		        "verify`\n",
		        ln->file, (unsigned long long)ln->lineno,
		        ln->flags & AUDIT_LINE_UNTERMINATED ? "incomplete last line"
		        : ln->flags & AUDIT_LINE_OVERLONG   ? "overlong line"
		                                            : "malformed record");
		view->malformed++;
		json_decref(rec);
		return 0;
	}
	/* Every session's command, filtered out or not: its requests' rows name it. */
	if (view->commands != NULL && strcmp(type, "session_start") == 0 &&
	    json_is_string(cmd = json_object_get(rec, "command")))
		r = json_object_set(view->commands, jstr(rec, "session"), cmd);
	if (r == 0 && record_matches(rec, f)) {
		view->matched++;
		if (view->summary)
			r = summarize(view, rec);
		else if (view->holding)
			r = keep_record(view, rec, ln);
		else
			show_record(view, rec, ln->data, ln->len);
	}
	json_decref(rec);
	return r;
}

static int
cmd_audit_verify(int argc, char **argv)
{
	static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	struct audit_verify_result res;
	struct paths p = {0};
	struct vault *v = NULL;
	int c, r, ret = EXIT_FAILURE;

	current_cmd = "audit verify"; /* usage errors point to verify's own help */
	while ((c = getopt_exact(argc, argv, ":h", opts)) != -1) {
		if (c == 'h')
			return print_help("audit verify");
		bad_option("audit verify", c, argv);
		return EXIT_USAGE;
	}
	if (optind != argc) {
		usage_error("audit verify: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (load_paths(&p) != 0 || open_vault(&p, VAULT_READ, &v) != 0)
		goto out;
	r = audit_verify(p.audit, vault_audit_key(v), &res);
	if (r == VERR_AUDIT_TAMPERED) {
		fprintf(stderr, "vault: %s:%llu: %s%s%s\n", res.file, (unsigned long long)res.line,
		        audit_bad_str(res.bad), res.detail[0] ? ": " : "", res.detail);
		fprintf(stderr, "vault: the %llu record%s before it %s intact\n",
		        (unsigned long long)res.records, res.records == 1 ? "" : "s",
		        res.records == 1 ? "is" : "are");
		goto out;
	}
	if (r != 0) {
		fail(r, p.audit);
		goto out;
	}
	printf("intact: %llu record%s in %u file%s\n", (unsigned long long)res.records,
	       res.records == 1 ? "" : "s", res.files, res.files == 1 ? "" : "s");
	if (res.start_unchecked)
		printf("note: the oldest kept record is seq %llu; older files were rotated away, "
		       "so "
		       "its link to them cannot be checked\n",
		       (unsigned long long)res.first_seq);
	ret = finish_stdout();
out:
	vault_close(v);
	paths_clear(&p);
	return ret;
}

static int
cmd_audit(int argc, char **argv)
{
	static const struct option opts[] = {{"session", required_argument, NULL, 's'},
	                                     {"key", required_argument, NULL, 'k'},
	                                     {"since", required_argument, NULL, 'S'},
	                                     {"denied", no_argument, NULL, 'd'},
	                                     {"json", no_argument, NULL, 'j'},
	                                     {"follow", no_argument, NULL, 'f'},
	                                     {"summary", no_argument, NULL, 'u'},
	                                     {"limit", required_argument, NULL, 'n'},
	                                     {"all", no_argument, NULL, 'a'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	struct audit_filter f = {0};
	struct audit_view view = {0};
	struct audit_reader *rd = NULL;
	struct audit_line ln;
	struct paths p = {0};
	unsigned long long n;
	char *end;
	int c, r, follow = 0, all = 0, limited = 0, ret = EXIT_FAILURE;

	if (argc >= 2 && strcmp(argv[1], "verify") == 0)
		return cmd_audit_verify(argc - 1, argv + 1);
	while ((c = getopt_exact(argc, argv, "+:hn:", opts)) != -1) {
		switch (c) {
		case 'n':
			errno = 0;
			n = strtoull(optarg, &end, 10);
			if (optarg[0] < '0' || optarg[0] > '9' || *end != '\0' || errno != 0 ||
			    n == 0 || n > AUDIT_LIMIT_MAX) {
				usage_error("audit: -n/--limit '%s': expected a number of records "
				            "from 1 to %d",
				            optarg, AUDIT_LIMIT_MAX);
				return EXIT_USAGE;
			}
			view.limit = n;
			limited = 1;
			break;
		case 'a':
			all = 1;
			break;
		case 's':
			f.session = optarg;
			break;
		case 'k':
			f.key = optarg;
			break;
		case 'S':
			if (parse_since(optarg, &f.since_ms) != 0) {
				usage_error("audit: --since '%s': expected a duration such as 30s, "
				            "15m, "
				            "2h or 7d, or a time such as 2026-11-29T10:00:00Z",
				            optarg);
				return EXIT_USAGE;
			}
			f.has_since = 1;
			break;
		case 'd':
			f.denied = 1;
			break;
		case 'j':
			view.json = 1;
			break;
		case 'f':
			follow = 1;
			break;
		case 'u':
			view.summary = 1;
			break;
		case 'h':
			return print_help("audit");
		default:
			bad_option("audit", c, argv);
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		usage_error(
		        strcmp(argv[optind], "verify") == 0
		                ? "audit: verify takes no options but --help: `vault audit verify`"
		                : "audit: unexpected argument '%s'",
		        argv[optind]);
		return EXIT_USAGE;
	}
	if (follow && view.summary) {
		usage_error("audit: --summary and --follow do not go together");
		return EXIT_USAGE;
	}
	if (all && limited) {
		usage_error("audit: --all and -n/--limit do not go together");
		return EXIT_USAGE;
	}
	/* A person reads the last records; a script (--json) gets all unless it asks. */
	if (!limited && !all && !view.json)
		view.limit = AUDIT_DEFAULT_LIMIT;
	view.holding = view.limit > 0 && !view.summary;
	view.color = !view.json && use_color();
	if ((view.summary &&
	     ((view.sessions = json_object()) == NULL || (view.order = json_array()) == NULL)) ||
	    (!view.json && !view.summary && (view.commands = json_object()) == NULL)) {
		fail(VERR_NOMEM, "audit");
		goto out;
	}
	if (load_paths(&p) != 0)
		goto out;
	if ((r = audit_reader_open(p.audit, follow, &rd)) != 0) {
		fail(r, p.audit);
		goto out;
	}
	for (;;) {
		r = audit_reader_next(rd, &ln);
		if (r == 1) {
			if (audit_show_line(&view, &f, &ln) != 0) {
				fail(VERR_NOMEM, "audit");
				goto out;
			}
			continue;
		}
		if (r < 0) {
			fail(r, p.audit);
			goto out;
		}
		if (view.holding) {
			/* The end of what is there: the last records, then (--follow) the new. */
			flush_kept(&view);
			view.holding = 0;
			note_omitted(&view);
		}
		if (!follow)
			break;
		/* Nothing new: show what we have, then poll; a rotation is noticed by the reader.
		 */
		if (fflush(stdout) != 0 || ferror(stdout)) {
			ret = fail(VERR_SYSTEM, "stdout");
			goto out;
		}
		nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
	}
	if (view.summary) {
		print_summary(&view);
		note_omitted(&view);
	}
	if (view.matched == 0 && !view.json && view.malformed == 0)
		fprintf(stderr, "vault: %s\n",
		        audit_reader_files(rd) == 0 ? "no audit records yet (vproxy writes them)"
		                                    : "no matching audit records");
	ret = finish_stdout();
out:
	audit_reader_close(rd);
	for (size_t i = 0; i < view.nkept; i++) {
		json_decref(view.kept[(view.head + i) % view.capkept].rec);
		free(view.kept[(view.head + i) % view.capkept].raw);
	}
	free(view.kept);
	json_decref(view.commands);
	json_decref(view.sessions);
	json_decref(view.order);
	paths_clear(&p);
	return ret;
}

/* ---- doctor ---- */

struct report {
	int color, verbose;
	unsigned checks, failed;
};

static void report_line(struct report *rep, int ok, const char *name, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* "ok   name: detail" or "FAIL name: detail"; red/green only on a terminal without NO_COLOR. */
static void
report_line(struct report *rep, int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	rep->checks++;
	rep->failed += !ok;
	if (rep->color)
		printf("%s%-4s\033[0m ", ok ? "\033[32m" : "\033[1;31m", ok ? "ok" : "FAIL");
	else
		printf("%-4s ", ok ? "ok" : "FAIL");
	printf("%s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* A file vault or vproxy wrote: a regular file owned by us, 0600 at most. */
static int
private_file(const char *path, struct stat *st, char *why, size_t size)
{
	if (lstat(path, st) != 0) {
		snprintf(why, size, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st->st_mode) || st->st_uid != geteuid() || (st->st_mode & 077) != 0) {
		snprintf(why, size,
		         "%s: must be a regular file owned by you with mode 0600 (it is %04o, "
		         "uid %lu): fix it with chmod 600",
		         path, (unsigned)(st->st_mode & 07777), (unsigned long)st->st_uid);
		return -1;
	}
	return 0;
}

static void
doctor_home(struct report *rep, const struct paths *p)
{
	int r = safefile_dir(p->home, 0);

	if (r == VERR_SYSTEM && errno == ENOENT)
		report_line(rep, 0, "vault home",
		            "%s does not exist: create the vault with `vault init`", p->home);
	else if (r != 0)
		report_line(rep, 0, "vault home", "%s: %s", p->home,
		            r == VERR_SYSTEM ? strerror(errno) : verr_strerror(r));
	else
		report_line(rep, 1, "vault home", "%s (private directory)", p->home);
}

/* The header says what the file is without the passphrase. */
static void
doctor_vault(struct report *rep, const struct paths *p)
{
	unsigned char head[VAULTFMT_HEADER_LEN + VAULTFMT_TAG_LEN];
	struct vaultfmt_header h;
	struct stat st;
	char why[4200];
	ssize_t n = -1;
	int fd, r;

	if (lstat(p->db, &st) != 0 && errno == ENOENT) {
		report_line(rep, 0, "vault", "%s: %s", p->db, verr_strerror(VERR_VAULT_MISSING));
		return;
	}
	if (private_file(p->db, &st, why, sizeof(why)) != 0) {
		report_line(rep, 0, "vault", "%s", why);
		return;
	}
	if ((fd = open(p->db, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) >= 0) {
		do
			n = read(fd, head, sizeof(head));
		while (n < 0 && errno == EINTR);
		close(fd);
	}
	if (n < 0) {
		report_line(rep, 0, "vault", "%s: %s", p->db, strerror(errno));
		return;
	}
	if ((r = vaultfmt_header_parse(head, (size_t)n, &h)) != 0) {
		report_line(rep, 0, "vault", "%s: %s", p->db, verr_strerror(r));
		return;
	}
	report_line(rep, 1, "vault", "%s (format %u, Argon2id, %lld bytes, mode 0600)", p->db,
	            (unsigned)h.version, (long long)st.st_size);
}

static void
doctor_audit(struct report *rep, const struct paths *p)
{
	struct audit_verify_result res;
	struct secbuf *pass = NULL;
	struct vault *v = NULL;
	struct stat st;
	char why[4200], when[32];
	int r;

	if (lstat(p->audit, &st) != 0 && errno == ENOENT) {
		report_line(rep, 1, "audit log", "%s: no records yet (vproxy writes them)",
		            p->audit);
		return;
	}
	if (private_file(p->audit, &st, why, sizeof(why)) != 0) {
		report_line(rep, 0, "audit log", "%s", why);
		return;
	}
	format_time((int64_t)st.st_mtime, when, sizeof(when));
	if (getenv("VAULT_PASSPHRASE_FILE") == NULL) {
		report_line(
		        rep, 1, "audit log",
		        "%s (%lld bytes, last written %s; `vault audit verify` checks the chain)",
		        p->audit, (long long)st.st_size, when);
		return;
	}
	/* A passphrase without asking: verify the chain too. */
	if ((r = passphrase_get("VAULT_PASSPHRASE_FILE", "Vault passphrase: ", 0, &pass)) == 0) {
		r = vault_open(p, pass, VAULT_READ, &v);
		secbuf_free(pass);
	}
	if (r != 0) {
		report_line(rep, 0, "audit log", "cannot open the vault to verify it: %s",
		            verr_strerror(r));
		return;
	}
	r = audit_verify(p->audit, vault_audit_key(v), &res);
	vault_close(v);
	if (r == VERR_AUDIT_TAMPERED)
		report_line(rep, 0, "audit log", "%s:%llu: %s: see `vault audit verify`", res.file,
		            (unsigned long long)res.line, audit_bad_str(res.bad));
	else if (r != 0)
		report_line(rep, 0, "audit log", "%s: %s", p->audit, verr_strerror(r));
	else
		report_line(rep, 1, "audit log", "%s: intact, %llu records, last written %s",
		            p->audit, (unsigned long long)res.records, when);
}

/* vproxy's runtime directory, pid file and log: private when they exist. */
static void
doctor_vproxy_files(struct report *rep, const struct paths *p)
{
	static const char *const names[] = {"vproxy.pid", "vproxy.log"};
	char path[4200], why[4200];
	struct stat st;
	int r, bad = 0;

	if (lstat(p->runtime, &st) != 0 && errno == ENOENT) {
		report_line(rep, 1, "vproxy files", "%s not created yet (vproxy has not run)",
		            p->runtime);
		return;
	}
	if ((r = safefile_dir(p->runtime, 0)) != 0) {
		report_line(rep, 0, "vproxy files", "%s: %s", p->runtime,
		            r == VERR_SYSTEM ? strerror(errno) : verr_strerror(r));
		return;
	}
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", i == 0 ? p->runtime : p->home, names[i]);
		if (lstat(path, &st) != 0 && errno == ENOENT)
			continue;
		if (private_file(path, &st, why, sizeof(why)) != 0) {
			report_line(rep, 0, "vproxy files", "%s", why);
			bad = 1;
		}
	}
	if (!bad)
		report_line(rep, 1, "vproxy files", "%s and the pid file and log are private",
		            p->runtime);
}

/*
 * An unattended unlock (the systemd unit's file, or VAULT_PASSPHRASE_FILE):
 * say where it is, and that it must be private. Pipes and /dev/fd are fine.
 */
static void
doctor_passphrase_file(struct report *rep, const struct paths *p)
{
	const char *env = getenv("VAULT_PASSPHRASE_FILE");
	char path[4200], why[4200];
	struct stat st;

	if (env != NULL && env[0] != '\0')
		snprintf(path, sizeof(path), "%s", env);
	else
		snprintf(path, sizeof(path), "%s/passphrase", p->home);
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return;
	if (private_file(path, &st, why, sizeof(why)) != 0)
		report_line(rep, 0, "passphrase file", "%s", why);
	else
		report_line(rep, 1, "passphrase file",
		            "%s is private; anything that reads your files as you can unlock the "
		            "vault with it (see vproxy(1))",
		            path);
}

/*
 * One line of `vrun --check`, passed on: its ok/FAIL lines count as checks of
 * ours, so the total at the end matches the FAIL lines shown, and they take
 * our colour (vrun writes to a pipe here, so it writes none itself).
 */
static void
relay_check_line(struct report *rep, const char *line)
{
	static const struct {
		const char *tag, *color;
		int ok, counts;
	} tags[] = {{"ok   ", "\033[32m", 1, 1},
	            {"FAIL ", "\033[1;31m", 0, 1},
	            {"note ", "\033[33m", 1, 0}};

	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		if (strncmp(line, tags[i].tag, 5) != 0)
			continue;
		rep->checks += tags[i].counts;
		rep->failed += !tags[i].ok;
		if (rep->color)
			printf("%s%.4s\033[0m %s", tags[i].color, tags[i].tag, line + 5);
		else
			fputs(line, stdout);
		return;
	}
	fputs(line, stdout);
}

/*
 * The containment probes belong to vrun: run `vrun --check`, found next to
 * this binary (an installation) or else in PATH, and relay its lines.
 */
static void
doctor_containment(struct report *rep)
{
	char exe[4096], path[4200];
	char *argv[4] = {(char *)"vrun", (char *)"--check", NULL, NULL};
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *bin = "vrun";
	unsigned failed = rep->failed;
	char *line = NULL, *slash;
	size_t cap = 0;
	int fds[2], st;
	FILE *in;
	pid_t pid;

	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/vrun", exe);
			if (access(path, X_OK) == 0)
				bin = path;
		}
	}
	if (rep->verbose)
		argv[2] = (char *)"-v";
	printf("-- containment: %s --check\n", bin);
	if (fflush(stdout) != 0 || pipe(fds) != 0) {
		report_line(rep, 0, "containment", "cannot run vrun: %s", strerror(errno));
		return;
	}
	if ((pid = fork()) < 0) {
		report_line(rep, 0, "containment", "cannot run vrun: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		close(fds[0]);
		if (dup2(fds[1], STDOUT_FILENO) < 0)
			_exit(127);
		close(fds[1]);
		execvp(bin, argv);
		printf("FAIL containment: cannot run %s: %s (install vrun next to vault or in "
		       "PATH)\n",
		       bin, strerror(errno));
		fflush(stdout);
		_exit(127);
	}
	close(fds[1]);
	if ((in = fdopen(fds[0], "r")) == NULL)
		close(fds[0]);
	else {
		while (getline(&line, &cap, in) > 0)
			relay_check_line(rep, line);
		free(line);
		fclose(in);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			report_line(rep, 0, "containment", "waitpid: %s", strerror(errno));
			return;
		}
	/* A vrun that failed without saying which probe still fails the doctor. */
	if (rep->failed == failed && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		if (WIFSIGNALED(st))
			report_line(rep, 0, "containment", "%s --check was killed by signal %d",
			            bin, WTERMSIG(st));
		else
			report_line(rep, 0, "containment", "%s --check exited with status %d", bin,
			            WEXITSTATUS(st));
	}
}

static int
cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {{"verbose", no_argument, NULL, 'v'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	struct report rep = {0};
	struct paths p = {0};
	int c;

	while ((c = getopt_exact(argc, argv, ":hv", opts)) != -1) {
		switch (c) {
		case 'v':
			rep.verbose = 1;
			break;
		case 'h':
			return print_help("doctor");
		default:
			bad_option("doctor", c, argv);
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		usage_error("doctor: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	rep.color = use_color();
	if (load_paths(&p) != 0)
		return EXIT_FAILURE;
	doctor_home(&rep, &p);
	doctor_vault(&rep, &p);
	doctor_audit(&rep, &p);
	doctor_vproxy_files(&rep, &p);
	doctor_passphrase_file(&rep, &p);
	doctor_containment(&rep);
	paths_clear(&p);
	if (rep.failed == 0)
		printf("vault doctor: all checks passed\n");
	else
		printf("vault doctor: %u of %u checks FAILED: fix what the FAIL lines say before "
		       "relying on vrun\n",
		       rep.failed, rep.checks);
	if (finish_stdout() != EXIT_SUCCESS)
		return EXIT_FAILURE;
	return rep.failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static int
cmd_help(int argc, char **argv)
{
	if (argc == 1)
		return print_usage();
	if (argc == 2)
		return print_help(strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0
		                          ? "help"
		                          : argv[1]);
	if (argc == 3 && strcmp(argv[1], "audit") == 0 && strcmp(argv[2], "verify") == 0)
		return print_help("audit verify");
	usage_error("help: expected at most one COMMAND");
	return EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {{"init", cmd_init},   {"add", cmd_add},       {"list", cmd_list},
	            {"show", cmd_show},   {"rm", cmd_rm},         {"passwd", cmd_passwd},
	            {"audit", cmd_audit}, {"doctor", cmd_doctor}, {"help", cmd_help}};
	int r;

	if ((r = secbuf_process_setup()) != 0) {
		fail(r, "cannot protect process memory");
		return EXIT_FAILURE;
	}
	if (argc < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return print_usage();
	if (strcmp(argv[1], "--version") == 0) {
		printf("vault %s\n", VRUN_VERSION);
		return finish_stdout();
	}
	opterr = 0; /* bad_option() words the error */
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0) {
			optind = 1;
			current_cmd = cmds[i].name;
			return cmds[i].fn(argc - 1, argv + 1);
		}
	usage_error(argv[1][0] == '-' ? "'%s': expected a command first" : "unknown command '%s'",
	            argv[1]);
	return EXIT_USAGE;
}
