#!/usr/bin/env python3
"""Terminal behaviour of `vault`: passphrases and secrets typed on a real
pseudo-terminal are never echoed, prompts appear on the terminal, the host is
asked for interactively, and an interrupt at a hidden prompt leaves the
terminal with echo back on. Secrets longer than the kernel's canonical line
(4095 bytes) are kept whole up to the 16384-byte limit; a paste of several
lines is refused rather than cut to its first line; erase, kill and
end-of-file keys work at hidden prompts.

usage: tty_test.py /path/to/vault
"""
import os
import pty
import select
import shutil
import signal
import sys
import tempfile
import termios
import time

VAULT = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class Term:
    """A child process on a fresh pty, with a transcript of what it showed."""

    def __init__(self, args, env, iflag=0):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            if iflag:
                attrs = termios.tcgetattr(0)
                attrs[0] |= iflag
                termios.tcsetattr(0, termios.TCSANOW, attrs)
            os.execve(args[0], args, env)
        self.out = b""

    def expect(self, needle, timeout=20):
        end = time.time() + timeout
        while needle not in self.out:
            left = end - time.time()
            if left <= 0:
                raise AssertionError("timed out waiting for %r; got %r" % (needle, self.out))
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:
                    data = b""
                if not data:
                    raise AssertionError("EOF waiting for %r; got %r" % (needle, self.out))
                self.out += data

    def send(self, data):
        # A pty takes a few KiB at a time: keep writing as the child reads.
        while data:
            data = data[os.write(self.fd, data):]

    def finish(self, timeout=30):
        end = time.time() + timeout
        while True:
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:
                    data = b""
                self.out += data
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                try:
                    while True:
                        data = os.read(self.fd, 4096)
                        if not data:
                            break
                        self.out += data
                except OSError:
                    pass
                return status
            if time.time() > end:
                os.kill(self.pid, signal.SIGKILL)
                raise AssertionError("child did not exit; got %r" % self.out)


def exited(st, code):
    return os.WIFEXITED(st) and os.WEXITSTATUS(st) == code


def term_sane(t, what):
    """The terminal is back in canonical mode with echo, as the child found it."""
    try:
        attrs = termios.tcgetattr(t.fd)
    except termios.error:
        check(False, "terminal attributes readable after " + what)
        return
    check(attrs[3] & termios.ECHO and attrs[3] & termios.ICANON,
          "echo and canonical mode restored after " + what)
    check(attrs[0] & termios.ICRNL, "CR mapping restored after " + what)


def add_typed(env, passphrase, name, typed, host="t.example.com", before=None):
    """`vault add NAME --host HOST` with typed sent at the secret prompt."""
    t = Term([VAULT, "add", name, "--host", host], env)
    t.expect(b"Vault passphrase: ")
    t.send(passphrase + b"\n")
    t.expect(b"Secret (input hidden): ")
    if before is not None:
        before(t)
    t.send(typed)
    return t, t.finish()


def show(env, passphrase, name):
    t = Term([VAULT, "show", name], env)
    t.expect(b"Vault passphrase: ")
    t.send(passphrase + b"\n")
    return t, t.finish()


def stored_len(env, passphrase, name):
    """The secret length `vault show` reports, or None when there is no such key."""
    t, st = show(env, passphrase, name)
    if not exited(st, 0):
        check(b"no such key" in t.out, "show %s: refused only because it is missing (%r)"
              % (name, t.out))
        return None
    for line in t.out.splitlines():
        if line.startswith(b"secret:"):
            return int(line.split()[1])
    check(False, "show %s reports a secret length (%r)" % (name, t.out))
    return None


def line_editing(tmp, env, passphrase):
    # Longer than a canonical line, shorter than the limit: kept whole.
    long5000 = os.urandom(2500).hex().encode()
    t, st = add_typed(env, passphrase, "long5000", long5000 + b"\n")
    check(exited(st, 0), "a 5000-byte secret typed on a terminal is accepted (%r)" % t.out[-200:])
    check(long5000[:64] not in t.out, "the long secret is not echoed")
    term_sane(t, "a long secret")
    got = stored_len(env, passphrase, "long5000")
    check(got == 5000, "a 5000-byte secret is stored whole (show says %r bytes)" % got)

    # Exactly the limit is fine; one byte more is refused and stores nothing.
    t, st = add_typed(env, passphrase, "max", b"m" * 16384 + b"\n")
    check(exited(st, 0), "a 16384-byte secret is accepted")
    check(stored_len(env, passphrase, "max") == 16384, "a 16384-byte secret is stored whole")
    t, st = add_typed(env, passphrase, "over", b"o" * 16385 + b"\n")
    check(exited(st, 1), "a 16385-byte secret is refused with exit 1")
    check(b"at most 16384 bytes" in t.out, "the refusal names the limit (%r)" % t.out[-200:])
    check(stored_len(env, passphrase, "over") is None, "a refused long secret stores nothing")

    # A paste of several lines: refused, not cut to its first line.
    t, st = add_typed(env, passphrase, "multi", b"abcdef\nghijkl\n")
    check(exited(st, 1), "a two-line paste at the secret prompt exits 1")
    check(b"several lines were pasted: enter one line" in t.out,
          "a two-line paste is explained (%r)" % t.out[-200:])
    check(b"abcdef" not in t.out and b"ghijkl" not in t.out, "the pasted lines are not echoed")
    term_sane(t, "a refused paste")
    check(stored_len(env, passphrase, "multi") is None, "a two-line paste stores nothing")
    t, st = add_typed(env, passphrase, "multi2", b"abcdef\r\nghijkl")
    check(exited(st, 1), "a paste with a line break but no final newline is refused")
    check(stored_len(env, passphrase, "multi2") is None, "that paste stores nothing")

    # CR LF is one line end (a paste from a Windows text file), CR alone is Enter.
    t, st = add_typed(env, passphrase, "crlf", b"crlf-secret\r\n")
    check(exited(st, 0), "a secret ending in CR LF is accepted (%r)" % t.out[-200:])
    check(stored_len(env, passphrase, "crlf") == 11, "CR LF is not stored")
    t, st = add_typed(env, passphrase, "cr", b"cr-secret\r")
    check(exited(st, 0), "a secret ended by CR (the Enter key) is accepted")
    check(stored_len(env, passphrase, "cr") == 9, "CR is not stored")

    # Erase keys: DEL and BS erase a byte, the kill key (Ctrl-U) the whole line.
    t, st = add_typed(env, passphrase, "erased", b"abcX\x7fdeY\x08f\n")
    check(exited(st, 0), "a secret typed with erasures is accepted")
    check(stored_len(env, passphrase, "erased") == 6, "DEL and BS erase one byte each")
    t, st = add_typed(env, passphrase, "killed", b"wrong-start\x15right\n")
    check(exited(st, 0), "a secret typed with a line kill is accepted")
    check(stored_len(env, passphrase, "killed") == 5, "Ctrl-U erases the whole line")
    t, st = add_typed(env, passphrase, "over-erase", b"ab\x7f\x7f\x7f\x7fcd\n")
    check(exited(st, 0) and stored_len(env, passphrase, "over-erase") == 2,
          "erasing past the start of the line is harmless")

    # Ctrl-D on an empty line ends the input: an empty secret, refused.
    t, st = add_typed(env, passphrase, "eof", b"\x04")
    check(exited(st, 1), "Ctrl-D at the secret prompt exits 1")
    check(b"empty secret refused" in t.out, "Ctrl-D gives an empty secret (%r)" % t.out[-200:])
    term_sane(t, "Ctrl-D")

    # The exact bytes, not only the length: a passphrase typed with erasures
    # and a kill must equal the one a passphrase file gives.
    home2 = tmp + "/edited"
    env2 = dict(env, VAULT_HOME=home2)
    t = Term([VAULT, "init", "--kdf", "interactive"], env2)
    t.expect(b"New vault passphrase: ")
    t.send(b"hunter3\x7f2\n")
    t.expect(b"Repeat passphrase: ")
    t.send(b"nonsense\x15hunterX\x082\r")
    st = t.finish()
    check(exited(st, 0), "init with edited passphrases succeeds (%r)" % t.out)
    pfile = tmp + "/edited.pass"
    with open(pfile, "wb") as f:
        f.write(b"hunter2\n")
    os.chmod(pfile, 0o600)
    t = Term([VAULT, "list"], dict(env2, VAULT_PASSPHRASE_FILE=pfile))
    st = t.finish()
    check(exited(st, 0), "the edited passphrase is exactly 'hunter2' (%r)" % t.out)

    # With IUTF8 one erase removes a whole character: 'hunter\u00e4' -> 'hunter'.
    # (Python's termios lacks IUTF8; it is 0x4000 on Linux and macOS.)
    t = Term([VAULT, "list"], env2, iflag=getattr(termios, "IUTF8", 0x4000))
    t.expect(b"Vault passphrase: ")
    t.send("hunter\u00e4\x7f2\n".encode())
    st = t.finish()
    check(exited(st, 0), "with IUTF8, erase removes a whole UTF-8 character (%r)" % t.out)

    # Several lines at a passphrase prompt: refused too, no first-line guess.
    t = Term([VAULT, "list"], env2)
    t.expect(b"Vault passphrase: ")
    t.send(b"hunter2\nhunter2\n")
    st = t.finish()
    check(exited(st, 1), "a two-line paste at the passphrase prompt exits 1")
    check(b"several lines were pasted" in t.out, "the passphrase paste is explained (%r)"
          % t.out)
    check(b"cannot decrypt" not in t.out, "the paste is refused before any decryption")

    # The host prompt echoes, and erasure shows as erasure.
    t = Term([VAULT, "add", "echoed", "--inject", "bearer"], env)
    t.expect(b"Hosts that may receive this key")
    t.send(b"e.example.comm\x7f\n")
    t.expect(b"Vault passphrase: ")
    t.send(passphrase + b"\n")
    t.expect(b"Secret (input hidden): ")
    t.send(b"echoed-secret\n")
    st = t.finish()
    check(exited(st, 0), "add with an edited host succeeds (%r)" % t.out)
    check(b"e.example.comm\b \b" in t.out, "the host prompt shows the erasure")
    t, st = show(env, passphrase, "echoed")
    check(b"host:       e.example.com:443" in t.out, "the erased byte is not in the host")


def main():
    tmp = tempfile.mkdtemp(prefix="vrun-tty-")
    os.chmod(tmp, 0o700)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "VAULT_HOME": tmp + "/home",
           "HOME": tmp, "TERM": "dumb"}
    passphrase = b"tty-pass-" + os.urandom(6).hex().encode()
    secret = b"tty-secret-" + os.urandom(8).hex().encode()
    try:
        # init: asked twice, hidden both times.
        t = Term([VAULT, "init", "--kdf", "interactive"], env)
        t.expect(b"New vault passphrase: ")
        t.send(passphrase + b"\n")
        t.expect(b"Repeat passphrase: ")
        t.send(passphrase + b"\n")
        st = t.finish()
        check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "init on a terminal succeeds")
        check(passphrase not in t.out, "init does not echo the passphrase")
        check(os.path.exists(tmp + "/home/vault.db"), "init created vault.db")

        # A mismatch is refused and leaves no vault.
        env2 = dict(env, VAULT_HOME=tmp + "/other")
        t = Term([VAULT, "init", "--kdf", "interactive"], env2)
        t.expect(b"New vault passphrase: ")
        t.send(b"one\n")
        t.expect(b"Repeat passphrase: ")
        t.send(b"two\n")
        st = t.finish()
        check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 1, "mismatch exits 1")
        check(b"do not match" in t.out, "mismatch is explained")
        check(not os.path.exists(tmp + "/other/vault.db"), "mismatch creates no vault")

        # add without --host on a terminal: host asked (echoed), secret hidden.
        t = Term([VAULT, "add", "tty-key", "--inject", "bearer"], env)
        t.expect(b"Hosts that may receive this key")
        t.send(b"API.Example.com:8443 *.example.org\n")
        t.expect(b"Vault passphrase: ")
        t.send(passphrase + b"\n")
        t.expect(b"Secret (input hidden): ")
        t.send(secret + b"\n")
        st = t.finish()
        check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "interactive add succeeds")
        check(b"API.Example.com:8443" in t.out, "the host prompt echoes what is typed")
        check(secret not in t.out, "the secret is not echoed")
        check(passphrase not in t.out, "the passphrase is not echoed")

        t = Term([VAULT, "show", "tty-key"], env)
        t.expect(b"Vault passphrase: ")
        t.send(passphrase + b"\n")
        st = t.finish()
        check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "show succeeds")
        check(b"host:       api.example.com:8443" in t.out, "host stored canonically")
        check(b"host:       *.example.org:443" in t.out, "second host stored")
        check(("secret:     %d bytes" % len(secret)).encode() in t.out, "secret length kept")
        check(secret not in t.out, "show does not print the secret")

        # Ctrl-C at a hidden prompt: the process dies of SIGINT, echo is back.
        t = Term([VAULT, "list"], env)
        t.expect(b"Vault passphrase: ")
        attrs = termios.tcgetattr(t.fd)
        check(not (attrs[3] & termios.ECHO), "echo is off at the prompt")
        t.send(b"\x03")
        st = t.finish()
        check(os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGINT,
              "interrupt at the prompt ends the process by SIGINT (got %r)" % st)
        try:
            attrs = termios.tcgetattr(t.fd)
            check(attrs[3] & termios.ECHO, "echo restored after the interrupt")
        except termios.error:
            check(False, "terminal attributes readable after the interrupt")

        line_editing(tmp, env, passphrase)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
