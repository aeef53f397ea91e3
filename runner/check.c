/*
 * check: the probes of `vrun --check`, run inside the sandbox (see
 * check.h). Linux only, like the sandbox it checks.
 *
 * Arguments after CHECK_PROBE_ARG, all measured by vrun outside:
 *
 *   --ns user:INO,pid:INO,net:INO,mnt:INO,ipc:INO   vrun's own namespaces
 *   --tcp4 PORT, --tcp6 PORT   listeners vrun holds open on the host's
 *                              127.0.0.1 and [::1]
 *   --abstract NAME            an abstract unix socket vrun listens on
 *   --hidden PATH              a masked path that exists outside (repeated)
 *   --verbose
 *
 * and CHECK_SESSION_ENV=1 in the environment when a vproxy session is open.
 *
 * OpenSSL is loaded with dlopen for the TLS probe only: linking it would
 * cost every `vrun` a few milliseconds of start-up for a check that runs
 * rarely.
 */
#define _GNU_SOURCE
#include "check.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/keyctl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_ABI_SCOPED             6

#define MAX_HIDDEN  1024
#define NET_TIMEOUT 5 /* seconds for any one connect or read */

static const char *const ns_names[] = {"user", "pid", "net", "mnt", "ipc"};
#define NNS (sizeof(ns_names) / sizeof(ns_names[0]))

struct probe_args {
	unsigned long long ns[NNS];
	int have_ns;
	int tcp4, tcp6;
	const char *abstract;
	const char *hidden[MAX_HIDDEN];
	size_t nhidden;
	int session;
};

/* ---- report ---- */

void
check_report_init(struct check_report *rep, int verbose)
{
	/* no-color.org: a NO_COLOR that is set and not empty. */
	rep->color = (getenv("NO_COLOR") == NULL || getenv("NO_COLOR")[0] == '\0') &&
	             isatty(STDOUT_FILENO);
	rep->verbose = verbose;
	rep->failed = 0;
}

void
check_line(struct check_report *rep, enum check_result res, const char *name, const char *fmt, ...)
{
	static const char *const tag[] = {"FAIL", "ok", "note"};
	static const char *const color[] = {"\033[1;31m", "\033[32m", "\033[33m"};
	va_list ap;

	if (res == CHECK_FAIL)
		rep->failed++;
	if (rep->color)
		printf("%s%-4s\033[0m %s: ", color[res], tag[res], name);
	else
		printf("%-4s %s: ", tag[res], name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

void
check_detail(struct check_report *rep, const char *fmt, ...)
{
	va_list ap;

	if (!rep->verbose)
		return;
	fputs("       ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Append to a bounded list of findings: "a, b, c". */
static void note_add(char *buf, size_t size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
note_add(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	if (len + 3 >= size)
		return;
	if (len > 0) {
		memcpy(buf + len, ", ", 3);
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

/* ---- namespaces and privileges ---- */

static void
probe_namespaces(struct check_report *rep, const struct probe_args *a)
{
	char path[64], same[128] = "";
	struct stat st;

	if (!a->have_ns) {
		check_line(rep, CHECK_FAIL, "namespaces",
		           "no outside namespace ids to compare with");
		return;
	}
	for (size_t i = 0; i < NNS; i++) {
		snprintf(path, sizeof(path), "/proc/self/ns/%s", ns_names[i]);
		if (stat(path, &st) != 0) {
			note_add(same, sizeof(same), "%s (%s)", ns_names[i], strerror(errno));
			continue;
		}
		if ((unsigned long long)st.st_ino == a->ns[i])
			note_add(same, sizeof(same), "%s", ns_names[i]);
	}
	if (same[0] == '\0')
		check_line(rep, CHECK_OK, "namespaces",
		           "own user, pid, network, mount and IPC namespaces");
	else
		check_line(rep, CHECK_FAIL, "namespaces", "still in the host's: %s", same);
}

/* The value of "Name:" in /proc/self/status, or NULL. */
static const char *
status_field(const char *status, const char *name, char *buf, size_t size)
{
	size_t n = strlen(name);
	const char *p = status;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1, *end;

			while (*v == ' ' || *v == '\t')
				v++;
			end = strchr(v, '\n');
			if (end == NULL)
				end = v + strlen(v);
			snprintf(buf, size, "%.*s", (int)(end - v), v);
			return buf;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

static int
read_status(char *buf, size_t size)
{
	ssize_t n;
	size_t len = 0;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return len > 0 ? 0 : -1;
}

static void
probe_privileges(struct check_report *rep, const char *status)
{
	static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	char v[64] = "?", bad[256] = "";

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (status_field(status, caps[i], v, sizeof(v)) == NULL)
			note_add(bad, sizeof(bad), "%s unknown", caps[i]);
		else if (strspn(v, "0") != strlen(v))
			note_add(bad, sizeof(bad), "%s=%s", caps[i], v);
	}
	if (status_field(status, "NoNewPrivs", v, sizeof(v)) == NULL || strcmp(v, "1") != 0)
		note_add(bad, sizeof(bad), "no_new_privs off");
	if (bad[0] == '\0')
		check_line(
		        rep, CHECK_OK, "privileges",
		        "no capabilities (effective, permitted, inheritable, bounding, ambient); "
		        "no_new_privs");
	else
		check_line(rep, CHECK_FAIL, "privileges", "%s", bad);
}

/*
 * The filter is loaded, and it denies what it must. unshare runs in a
 * child: where nothing stops it, it must not change the probe itself.
 */
static void
probe_seccomp(struct check_report *rep, const char *status)
{
	char v[64] = "?", bad[256] = "";
	pid_t pid;
	int st;

	if (status_field(status, "Seccomp", v, sizeof(v)) == NULL || strcmp(v, "2") != 0)
		note_add(bad, sizeof(bad), "no seccomp filter (Seccomp: %s)", v);
	if ((pid = fork()) == 0)
		_exit(syscall(SYS_unshare, CLONE_NEWUSER) == 0 ? 0 : errno == EPERM ? 1 : 2);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		note_add(bad, sizeof(bad), "cannot test unshare");
	else if (WEXITSTATUS(st) == 0)
		note_add(bad, sizeof(bad), "unshare(CLONE_NEWUSER) succeeded");
	else if (WEXITSTATUS(st) != 1)
		note_add(bad, sizeof(bad), "unshare(CLONE_NEWUSER) failed, but not with EPERM");
	errno = 0;
	if (syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) >= 0 ||
	    errno != EPERM)
		note_add(bad, sizeof(bad), "keyctl reached the kernel keyrings");
	if (bad[0] == '\0')
		check_line(rep, CHECK_OK, "seccomp",
		           "filter active: new user namespaces and keyrings denied");
	else
		check_line(rep, CHECK_FAIL, "seccomp", "%s", bad);
}

/*
 * Landlock scoping cannot be queried, so it is tried: init (pid 1) is
 * outside the command's Landlock domain, so even a probe signal to it must
 * fail. That only means something if pid 1 is the sandbox's own init, of
 * our uid (for the host's init, EPERM proves nothing).
 */
static void
probe_landlock(struct check_report *rep)
{
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	struct stat st;

	if (abi < LL_ABI_SCOPED) {
		check_line(rep, CHECK_NOTE, "landlock",
		           "ABI %ld, scoping needs 6: not used; the pid and network namespaces "
		           "already keep signals and abstract sockets inside",
		           abi < 0 ? 0 : abi);
		return;
	}
	if (stat("/proc/1", &st) != 0 || st.st_uid != getuid() || getppid() != 1) {
		check_line(rep, CHECK_FAIL, "landlock",
		           "pid 1 is not the sandbox's init: cannot tell (no pid namespace?)");
		return;
	}
	if (kill(1, 0) == 0)
		check_line(rep, CHECK_FAIL, "landlock",
		           "ABI %ld, but a signal reached a process outside the domain", abi);
	else if (errno != EPERM)
		check_line(rep, CHECK_FAIL, "landlock", "signal probe: %s", strerror(errno));
	else
		check_line(rep, CHECK_OK, "landlock",
		           "ABI %ld: signals and abstract unix sockets scoped to the sandbox", abi);
}

/* ---- network ---- */

static void
set_timeouts(int s)
{
	struct timeval tv = {NET_TIMEOUT, 0};

	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* 0 when connected (the socket in *out if out != NULL), else errno. */
static int
try_connect(int family, int type, const struct sockaddr *sa, socklen_t len, int *out)
{
	int s = socket(family, type | SOCK_CLOEXEC, 0), e;

	if (out != NULL)
		*out = -1;
	if (s < 0)
		return errno;
	set_timeouts(s);
	if (connect(s, sa, len) == 0) {
		if (out != NULL)
			*out = s;
		else
			close(s);
		return 0;
	}
	e = errno;
	close(s);
	return e;
}

static int
connect_tcp4(const char *addr, int port, int *out)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, addr, &a.sin_addr);
	return try_connect(AF_INET, SOCK_STREAM, (struct sockaddr *)&a, sizeof(a), out);
}

static void
probe_network(struct check_report *rep, const struct probe_args *a)
{
	struct if_nameindex *ifs = if_nameindex();
	char bad[512] = "", names[256] = "";
	struct sockaddr_in6 a6;
	struct sockaddr_in far;
	struct sockaddr_un un;
	size_t n;

	if (ifs == NULL) {
		note_add(bad, sizeof(bad), "cannot list interfaces: %s", strerror(errno));
	} else {
		for (struct if_nameindex *i = ifs; i->if_index != 0; i++)
			if (strcmp(i->if_name, "lo") != 0)
				note_add(names, sizeof(names), "%s", i->if_name);
		if_freenameindex(ifs);
		if (names[0] != '\0')
			note_add(bad, sizeof(bad), "interfaces besides lo: %s", names);
	}
	if (a->tcp4 > 0 && connect_tcp4("127.0.0.1", a->tcp4, NULL) == 0)
		note_add(bad, sizeof(bad), "reached the host's 127.0.0.1:%d", a->tcp4);
	if (a->tcp6 > 0) {
		memset(&a6, 0, sizeof(a6));
		a6.sin6_family = AF_INET6;
		a6.sin6_port = htons((uint16_t)a->tcp6);
		a6.sin6_addr = in6addr_loopback;
		if (try_connect(AF_INET6, SOCK_STREAM, (struct sockaddr *)&a6, sizeof(a6), NULL) ==
		    0)
			note_add(bad, sizeof(bad), "reached the host's [::1]:%d", a->tcp6);
	}
	if (a->abstract != NULL && (n = strlen(a->abstract)) < sizeof(un.sun_path) - 1) {
		memset(&un, 0, sizeof(un));
		un.sun_family = AF_UNIX;
		memcpy(un.sun_path + 1, a->abstract, n);
		if (try_connect(AF_UNIX, SOCK_STREAM, (struct sockaddr *)&un,
		                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n),
		                NULL) == 0)
			note_add(bad, sizeof(bad), "reached the host's abstract socket @%s",
			         a->abstract);
	}
	/* A UDP connect only looks up a route: no packet leaves either way. */
	memset(&far, 0, sizeof(far));
	far.sin_family = AF_INET;
	far.sin_port = htons(9);
	inet_pton(AF_INET, "192.0.2.1", &far.sin_addr);
	if (try_connect(AF_INET, SOCK_DGRAM, (struct sockaddr *)&far, sizeof(far), NULL) == 0)
		note_add(bad, sizeof(bad), "a route beyond loopback exists (192.0.2.1)");
	if (bad[0] == '\0')
		check_line(rep, CHECK_OK, "network",
		           "only lo, no route out; the host's 127.0.0.1:%d%s and its abstract "
		           "sockets are unreachable",
		           a->tcp4, a->tcp6 > 0 ? " and [::1]" : "");
	else
		check_line(rep, CHECK_FAIL, "network", "%s", bad);
}

/* The proxy port from HTTPS_PROXY=http://127.0.0.1:PORT, or -1. */
static int
proxy_port(void)
{
	const char *v = getenv("HTTPS_PROXY");
	const char *prefix = "http://127.0.0.1:";
	char *end;
	long port;

	if (v == NULL || strncmp(v, prefix, strlen(prefix)) != 0)
		return -1;
	port = strtol(v + strlen(prefix), &end, 10);
	return *end == '\0' && port > 0 && port < 65536 ? (int)port : -1;
}

static int
probe_proxy(struct check_report *rep, int port)
{
	int e;

	if (port < 0) {
		check_line(rep, CHECK_FAIL, "proxy",
		           "HTTPS_PROXY does not name the session listener");
		return -1;
	}
	if ((e = connect_tcp4("127.0.0.1", port, NULL)) != 0) {
		check_line(rep, CHECK_FAIL, "proxy", "the session listener 127.0.0.1:%d: %s", port,
		           strerror(e));
		return -1;
	}
	check_line(rep, CHECK_OK, "proxy", "the session listener 127.0.0.1:%d is reachable", port);
	return 0;
}

/* ---- masks ---- */

/* Is name a component of the CA bundle's path right under dir? */
static int
on_bundle_path(const char *dir, const char *name, const char *bundle)
{
	size_t n = strlen(dir);

	if (bundle == NULL || strncmp(bundle, dir, n) != 0 || bundle[n] != '/')
		return 0;
	bundle += n + 1;
	n = strlen(name);
	return strncmp(bundle, name, n) == 0 && (bundle[n] == '/' || bundle[n] == '\0');
}

/*
 * A hidden path must show nothing: gone (under another mask), an empty
 * read-only directory (but for the path down to the session's CA bundle,
 * which vrun puts back), or /dev/null.
 */
static int
mask_ok(const char *path, const char *bundle, const struct stat *devnull, char *why, size_t size)
{
	struct statvfs sv;
	struct dirent *de;
	struct stat st;
	DIR *d;

	/* stat, not lstat: a symlink's target is what the sandbox masks. */
	if (stat(path, &st) != 0)
		return errno == ENOENT ? 1
		                       : (snprintf(why, size, "%s: %s", path, strerror(errno)), 0);
	if (S_ISCHR(st.st_mode) && st.st_rdev == devnull->st_rdev)
		return 1;
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, size, "%s is visible", path);
		return 0;
	}
	if (statvfs(path, &sv) != 0 || (sv.f_flag & ST_RDONLY) == 0) {
		snprintf(why, size, "%s is a writable directory", path);
		return 0;
	}
	if ((d = opendir(path)) == NULL) {
		snprintf(why, size, "%s: %s", path, strerror(errno));
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    on_bundle_path(path, de->d_name, bundle))
			continue;
		snprintf(why, size, "%s shows %s", path, de->d_name);
		closedir(d);
		return 0;
	}
	closedir(d);
	return 1;
}

static void
probe_masks(struct check_report *rep, const struct probe_args *a)
{
	const char *bundle = a->session ? getenv("SSL_CERT_FILE") : NULL;
	char why[512], bad[1024] = "";
	struct stat devnull;
	size_t nbad = 0;

	if (stat("/dev/null", &devnull) != 0 || !S_ISCHR(devnull.st_mode)) {
		check_line(rep, CHECK_FAIL, "masks", "/dev/null is not a character device");
		return;
	}
	for (size_t i = 0; i < a->nhidden; i++)
		if (!mask_ok(a->hidden[i], bundle, &devnull, why, sizeof(why))) {
			nbad++;
			note_add(bad, sizeof(bad), "%s", why);
		}
	if (a->nhidden == 0)
		check_line(rep, CHECK_FAIL, "masks",
		           "nothing to hide: there is no vault yet: create one with `vault init`, "
		           "then run `vrun --check` again");
	else if (nbad == 0)
		check_line(
		        rep, CHECK_OK, "masks",
		        "%zu path%s hidden (the vault, vproxy's runtime directory, the profile's)",
		        a->nhidden, a->nhidden == 1 ? "" : "s");
	else
		check_line(rep, CHECK_FAIL, "masks", "%zu of %zu visible: %s", nbad, a->nhidden,
		           bad);
	for (size_t i = 0; i < a->nhidden; i++)
		check_detail(rep, "%s", a->hidden[i]);
}

static void
probe_descriptors(struct check_report *rep)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	char extra[256] = "";

	if (d == NULL) {
		check_line(rep, CHECK_FAIL, "descriptors", "/proc/self/fd: %s", strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		int fd = atoi(de->d_name);

		if (de->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
			continue;
		note_add(extra, sizeof(extra), "%d", fd);
	}
	closedir(d);
	if (extra[0] == '\0')
		check_line(rep, CHECK_OK, "descriptors", "none inherited but 0-2");
	else
		check_line(rep, CHECK_FAIL, "descriptors", "inherited: %s", extra);
}

/* ---- the CA bundle and TLS through vproxy ---- */

/* The OpenSSL functions used, typed after their declarations. */
#define SSL_FUNCS(X)                                                                               \
	X(TLS_client_method)                                                                       \
	X(SSL_CTX_new)                                                                             \
	X(SSL_CTX_free)                                                                            \
	X(SSL_CTX_load_verify_locations)                                                           \
	X(SSL_CTX_set_verify)                                                                      \
	X(SSL_new)                                                                                 \
	X(SSL_free)                                                                                \
	X(SSL_set_fd)                                                                              \
	X(SSL_ctrl)                                                                                \
	X(SSL_set1_host)                                                                           \
	X(SSL_get0_param)                                                                          \
	X(SSL_connect)                                                                             \
	X(SSL_shutdown)                                                                            \
	X(SSL_get_verify_result)                                                                   \
	X(X509_verify_cert_error_string)                                                           \
	X(X509_VERIFY_PARAM_set1_ip_asc)                                                           \
	X(ERR_get_error)                                                                           \
	X(ERR_error_string_n)                                                                      \
	X(BIO_new_file)                                                                            \
	X(BIO_free)                                                                                \
	X(PEM_read_bio_X509)                                                                       \
	X(X509_free)                                                                               \
	X(X509_get_ext_d2i)                                                                        \
	X(X509_check_ca)                                                                           \
	X(NAME_CONSTRAINTS_free)                                                                   \
	X(OPENSSL_sk_num)                                                                          \
	X(OPENSSL_sk_value)                                                                        \
	X(ASN1_STRING_get0_data)                                                                   \
	X(ASN1_STRING_length)

#define SSL_DECLARE(f) __typeof__(&f) f;
static struct {
	SSL_FUNCS(SSL_DECLARE)
} ossl;

static int
load_openssl(char *why, size_t size)
{
	void *h = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL), *sym;

	if (h == NULL) {
		snprintf(why, size, "cannot load OpenSSL (libssl.so.3): %s", dlerror());
		return -1;
	}
#define SSL_LOAD(f)                                                                                \
	if ((sym = dlsym(h, #f)) == NULL) {                                                        \
		snprintf(why, size, "OpenSSL lacks %s", #f);                                       \
		return -1;                                                                         \
	}                                                                                          \
	memcpy(&ossl.f, &sym, sizeof(sym)); /* object to function pointer, as POSIX allows */
	SSL_FUNCS(SSL_LOAD)
#undef SSL_LOAD
	return 0;
}

/*
 * Count the certificates in the bundle and find the session CA: the CA
 * certificate with name constraints. Its first permitted name (a host
 * bound to the session's key) goes to host, with is_ip set for an address.
 */
static int
read_bundle(const char *path, int *ncerts, char *host, size_t size, int *is_ip, char *why,
            size_t wsize)
{
	BIO *b = ossl.BIO_new_file(path, "r");
	X509 *x;
	int found = 0;

	*ncerts = 0;
	host[0] = '\0';
	if (b == NULL) {
		snprintf(why, wsize, "cannot read %s", path);
		return -1;
	}
	while ((x = ossl.PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
		NAME_CONSTRAINTS *nc;

		(*ncerts)++;
		nc = found ? NULL : ossl.X509_get_ext_d2i(x, NID_name_constraints, NULL, NULL);
		if (nc != NULL && ossl.X509_check_ca(x) > 0 && nc->permittedSubtrees != NULL &&
		    ossl.OPENSSL_sk_num((const OPENSSL_STACK *)nc->permittedSubtrees) > 0) {
			GENERAL_SUBTREE *t = ossl.OPENSSL_sk_value(
			        (const OPENSSL_STACK *)nc->permittedSubtrees, 0);
			GENERAL_NAME *gn = t->base;

			if (gn->type == GEN_DNS) {
				snprintf(host, size, "%.*s", ossl.ASN1_STRING_length(gn->d.dNSName),
				         (const char *)ossl.ASN1_STRING_get0_data(gn->d.dNSName));
				*is_ip = 0;
				found = 1;
			} else if (gn->type == GEN_IPADD) {
				/* Address then mask: 8 bytes for IPv4, 32 for IPv6. */
				const unsigned char *ip =
				        ossl.ASN1_STRING_get0_data(gn->d.iPAddress);
				int len = ossl.ASN1_STRING_length(gn->d.iPAddress);

				if ((len == 8 && inet_ntop(AF_INET, ip, host, (socklen_t)size)) ||
				    (len == 32 && inet_ntop(AF_INET6, ip, host, (socklen_t)size))) {
					*is_ip = 1;
					found = 1;
				}
			}
		}
		if (nc != NULL)
			ossl.NAME_CONSTRAINTS_free(nc);
		ossl.X509_free(x);
	}
	ossl.BIO_free(b);
	if (!found) {
		snprintf(why, wsize, "%s holds no session CA (%d certificates)", path, *ncerts);
		return -1;
	}
	return 0;
}

/* CONNECT host:443 through the proxy; the HTTP status, or -1. */
static int
proxy_connect(int s, const char *host, int is_ip6)
{
	char req[512], resp[1024];
	size_t len = 0;
	ssize_t n;
	int status = -1;

	snprintf(req, sizeof(req), "CONNECT %s%s%s:443 HTTP/1.1\r\nHost: %s%s%s:443\r\n\r\n",
	         is_ip6 ? "[" : "", host, is_ip6 ? "]" : "", is_ip6 ? "[" : "", host,
	         is_ip6 ? "]" : "");
	if (write(s, req, strlen(req)) != (ssize_t)strlen(req))
		return -1;
	/* Byte by byte: what follows the head belongs to TLS. */
	while (len + 1 < sizeof(resp)) {
		if ((n = read(s, resp + len, 1)) <= 0)
			break;
		len++;
		resp[len] = '\0';
		if (len >= 4 && strcmp(resp + len - 4, "\r\n\r\n") == 0)
			break;
	}
	resp[len] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
		return -1;
	return status;
}

static int
tls_handshake(int s, const char *bundle, const char *host, int is_ip, char *why, size_t size)
{
	SSL_CTX *ctx = ossl.SSL_CTX_new(ossl.TLS_client_method());
	SSL *ssl = NULL;
	long vr;
	int r = -1;

	if (ctx == NULL || ossl.SSL_CTX_load_verify_locations(ctx, bundle, NULL) != 1) {
		snprintf(why, size, "cannot load %s into OpenSSL", bundle);
		goto out;
	}
	ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if ((ssl = ossl.SSL_new(ctx)) == NULL || ossl.SSL_set_fd(ssl, s) != 1)
		goto out;
	if (is_ip)
		r = ossl.X509_VERIFY_PARAM_set1_ip_asc(ossl.SSL_get0_param(ssl), host) == 1 ? 0
		                                                                            : -1;
	else
		r = ossl.SSL_set1_host(ssl, host) == 1 &&
		                    ossl.SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME,
		                                  TLSEXT_NAMETYPE_host_name, (void *)host) == 1
		            ? 0
		            : -1;
	if (r != 0) {
		snprintf(why, size, "cannot set up the TLS client");
		goto out;
	}
	r = -1;
	if (ossl.SSL_connect(ssl) != 1) {
		char e[256];

		vr = ossl.SSL_get_verify_result(ssl);
		ossl.ERR_error_string_n(ossl.ERR_get_error(), e, sizeof(e));
		snprintf(why, size, "handshake failed: %s",
		         vr != X509_V_OK ? ossl.X509_verify_cert_error_string(vr) : e);
		goto out;
	}
	if ((vr = ossl.SSL_get_verify_result(ssl)) != X509_V_OK) {
		snprintf(why, size, "certificate not verified: %s",
		         ossl.X509_verify_cert_error_string(vr));
		goto out;
	}
	ossl.SSL_shutdown(ssl);
	r = 0;
out:
	if (ssl != NULL)
		ossl.SSL_free(ssl);
	if (ctx != NULL)
		ossl.SSL_CTX_free(ctx);
	return r;
}

static void
probe_tls(struct check_report *rep, int port)
{
	const char *bundle = getenv("SSL_CERT_FILE");
	char why[512], host[256];
	int ncerts, is_ip = 0, s, status, e;

	if (bundle == NULL || bundle[0] != '/') {
		check_line(rep, CHECK_FAIL, "CA bundle", "SSL_CERT_FILE is not set");
		return;
	}
	if (load_openssl(why, sizeof(why)) != 0 ||
	    read_bundle(bundle, &ncerts, host, sizeof(host), &is_ip, why, sizeof(why)) != 0) {
		check_line(rep, CHECK_FAIL, "CA bundle", "%s", why);
		return;
	}
	check_line(rep, CHECK_OK, "CA bundle",
	           "%s: %d certificates, with the session CA (name-constrained to the session's "
	           "hosts)",
	           bundle, ncerts);
	if (port < 0)
		return;
	if ((e = connect_tcp4("127.0.0.1", port, &s)) != 0) {
		check_line(rep, CHECK_FAIL, "TLS", "cannot reach the proxy: %s", strerror(e));
		return;
	}
	status = proxy_connect(s, host, is_ip && strchr(host, ':') != NULL);
	if (status == 403) {
		check_line(rep, CHECK_NOTE, "TLS",
		           "%s:443 is not bound as such (a wildcard or another port), so no "
		           "handshake was tried; vproxy answered 403 (see `vault audit --denied`)",
		           host);
	} else if (status != 200) {
		check_line(rep, CHECK_FAIL, "TLS", "CONNECT %s:443: the proxy answered %d", host,
		           status);
	} else if (tls_handshake(s, bundle, host, is_ip, why, sizeof(why)) != 0) {
		check_line(rep, CHECK_FAIL, "TLS", "%s:443 through vproxy: %s", host, why);
	} else {
		check_line(rep, CHECK_OK, "TLS",
		           "%s:443 through vproxy: the certificate verifies against the bundle "
		           "(no request sent)",
		           host);
	}
	close(s);
}

/* ---- main ---- */

static int
parse_ns(const char *arg, struct probe_args *a)
{
	char name[16];
	unsigned long long ino;
	int used;

	while (*arg != '\0') {
		if (sscanf(arg, "%15[a-z]:%llu%n", name, &ino, &used) != 2)
			return -1;
		for (size_t i = 0; i < NNS; i++)
			if (strcmp(name, ns_names[i]) == 0)
				a->ns[i] = ino;
		arg += used;
		if (*arg == ',')
			arg++;
	}
	a->have_ns = 1;
	return 0;
}

int
check_probe_main(int argc, char **argv)
{
	static const struct option opts[] = {{"ns", required_argument, NULL, 'n'},
	                                     {"tcp4", required_argument, NULL, '4'},
	                                     {"tcp6", required_argument, NULL, '6'},
	                                     {"abstract", required_argument, NULL, 'a'},
	                                     {"hidden", required_argument, NULL, 'H'},
	                                     {"verbose", no_argument, NULL, 'v'},
	                                     {NULL, 0, NULL, 0}};
	static struct probe_args a;
	struct check_report rep;
	char status[8192];
	int c, verbose = 0, port;

	opterr = 0;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_ns(optarg, &a) != 0)
				return 100;
			break;
		case '4':
			a.tcp4 = atoi(optarg);
			break;
		case '6':
			a.tcp6 = atoi(optarg);
			break;
		case 'a':
			a.abstract = optarg;
			break;
		case 'H':
			if (a.nhidden < MAX_HIDDEN)
				a.hidden[a.nhidden++] = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			fprintf(stderr, "vrun: %s is for vrun --check only\n", CHECK_PROBE_ARG);
			return 100;
		}
	}
	a.session =
	        getenv(CHECK_SESSION_ENV) != NULL && strcmp(getenv(CHECK_SESSION_ENV), "1") == 0;
	check_report_init(&rep, verbose);
	if (read_status(status, sizeof(status)) != 0)
		status[0] = '\0';
	probe_namespaces(&rep, &a);
	probe_privileges(&rep, status);
	probe_seccomp(&rep, status);
	probe_landlock(&rep);
	probe_network(&rep, &a);
	probe_masks(&rep, &a);
	probe_descriptors(&rep);
	if (a.session) {
		port = proxy_port();
		if (probe_proxy(&rep, port) != 0)
			port = -1;
		probe_tls(&rep, port);
	}
	fflush(stdout);
	return rep.failed > 100 ? 100 : (int)rep.failed;
}
