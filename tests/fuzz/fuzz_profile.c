/*
 * libFuzzer target: profile parsing and SBPL generation. Whatever parses
 * must hold only absolute, normalised, control-free UTF-8 paths and
 * canonical hosts, and must compile into SBPL whose strings all close.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "sbpl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* A fixed environment, so that every variable form is reachable. */
	setenv("HOME", "/home/fuzz", 1);
	setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
	setenv("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1", 1);
	setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus;unix:runtime=yes", 1);
	unsetenv("GNUPGHOME");
	return 0;
}

static void
check_path(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > PROFILE_PATH_MAX || s[0] != '/' || s[n - 1] == '/' ||
	    !profile_utf8_valid(s, n) || strstr(s, "//") != NULL || strstr(s, "/./") != NULL ||
	    strstr(s, "/../") != NULL || (n >= 2 && strcmp(s + n - 2, "/.") == 0) ||
	    (n >= 3 && strcmp(s + n - 3, "/..") == 0))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			abort();
}

static void
check_sbpl(const char *s, size_t n)
{
	long depth = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == ';') {
			while (i < n && s[i] != '\n')
				i++;
		} else if (s[i] == '(') {
			depth++;
		} else if (s[i] == ')') {
			if (--depth < 0)
				abort();
		} else if (s[i] == '"') {
			for (i++; i < n && s[i] != '"'; i++)
				if (s[i] == '\\' && (++i == n || (s[i] != '"' && s[i] != '\\')))
					abort();
			if (i == n)
				abort();
		}
	}
	if (depth != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p = NULL;
	char err[256], canon[HOSTSPEC_NAME_MAX + 16], *out = NULL;
	size_t len = 0;

	if (profile_parse((const char *)data, size, "fuzz", &p, err, sizeof(err)) != 0) {
		if (p != NULL || strlen(err) == 0)
			abort();
		return 0;
	}
	for (size_t i = 0; i < p->nhide; i++)
		check_path(p->hide[i]);
	for (size_t i = 0; i < p->nallow; i++)
		if (hostspec_format(&p->allow[i], canon, sizeof(canon)) != 0 ||
		    strcmp(canon, p->allow_hosts[i]) != 0)
			abort();
	if (p->network != PROFILE_NET_PROXY_ONLY)
		abort();
	/* Parsed paths are always expressible in SBPL. */
	if (sbpl_generate(p, 8080, NULL, &out, &len) != 0 || strlen(out) != len)
		abort();
	check_sbpl(out, len);
	free(out);
	profile_free(p);
	return 0;
}
