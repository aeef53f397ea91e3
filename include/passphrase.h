/*
 * passphrase: reading passphrases and secrets from a person.
 *
 * Sources, in order: the first line of the file named by an environment
 * variable (VAULT_PASSPHRASE_FILE for the current passphrase,
 * VAULT_NEW_PASSPHRASE_FILE for a new one), else the controlling terminal
 * with echo off. Standard input is never used, so it stays free for piping
 * a secret into `vault add`.
 */
#ifndef VRUN_PASSPHRASE_H
#define VRUN_PASSPHRASE_H

#include "secbuf.h"

#define PASSPHRASE_MAX 1024

/*
 * Read a passphrase. envvar names the file variable to honour (NULL for
 * none); prompt is shown on the terminal; with confirm the person types it
 * twice (ignored when a file is used). Empty passphrases are refused.
 * Returns 0 or VERR_NO_TTY, VERR_PASSPHRASE_*, VERR_TOO_LARGE, ...
 */
int passphrase_get(const char *envvar, const char *prompt, int confirm, struct secbuf **out);

/*
 * Read one line from the controlling terminal, with echo off unless echo,
 * into a buffer of at most max bytes (the newline is not stored; longer
 * lines give VERR_TOO_LARGE). Signals that arrive meanwhile are delivered
 * after the terminal is restored.
 */
int passphrase_tty(const char *prompt, size_t max, int echo, struct secbuf **out);

/* Is there a controlling terminal we could ask on? */
int passphrase_have_tty(void);

/* The first line of path; the file must not be accessible by group/others. */
int passphrase_file(const char *path, struct secbuf **out);

#endif
