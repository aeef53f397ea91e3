#define _GNU_SOURCE
#include "passphrase.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>

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

static int
is_key(unsigned char c, cc_t key)
{
	return key != _POSIX_VDISABLE && c == key;
}

/* Characters in b: bytes, or with utf8 the bytes that are not continuation bytes. */
static size_t
line_chars(const struct secbuf *b, int utf8)
{
	size_t n = 0;

	for (size_t i = 0; i < b->len; i++)
		if (!utf8 || (b->data[i] & 0xc0) != 0x80)
			n++;
	return n;
}

static void
line_cut(struct secbuf *b, size_t len)
{
	sodium_memzero(b->data + len, b->len - len);
	b->len = len;
}

int
passphrase_edit(struct secbuf *b, unsigned char c, const struct termios *t)
{
	size_t len = b->len;

	if (c == '\r' || c == '\n')
		return PASSPHRASE_LINE;
	/* Terminals disagree on whether Backspace sends BS or DEL: both erase. */
	if (c == 0x7f || c == 0x08 || is_key(c, t->c_cc[VERASE])) {
		/* With IUTF8 a character is its lead byte and the continuations after it. */
		while (len > 0 && (t->c_iflag & IUTF8) && (b->data[len - 1] & 0xc0) == 0x80)
			len--;
		if (len > 0)
			len--;
		line_cut(b, len);
		return PASSPHRASE_MORE;
	}
	if (is_key(c, t->c_cc[VKILL])) {
		line_cut(b, 0);
		return PASSPHRASE_MORE;
	}
	/* The word-erase key (Ctrl-W), where the terminal had it: blanks, then a word. */
	if ((t->c_lflag & IEXTEN) && is_key(c, t->c_cc[VWERASE])) {
		while (len > 0 && (b->data[len - 1] == ' ' || b->data[len - 1] == '\t'))
			len--;
		while (len > 0 && b->data[len - 1] != ' ' && b->data[len - 1] != '\t')
			len--;
		line_cut(b, len);
		return PASSPHRASE_MORE;
	}
	if (is_key(c, t->c_cc[VEOF]))
		return b->len == 0 ? PASSPHRASE_EOF : PASSPHRASE_MORE;
	if (b->len >= b->cap)
		return VERR_TOO_LARGE;
	b->data[b->len++] = c;
	return PASSPHRASE_MORE;
}

/* Bytes already waiting on the terminal; 0 when it cannot say. */
static int
input_waiting(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/*
 * After the end of the line: is there a second line? A paste of several
 * lines arrives at once, so input already waiting means one; the first
 * line alone is not what the person meant. CR LF is one line end.
 */
static int
more_lines(int fd, unsigned char end)
{
	unsigned char c;
	ssize_t n;

	if (!input_waiting(fd))
		return 0;
	if (end != '\r')
		return 1;
	n = read(fd, &c, 1);
	if (n != 1 || c != '\n') {
		sodium_memzero(&c, sizeof(c)); /* a byte of the next line */
		return 1;
	}
	return input_waiting(fd);
}

/* Show the person's typing where echo was asked for: erasures and visible bytes. */
static void
echo_edit(int fd, size_t before, size_t after, unsigned char c, int grew)
{
	for (; before > after; before--)
		(void)!write(fd, "\b \b", 3);
	if (grew && c >= 0x20 && c != 0x7f)
		(void)!write(fd, &c, 1);
}

int
passphrase_tty(const char *prompt, size_t max, int echo, struct secbuf **out)
{
	struct sigaction sa, saved_sa[NTTY_SIGNALS];
	sigset_t ending, saved_mask, waitmask;
	struct termios saved_term, term;
	struct secbuf *b = NULL;
	int fd, e, r, saved_errno, restore = 0, utf8;
	size_t before = 0, len;
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
	/*
	 * Non-canonical, and the editing done here: the kernel cuts a canonical
	 * line at 4095 bytes without a word, and secrets may be longer. Echo is
	 * ours too (non-canonical echo would print erasures as ^?). CR and LF
	 * arrive unmapped so that CR LF can be told from two line ends. Signal
	 * keys keep working (ISIG). IEXTEN off: BSDs would still act on ^V and
	 * ^O without ICANON.
	 */
	term = saved_term;
	term.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ECHONL | IEXTEN);
	term.c_lflag |= ISIG;
	term.c_iflag &= ~(tcflag_t)(ICRNL | INLCR | IGNCR);
	term.c_cc[VMIN] = 1;
	term.c_cc[VTIME] = 0;
	utf8 = (saved_term.c_iflag & IUTF8) != 0;
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
		if (n < 0) {
			r = VERR_SYSTEM;
			break;
		}
		if (n == 0) {
			/* The end-of-file key is the editor's: this is a hang-up, mid-line. */
			errno = EIO;
			r = VERR_SYSTEM;
			break;
		}
		len = b->len;
		if (echo)
			before = line_chars(b, utf8);
		/* The erase and kill keys are the ones the person set up, as in canonical mode. */
		e = passphrase_edit(b, c, &saved_term);
		if (e == VERR_TOO_LARGE) {
			/* Keep reading to the end of the line so none of it reaches the shell. */
			r = VERR_TOO_LARGE;
			continue;
		}
		if (e == PASSPHRASE_EOF)
			break;
		if (e == PASSPHRASE_LINE) {
			if (r == VERR_OK && more_lines(fd, c))
				r = VERR_PASTE_LINES;
			break;
		}
		if (echo)
			echo_edit(fd, before, line_chars(b, utf8), c, b->len > len);
	}
	sodium_memzero(&c, sizeof(c));
restore_term:
	saved_errno = errno;
	/* TCSAFLUSH: the rest of a refused paste is dropped, not run by the shell. */
	if (restore)
		tcsetattr(fd, TCSAFLUSH, &saved_term);
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
