/*
 * The vault lifecycle: create, open, edit, save, rekey; locking between
 * writers; refusal of wrong passphrases and insecure files.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "vault.h"
#include "verr.h"

static char dir[64];
static struct paths P;
static struct vault_kdf K;
static struct secbuf *pass, *pass2;

/*
 * The secret of every entry the tests add, by name, so that what a reopened
 * vault holds can be compared byte for byte, not only counted.
 */
#define REMEMBERED_MAX 16
static struct {
	char name[VAULT_NAME_MAX + 1];
	struct secbuf *secret;
} remembered[REMEMBERED_MAX];

static void
remember(const struct vault_entry *e)
{
	size_t i;

	for (i = 0; i < REMEMBERED_MAX && remembered[i].secret != NULL; i++)
		if (strcmp(remembered[i].name, e->name) == 0)
			break;
	assert_true(i < REMEMBERED_MAX);
	secbuf_free(remembered[i].secret);
	strcpy(remembered[i].name, e->name);
	assert_int_equal(secbuf_dup(e->secret->data, e->secret->len, &remembered[i].secret), 0);
}

static void
forget_all(void)
{
	for (size_t i = 0; i < REMEMBERED_MAX; i++) {
		secbuf_free(remembered[i].secret);
		remembered[i].secret = NULL;
	}
}

static int
setup(void **state)
{
	char home[128];

	(void)state;
	strcpy(dir, "/tmp/vrun-vault-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(home, sizeof(home), "%s/home", dir);
	setenv("VAULT_HOME", home, 1);
	if (paths_resolve(&P) != 0 || vault_kdf_named("interactive", &K) != 0)
		return -1;
	if (secbuf_dup("first passphrase", 16, &pass) != 0 ||
	    secbuf_dup("second passphrase", 17, &pass2) != 0)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	paths_clear(&P);
	secbuf_free(pass);
	secbuf_free(pass2);
	forget_all();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct vault_entry *
entry(const char *name, const char *host)
{
	struct vault_entry *e;
	unsigned char secret[24];
	char hex[49];

	assert_int_equal(vault_entry_new(&e), 0);
	strcpy(e->name, name);
	randombytes_buf(secret, sizeof(secret));
	sodium_bin2hex(hex, sizeof(hex), secret, sizeof(secret));
	assert_int_equal(secbuf_dup(hex, strlen(hex), &e->secret), 0);
	assert_int_equal(hostspec_parse(host, strlen(host), HOSTSPEC_ALLOW_WILDCARD, &e->hosts[0]),
	                 0);
	e->nhosts = 1;
	assert_int_equal(vault_default_env(name, e->env, sizeof(e->env)), 0);
	return e;
}

/* Every entry of v holds exactly the secret it was added with. */
static void
assert_secrets(const struct vault *v)
{
	for (size_t i = 0; i < vault_count(v); i++) {
		const struct vault_entry *f = vault_entry_at(v, i);
		size_t j;

		for (j = 0; j < REMEMBERED_MAX && remembered[j].secret != NULL; j++)
			if (strcmp(remembered[j].name, f->name) == 0)
				break;
		assert_true(j < REMEMBERED_MAX && remembered[j].secret != NULL);
		assert_non_null(f->secret);
		assert_true(secbuf_equal(f->secret, remembered[j].secret));
	}
}

/* A new entry whose secret is remembered for assert_secrets. */
static struct vault_entry *
kept_entry(const char *name, const char *host)
{
	struct vault_entry *e = entry(name, host);

	remember(e);
	return e;
}

static void
test_create_open(void **state)
{
	struct vault *v = (struct vault *)1, *w;
	struct secbuf *audit;
	struct stat st;

	(void)state;
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), VERR_VAULT_MISSING);
	assert_null(v);
	assert_int_equal(vault_create(&P, pass, &K, &v), 0);
	assert_int_equal(stat(P.home, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(stat(P.db, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(vault_count(v), 0);
	assert_int_equal(vault_audit_key(v)->len, VAULT_AUDIT_KEY_LEN);
	assert_int_equal(secbuf_dup(vault_audit_key(v)->data, VAULT_AUDIT_KEY_LEN, &audit), 0);
	vault_close(v);

	assert_int_equal(vault_create(&P, pass, &K, &v), VERR_VAULT_EXISTS);
	assert_int_equal(vault_open(&P, pass2, VAULT_READ, &v), VERR_VAULT_DECRYPT);
	assert_null(v);
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), 0);
	assert_true(secbuf_equal(vault_audit_key(v), audit));
	assert_int_equal(vault_kdf(v)->opslimit, K.opslimit);
	/* Read-only handles cannot change anything. */
	w = v;
	{
		struct vault_entry *e = entry("a", "a.example");

		assert_int_equal(vault_add(w, &e), VERR_VAULT_READONLY);
		assert_non_null(e);
		vault_entry_free(e);
	}
	assert_int_equal(vault_save(w), VERR_VAULT_READONLY);
	assert_int_equal(vault_remove(w, "a"), VERR_VAULT_READONLY);
	assert_int_equal(vault_rekey(w, pass2, &K), VERR_VAULT_READONLY);
	vault_close(v);
	secbuf_free(audit);
}

static void
test_edit_and_resolve(void **state)
{
	struct vault *v;
	struct vault_entry *e;
	const struct vault_entry *f;
	int exact;

	(void)state;
	assert_int_equal(vault_open(&P, pass, VAULT_WRITE, &v), 0);
	e = kept_entry("deploy-key", "api.example.com");
	assert_int_equal(vault_add(v, &e), 0);
	assert_null(e);
	e = entry("deploy-key", "other.example");
	assert_int_equal(vault_add(v, &e), VERR_KEY_EXISTS);
	strcpy(e->name, "deploy_key"); /* same default variable DEPLOY_KEY */
	assert_int_equal(vault_add(v, &e), VERR_ENV_TAKEN);
	strcpy(e->env, "DEPLOY_KEY_2");
	remember(e);
	assert_int_equal(vault_add(v, &e), 0);
	e = kept_entry("gh", "github.com");
	assert_int_equal(vault_add(v, &e), 0);
	e = entry("bad", "x.example");
	e->nhosts = 0;
	assert_int_equal(vault_add(v, &e), VERR_TOO_MANY);
	vault_entry_free(e);
	assert_int_equal(vault_save(v), 0);
	vault_close(v);

	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), 0);
	assert_int_equal(vault_count(v), 3);
	assert_secrets(v);
	assert_int_equal(vault_resolve(v, "gh", &f, &exact), 0);
	assert_string_equal(f->name, "gh");
	assert_true(exact);
	assert_int_equal(vault_resolve(v, "g", &f, &exact), 0);
	assert_string_equal(f->name, "gh");
	assert_false(exact);
	assert_int_equal(vault_resolve(v, "deploy", &f, &exact), VERR_KEY_AMBIGUOUS);
	assert_int_equal(vault_resolve(v, "deploy-", &f, &exact), 0);
	assert_string_equal(f->name, "deploy-key");
	assert_int_equal(vault_resolve(v, "nope", &f, &exact), VERR_KEY_UNKNOWN);
	assert_int_equal(vault_resolve(v, "", &f, &exact), VERR_KEY_UNKNOWN);
	assert_int_equal(vault_find(v, "deploy", &f), VERR_KEY_UNKNOWN);
	vault_close(v);

	assert_int_equal(vault_open(&P, pass, VAULT_WRITE, &v), 0);
	assert_int_equal(vault_remove(v, "deploy_key"), 0);
	assert_int_equal(vault_remove(v, "deploy_key"), VERR_KEY_UNKNOWN);
	assert_int_equal(vault_save(v), 0);
	vault_close(v);
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), 0);
	assert_int_equal(vault_count(v), 2);
	assert_string_equal(vault_entry_at(v, 0)->name, "deploy-key");
	assert_string_equal(vault_entry_at(v, 1)->name, "gh");
	assert_null(vault_entry_at(v, 2));
	assert_secrets(v);
	vault_close(v);
}

static void
test_rekey(void **state)
{
	struct vault *v;
	struct secbuf *audit;
	struct vault_kdf moderate;

	(void)state;
	assert_int_equal(vault_open(&P, pass, VAULT_WRITE, &v), 0);
	assert_int_equal(secbuf_dup(vault_audit_key(v)->data, VAULT_AUDIT_KEY_LEN, &audit), 0);
	assert_int_equal(vault_kdf_named("moderate", &moderate), 0);
	moderate.opslimit = 99;
	assert_int_equal(vault_rekey(v, pass2, &moderate), VERR_VAULT_KDF);
	assert_int_equal(vault_rekey(v, pass2, &K), 0);
	vault_close(v);
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), VERR_VAULT_DECRYPT);
	assert_int_equal(vault_open(&P, pass2, VAULT_READ, &v), 0);
	assert_int_equal(vault_count(v), 2);
	assert_true(secbuf_equal(vault_audit_key(v), audit));
	assert_secrets(v);
	vault_close(v);
	/* And back, so later tests can keep using pass. */
	assert_int_equal(vault_open(&P, pass2, VAULT_WRITE, &v), 0);
	assert_int_equal(vault_rekey(v, pass, &K), 0);
	vault_close(v);
	secbuf_free(audit);
}

/* Writers that overlap must all land: the lock serializes read-modify-write. */
static void
test_concurrent_writers(void **state)
{
	enum { N = 6 };
	pid_t pids[N];
	struct vault *v;
	struct vault_entry *es[N];
	const struct vault_entry *f;

	(void)state;
	/* Made here, so their secrets are known to compare after the children save. */
	for (int i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "w%d", i);
		es[i] = kept_entry(name, "w.example");
	}
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			struct vault *cv;

			if (vault_open(&P, pass, VAULT_WRITE, &cv) != 0 ||
			    vault_add(cv, &es[i]) != 0 || vault_save(cv) != 0)
				_exit(1);
			vault_close(cv);
			_exit(0);
		}
	}
	for (int i = 0; i < N; i++) {
		int status;

		vault_entry_free(es[i]);
		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), 0);
	assert_int_equal(vault_count(v), 2 + N);
	for (int i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "w%d", i);
		assert_int_equal(vault_find(v, name, &f), 0);
	}
	assert_secrets(v);
	vault_close(v);
}

/* A daemon's handle follows edits made by `vault` without the passphrase. */
static void
test_refresh(void **state)
{
	struct vault *daemon, *w;
	struct vault_entry *e;
	const struct vault_entry *f;
	size_t n;

	(void)state;
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &daemon), 0);
	n = vault_count(daemon);
	assert_int_equal(vault_open(&P, pass, VAULT_WRITE, &w), 0);
	e = kept_entry("fresh", "fresh.example");
	assert_int_equal(vault_add(w, &e), 0);
	assert_int_equal(vault_save(w), 0);
	vault_close(w);
	assert_int_equal(vault_find(daemon, "fresh", &f), VERR_KEY_UNKNOWN);
	assert_int_equal(vault_refresh(daemon), 0);
	assert_int_equal(vault_count(daemon), n + 1);
	assert_int_equal(vault_find(daemon, "fresh", &f), 0);
	assert_secrets(daemon);
	/* Unchanged: kept. Opened up to others (ctime moves): read again, refused. */
	assert_int_equal(vault_refresh(daemon), 0);
	assert_int_equal(chmod(P.db, 0644), 0);
	assert_int_not_equal(vault_refresh(daemon), 0);
	assert_int_not_equal(vault_refresh(daemon), 0);
	assert_int_equal(chmod(P.db, 0600), 0);
	assert_int_equal(vault_refresh(daemon), 0);
	assert_int_equal(vault_find(daemon, "fresh", &f), 0);

	/* After a passphrase change the old key cannot open it: say so, keep state. */
	assert_int_equal(vault_open(&P, pass, VAULT_WRITE, &w), 0);
	assert_int_equal(vault_remove(w, "fresh"), 0);
	assert_int_equal(vault_rekey(w, pass2, &K), 0);
	vault_close(w);
	assert_int_equal(vault_refresh(daemon), VERR_VAULT_REKEYED);
	assert_int_equal(vault_find(daemon, "fresh", &f), 0);
	vault_close(daemon);
	assert_int_equal(vault_open(&P, pass2, VAULT_WRITE, &w), 0);
	assert_int_equal(vault_rekey(w, pass, &K), 0);
	vault_close(w);
}

static void
test_insecure_and_leftovers(void **state)
{
	struct vault *v;
	char tmp[256], link[256];
	int fd;

	(void)state;
	/* A crash leftover is removed by the next writer, never read. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.ZZZZZZ", P.db);
	assert_true((fd = open(tmp, O_CREAT | O_WRONLY, 0600)) >= 0);
	assert_int_equal(write(fd, "junk", 4), 4);
	close(fd);
	assert_int_equal(vault_open(&P, pass, VAULT_WRITE, &v), 0);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(errno, ENOENT);
	vault_close(v);

	assert_int_equal(chmod(P.db, 0644), 0);
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), VERR_INSECURE_PATH);
	assert_int_equal(chmod(P.db, 0600), 0);
	assert_int_equal(chmod(P.home, 0755), 0);
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), VERR_INSECURE_PATH);
	assert_int_equal(vault_open(&P, pass, VAULT_WRITE, &v), VERR_INSECURE_PATH);
	assert_int_equal(chmod(P.home, 0700), 0);
	/* vault.db as a symlink to a perfectly good vault is still refused. */
	snprintf(link, sizeof(link), "%s/real.db", P.home);
	assert_int_equal(rename(P.db, link), 0);
	assert_int_equal(symlink(link, P.db), 0);
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), VERR_INSECURE_PATH);
	assert_int_equal(unlink(P.db), 0);
	assert_int_equal(rename(link, P.db), 0);
	assert_int_equal(vault_open(&P, pass, VAULT_READ, &v), 0);
	assert_secrets(v);
	vault_close(v);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_create_open), cmocka_unit_test(test_edit_and_resolve),
	        cmocka_unit_test(test_rekey),       cmocka_unit_test(test_concurrent_writers),
	        cmocka_unit_test(test_refresh),     cmocka_unit_test(test_insecure_and_leftovers),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
