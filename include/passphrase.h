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

#include <termios.h>

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
 * into a buffer of at most max bytes (the line end is not stored). Editing
 * as passphrase_edit; the end-of-file key on an empty line gives an empty
 * buffer. Refused: lines longer than max (VERR_TOO_LARGE) and more input
 * already waiting after the line end, i.e. a paste of several lines
 * (VERR_PASTE_LINES: what was meant holds a line break, and storing the
 * first line alone would lose the rest silently). Signals that arrive
 * meanwhile are delivered after the terminal is restored (VERR_SYSTEM with
 * errno EINTR if the process survives them).
 */
int passphrase_tty(const char *prompt, size_t max, int echo, struct secbuf **out);

/* What passphrase_edit made of a byte, besides VERR_TOO_LARGE. */
#define PASSPHRASE_MORE 0 /* keep reading */
#define PASSPHRASE_LINE 1 /* CR or LF: the line is complete (the byte is not stored) */
#define PASSPHRASE_EOF  2 /* end-of-file key on an empty line */

/*
 * The line editor of passphrase_tty, apart from the terminal: apply input
 * byte c to the line in b. The erase, kill, end-of-file and (with IEXTEN)
 * word-erase keys are those of t (a canonical-mode setting, as from
 * tcgetattr); BS and DEL both erase
 * whatever t says, since terminals disagree on which one Backspace sends.
 * With IUTF8 in t, erase removes a whole UTF-8 character. Erased bytes are
 * wiped. End of file on a non-empty line is ignored. Every other byte is
 * stored as it is. Returns PASSPHRASE_* or VERR_TOO_LARGE when b is full
 * (b is then unchanged).
 */
int passphrase_edit(struct secbuf *b, unsigned char c, const struct termios *t);

/* Is there a controlling terminal we could ask on? */
int passphrase_have_tty(void);

/* The first line of path; the file must not be accessible by group/others. */
int passphrase_file(const char *path, struct secbuf **out);

#endif
