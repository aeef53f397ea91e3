/*
 * sbpl: compile a sandbox profile into a macOS Seatbelt profile (SBPL).
 *
 * The text is generated here, on any platform, so that it can be tested
 * byte for byte against golden files; only sandbox-macos.c applies it.
 * The generator cannot stat paths on the target machine, so it uses rules
 * that are right whether a hidden path is a file, a directory or a socket,
 * and adds the /private/... spelling of /var, /tmp and /etc paths, because
 * Seatbelt matches the resolved path and those are symlinks on macOS.
 */
#ifndef VRUN_SBPL_H
#define VRUN_SBPL_H

#include <stddef.h>

#include "profile.h"

/*
 * Generate the Seatbelt profile for p: network limited to outbound TCP to
 * localhost:proxy_port, signals limited to the sandbox, p's hidden paths
 * and the NULL-terminated deny_paths_extra (the vault and runtime
 * directories; may be NULL) denied for reading, writing and unix-socket
 * connects. *out (malloc'd, NUL-terminated) and *len are cleared first and
 * set on success.
 *
 * Returns 0, VERR_INVALID (bad port or arguments), VERR_SBPL_STRING (a
 * path that is not absolute, holds a control byte, is not UTF-8, or has
 * "." or ".." components), VERR_NOMEM.
 */
int sbpl_generate(const struct profile *p, int proxy_port, const char *const *deny_paths_extra,
                  char **out, size_t *len);

/*
 * As sbpl_generate, and then allow reading (only) each file in the
 * NULL-terminated allow_read (may be NULL): the session's CA bundle, which
 * vproxy writes into the runtime directory that is otherwise denied.
 */
int sbpl_generate_session(const struct profile *p, int proxy_port,
                          const char *const *deny_paths_extra, const char *const *allow_read,
                          char **out, size_t *len);

/*
 * Write s as an SBPL string literal ("..." with \" and \\ escaped) into
 * buf. Returns 0, VERR_SBPL_STRING for control bytes or invalid UTF-8,
 * VERR_TOO_LARGE when buf is short.
 */
int sbpl_quote(const char *s, char *buf, size_t size);

#endif
