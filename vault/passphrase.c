#define _GNU_SOURCE
#include "passphrase.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "verr.h"

static volatile sig_atomic_t caught[NSIG];

static const int tty_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU};
#define NTTY_SIGNALS (sizeof(tty_signals) / sizeof(tty_signals[0]))
/* The ones that end the process: blocked but while waiting for input. */
#define NTTY_ENDING 4

/*
 * Wait until fd is readable with the ending signals unblocked for exactly
 * that long: one arriving just before the wait must still interrupt it
 * (a plain read() would sleep through a signal handled just before it).
 * 0, or -1 with errno (EINTR: a signal).
 */
static int
wait_input(int fd, const sigset_t *waitmask)
{
#ifdef __linux__
	struct pollfd p = {fd, POLLIN, 0};

	return ppoll(&p, 1, NULL, waitmask) < 0 ? -1 : 0;
#else
	fd_set rd;

	FD_ZERO(&rd);
	FD_SET(fd, &rd);
	return pselect(fd + 1, &rd, NULL, NULL, NULL, waitmask) < 0 ? -1 : 0;
#endif
}

static int
any_caught(void)
{
	for (size_t i = 0; i < NTTY_SIGNALS; i++)
		if (caught[tty_signals[i]])
			return 1;
	return 0;
}

static void
note_signal(int sig)
{
	caught[sig] = 1;
}

int
passphrase_have_tty(void)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

int
passphrase_tty(const char *prompt, size_t max, int echo, struct secbuf **out)
{
	struct sigaction sa, saved_sa[NTTY_SIGNALS];
	sigset_t ending, saved_mask, waitmask;
	struct termios saved_term, term;
	struct secbuf *b = NULL;
	int fd, r, saved_errno, restore = 0;
	unsigned char c;
	ssize_t n;

	*out = NULL;
	if ((fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		return VERR_NO_TTY;
	if ((r = secbuf_new(max, &b)) != 0)
		goto out;
	for (size_t i = 0; i < NSIG; i++)
		caught[i] = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = note_signal; /* no SA_RESTART: read() returns EINTR */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < NTTY_SIGNALS; i++)
		sigaction(tty_signals[i], &sa, &saved_sa[i]);
	sigemptyset(&ending);
	for (size_t i = 0; i < NTTY_ENDING; i++)
		sigaddset(&ending, tty_signals[i]);
	sigprocmask(SIG_BLOCK, &ending, &saved_mask);
	waitmask = saved_mask;
	for (size_t i = 0; i < NTTY_ENDING; i++)
		sigdelset(&waitmask, tty_signals[i]);
	if (tcgetattr(fd, &saved_term) != 0) {
		r = VERR_NO_TTY;
		goto restore_signals;
	}
	term = saved_term;
	if (!echo)
		term.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
	term.c_lflag |= ICANON;
	if (tcsetattr(fd, TCSAFLUSH, &term) != 0) {
		r = VERR_SYSTEM;
		goto restore_signals;
	}
	restore = 1;
	if (write(fd, prompt, strlen(prompt)) < 0) {
		r = VERR_SYSTEM;
		goto restore_term;
	}
	r = VERR_OK;
	for (;;) {
		if (any_caught() || wait_input(fd, &waitmask) != 0) {
			r = VERR_SYSTEM;
			if (any_caught())
				errno = EINTR; /* interrupted: re-raised below */
			break;
		}
		n = read(fd, &c, 1);
		if (n < 0 && errno == EINTR) {
			r = VERR_SYSTEM;
			break;
		}
		if (n < 0) {
			r = VERR_SYSTEM;
			break;
		}
		if (n == 0 || c == '\n' || c == '\r')
			break;
		if (b->len >= b->cap) {
			/* Keep reading to the newline so nothing spills into the shell. */
			r = VERR_TOO_LARGE;
			continue;
		}
		b->data[b->len++] = c;
	}
	c = 0;
restore_term:
	saved_errno = errno;
	if (restore)
		tcsetattr(fd, TCSAFLUSH, &saved_term);
	if (!echo)
		(void)!write(fd, "\n", 1);
	errno = saved_errno;
restore_signals:
	saved_errno = errno;
	for (size_t i = 0; i < NTTY_SIGNALS; i++)
		sigaction(tty_signals[i], &saved_sa[i], NULL);
	sigprocmask(SIG_SETMASK, &saved_mask, NULL);
	/* Deliver what arrived while echo was off, now that the tty is sane. */
	for (size_t i = 0; i < NTTY_SIGNALS; i++)
		if (caught[tty_signals[i]])
			kill(getpid(), tty_signals[i]);
	errno = saved_errno;
out:
	close(fd);
	if (r == 0) {
		*out = b;
		b = NULL;
	}
	secbuf_free(b);
	return r;
}

int
passphrase_file(const char *path, struct secbuf **out)
{
	struct secbuf *b = NULL;
	struct stat st;
	unsigned char c;
	ssize_t n;
	int fd, r;

	*out = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return VERR_PASSPHRASE_FILE;
	/*
	 * Regular files must be private; pipes (bash's <(...)) and character
	 * devices have no such permissions to check.
	 */
	if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode) ||
	    (S_ISREG(st.st_mode) && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)) {
		r = VERR_PASSPHRASE_FILE;
		goto out;
	}
	if ((r = secbuf_new(PASSPHRASE_MAX, &b)) != 0)
		goto out;
	/* Byte at a time: no stdio buffer may keep a copy of the passphrase. */
	for (;;) {
		n = read(fd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = VERR_PASSPHRASE_FILE;
			goto out;
		}
		if (n == 0 || c == '\n')
			break;
		if ((r = secbuf_append(b, &c, 1)) != 0)
			goto out;
	}
	c = 0;
	if (b->len > 0 && b->data[b->len - 1] == '\r')
		b->data[--b->len] = 0;
	if (b->len == 0) {
		r = VERR_PASSPHRASE_EMPTY;
		goto out;
	}
	*out = b;
	b = NULL;
	r = VERR_OK;
out:
	close(fd);
	secbuf_free(b);
	return r;
}

int
passphrase_get(const char *envvar, const char *prompt, int confirm, struct secbuf **out)
{
	struct secbuf *a = NULL, *b = NULL;
	const char *file = envvar != NULL ? getenv(envvar) : NULL;
	int r;

	*out = NULL;
	if (file != NULL && file[0] != '\0')
		return passphrase_file(file, out);
	if ((r = passphrase_tty(prompt, PASSPHRASE_MAX, 0, &a)) != 0)
		goto out;
	if (a->len == 0) {
		r = VERR_PASSPHRASE_EMPTY;
		goto out;
	}
	if (confirm) {
		if ((r = passphrase_tty("Repeat passphrase: ", PASSPHRASE_MAX, 0, &b)) != 0)
			goto out;
		if (!secbuf_equal(a, b)) {
			r = VERR_PASSPHRASE_MISMATCH;
			goto out;
		}
	}
	*out = a;
	a = NULL;
	r = VERR_OK;
out:
	secbuf_free(a);
	secbuf_free(b);
	return r;
}
