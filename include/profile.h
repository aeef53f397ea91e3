/*
 * profile: sandbox profiles for vrun (what to hide, what extra hosts to
 * tunnel, which network mode), parsed strictly from a small line format
 * documented in profiles/README.md.
 *
 * A profile only ever adds restrictions (hidden paths) or names extra
 * opaque tunnel destinations; the vault and runtime directories are masked
 * by the runner regardless of the profile.
 *
 * Paths in a loaded profile are already expanded ("~/", "$HOME", ...),
 * absolute, normalised (no "//", "." or ".." components, no trailing
 * slash), free of control bytes, valid UTF-8 and deduplicated. Whether
 * they exist is not checked: the sandbox skips missing ones.
 */
#ifndef VRUN_PROFILE_H
#define VRUN_PROFILE_H

#include <stddef.h>

#include "hostspec.h"

#define PROFILE_NAME_MAX       64      /* profile names: [A-Za-z0-9._-], not starting with '.' */
#define PROFILE_FILE_MAX       65536   /* bytes per profile file */
#define PROFILE_LINE_MAX       4200    /* bytes per line, newline excluded */
#define PROFILE_PATH_MAX       4096    /* bytes per expanded path, NUL excluded */
#define PROFILE_DIRECTIVES_MAX 512     /* directives, all included files together */
#define PROFILE_INCLUDE_DEPTH  4       /* nesting of include directives */
#define PROFILE_DEFAULT        "agent" /* the profile vrun uses without --profile */
#define PROFILE_DIR_ENV        "VRUN_PROFILE_DIR" /* overrides the installed directory */

enum profile_network {
	PROFILE_NET_PROXY_ONLY = 1, /* only the session's proxy listener is reachable */
};

struct profile {
	char name[PROFILE_NAME_MAX + 1]; /* name given, or the file's base name (truncated) */
	char **hide;                     /* paths to mask; see above */
	size_t nhide;
	/*
	 * What follows $XDG_RUNTIME_DIR in every "hide $XDG_RUNTIME_DIR..." line
	 * and in the D-Bus "unix:runtime=yes" socket: "" for the directory
	 * itself, else "/REST", normalised, deduplicated. Kept whether or not
	 * the variable is set: on Linux the runner also hides each of them under
	 * /run/user/UID, which gpg-agent, systemd and D-Bus use whatever
	 * XDG_RUNTIME_DIR says (profiles/README.md).
	 */
	char **runtime_hide;
	size_t nruntime_hide;
	struct hostspec *allow; /* extra opaque tunnel destinations, deduplicated */
	char **allow_hosts;     /* the same, canonical "host:port" (hostspec_format) */
	size_t nallow;
	int network; /* enum profile_network; PROFILE_NET_PROXY_ONLY when not given */
};

/*
 * Load a profile. name_or_path without '/' is a profile name looked up as
 * search_dir/NAME (search_dir must then be non-NULL); with a '/' it is a
 * file path. Included profiles are looked up in the including file's
 * directory. *out is cleared first and set only on success.
 *
 * Returns 0, or VERR_PROFILE_NOT_FOUND (missing file or bad name),
 * VERR_PROFILE_SYNTAX (err holds "SOURCE:LINE: what is wrong"),
 * VERR_TOO_LARGE (file or line over a limit), VERR_TOO_MANY (more than
 * PROFILE_DIRECTIVES_MAX directives or 32 allow-host), VERR_INSECURE_PATH
 * (file writable by others), VERR_SYSTEM (errno set), VERR_NOMEM,
 * VERR_INVALID. On any failure err
 * holds a message naming the file (and line, when there is one); err may
 * be NULL when errsize is 0.
 */
int profile_load(const char *name_or_path, const char *search_dir, struct profile **out, char *err,
                 size_t errsize);

/*
 * Parse len bytes of profile text (no NUL needed; a NUL byte is an error).
 * source_name is used in messages and as the profile name. "include" is
 * refused here, since there is no directory to resolve it in. Same
 * return convention as profile_load.
 */
int profile_parse(const char *text, size_t len, const char *source_name, struct profile **out,
                  char *err, size_t errsize);

/* Free a profile from profile_load/profile_parse; NULL is ignored. */
void profile_free(struct profile *p);

/*
 * The directory to look profile names up in: $VRUN_PROFILE_DIR when set
 * and absolute, else installed_dir (the runner passes its compiled-in
 * share/vrun/profiles). Never NULL when installed_dir is not.
 */
const char *profile_search_dir(const char *installed_dir);

/*
 * 1 when n bytes at s are strict UTF-8 (no overlong forms, surrogates or
 * code points past U+10FFFF), else 0. Shared with the SBPL generator.
 */
int profile_utf8_valid(const void *s, size_t n);

#endif
