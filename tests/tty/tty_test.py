#!/usr/bin/env python3
"""Terminal behaviour of `vault`: passphrases and secrets typed on a real
pseudo-terminal are never echoed, prompts appear on the terminal, the host is
asked for interactively, and an interrupt at a hidden prompt leaves the
terminal with echo back on.

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

    def __init__(self, args, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
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
        os.write(self.fd, data)

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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
