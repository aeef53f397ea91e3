#include "paths.h"

#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verr.h"

static int
join(char **out, const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;

	if ((*out = malloc(n)) == NULL)
		return VERR_NOMEM;
	snprintf(*out, n, "%s%s%s", a, (a[0] != '\0' && a[strlen(a) - 1] == '/') ? "" : "/", b);
	return VERR_OK;
}

static const char *
absolute_env(const char *name)
{
	const char *v = getenv(name);

	/* XDG: relative values are invalid and must be ignored. */
	if (v == NULL || v[0] != '/')
		return NULL;
	return v;
}

static int
resolve_home(char **out, int *explicit_home)
{
	const char *v;
	struct passwd *pw;

	*explicit_home = 0;
	if ((v = getenv("VAULT_HOME")) != NULL) {
		if (v[0] != '/')
			return VERR_NO_HOME;
		*explicit_home = 1;
		if ((*out = strdup(v)) == NULL)
			return VERR_NOMEM;
		return VERR_OK;
	}
	if ((v = absolute_env("XDG_DATA_HOME")) != NULL)
		return join(out, v, "vrun");
	if ((v = absolute_env("HOME")) == NULL) {
		if ((pw = getpwuid(getuid())) == NULL || pw->pw_dir == NULL || pw->pw_dir[0] != '/')
			return VERR_NO_HOME;
		v = pw->pw_dir;
	}
	return join(out, v, ".local/share/vrun");
}

static int
resolve_runtime(const char *home, int explicit_home, char **out)
{
	const char *xdg = absolute_env("XDG_RUNTIME_DIR");
	unsigned char h[8];
	char hex[2 * sizeof(h) + 3], *base = NULL;
	int r;

	if (xdg == NULL)
		return join(out, home, "run");
	if (!explicit_home)
		return join(out, xdg, "vrun");
	crypto_generichash(h, sizeof(h), (const unsigned char *)home, strlen(home), NULL, 0);
	hex[0] = 'h';
	hex[1] = '-';
	sodium_bin2hex(hex + 2, sizeof(hex) - 2, h, sizeof(h));
	if ((r = join(&base, xdg, "vrun")) != 0)
		return r;
	r = join(out, base, hex);
	free(base);
	return r;
}

int
paths_resolve(struct paths *p)
{
	int r, explicit_home;

	memset(p, 0, sizeof(*p));
	if (sodium_init() < 0)
		return VERR_CRYPTO;
	if ((r = resolve_home(&p->home, &explicit_home)) != 0)
		goto out;
	/* Strip trailing slashes so derived names and hashes are stable. */
	for (size_t n = strlen(p->home); n > 1 && p->home[n - 1] == '/'; n--)
		p->home[n - 1] = '\0';
	if ((r = join(&p->db, p->home, "vault.db")) != 0 ||
	    (r = join(&p->lock, p->home, "vault.lock")) != 0 ||
	    (r = join(&p->audit, p->home, "audit.log")) != 0 ||
	    (r = resolve_runtime(p->home, explicit_home, &p->runtime)) != 0)
		goto out;
	r = VERR_OK;
out:
	if (r != 0)
		paths_clear(p);
	return r;
}

void
paths_clear(struct paths *p)
{
	free(p->home);
	free(p->db);
	free(p->lock);
	free(p->audit);
	free(p->runtime);
	memset(p, 0, sizeof(*p));
}
