#!/usr/bin/env python3
"""Run the README's quick start on a terminal; driven by quickstart.sh.

usage: quickstart.py README OUTDIR WORKDIR CERT KEY

Runs in a private network namespace that quickstart.sh set up (this script
brings its `lo` up): nothing here can reach the real httpbin.org, and port
443 is free to bind. It

- extracts the blocks marked `<!-- quickstart: run -->` from README (the
  block marked `quickstart: install` must be there too, and is not run);
- serves a stand-in for httpbin.org on 127.0.0.1:443 (TLS with CERT/KEY, a
  certificate for httpbin.org from a CA made by quickstart.sh): GET /bearer
  answers like httpbin.org's, and every request is logged to
  OUTDIR/server.log (one JSON object per line);
- runs each block with bash on a fresh pseudo-terminal in WORKDIR, typing
  the passphrase (OUTDIR/passphrase) at every "...passphrase: " prompt, and
  writes OUTDIR/block-N.{sh,out,rc,prompts};
- after the block that runs `vproxy start`, with its terminal gone, writes
  what became of the daemon to OUTDIR/daemon.

The one substitution in the blocks: `vproxy start` gets
`--resolve httpbin.org:443:127.0.0.1` (the stand-in); OUTDIR/substitutions
lists it. quickstart.sh checks all of this.
"""
import fcntl
import http.server
import json
import os
import pty
import re
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time

README, OUT, WORK, CERT, KEY = sys.argv[1:6]
PASS = open(os.path.join(OUT, "passphrase"), "rb").read().strip()
BLOCK_TIMEOUT = 120
RESOLVE = "--resolve httpbin.org:443:127.0.0.1"


def extract(readme):
    """The marked blocks: [(kind, text)] in order."""
    blocks = []
    lines = open(readme).read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"<!-- quickstart: (run|install)\b.*-->\s*$", lines[i])
        i += 1
        if not m:
            continue
        if i >= len(lines) or lines[i].strip() != "```sh":
            raise SystemExit("README: a quickstart marker not followed by ```sh")
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        blocks.append((m.group(1), "\n".join(body) + "\n"))
    return blocks


def substitute(text, subs):
    """`vproxy start` -> `vproxy start --resolve ...`, recorded in subs."""
    out = []
    for line in text.split("\n"):
        m = re.match(r"^vproxy start(\s+#.*)?$", line)
        if m:
            new = "vproxy start " + RESOLVE + (m.group(1) or "")
            subs.append("%s  ->  %s" % (line.split("#")[0].rstrip(), new.split("#")[0].rstrip()))
            line = new
        out.append(line)
    return "\n".join(out)


def lo_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = struct.pack("16sH14x", b"lo", 0)
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
    s.close()


class Httpbin(http.server.BaseHTTPRequestHandler):
    """GET /bearer as httpbin.org answers it; the rest 404."""

    protocol_version = "HTTP/1.1"
    log = None
    lock = threading.Lock()

    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        with self.lock:
            self.log.write(json.dumps({"method": "GET", "path": self.path,
                                       "host": self.headers.get("Host", ""),
                                       "authorization": auth}) + "\n")
            self.log.flush()
        if self.path == "/bearer" and auth.startswith("Bearer "):
            code, body = 200, {"authenticated": True, "token": auth[len("Bearer "):]}
        elif self.path == "/bearer":
            code, body = 401, None
        else:
            code, body = 404, None
        data = (json.dumps(body, indent=2) + "\n").encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def serve():
    Httpbin.log = open(os.path.join(OUT, "server.log"), "a")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 443), Httpbin)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def run_block(n, text):
    """bash on a new pty; answers passphrase prompts. (status, transcript, prompts)."""
    path = os.path.join(OUT, "block-%d.sh" % n)
    with open(path, "w") as f:
        f.write(text)
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(WORK)
        # -e: stop at the first failing command, and name it.
        os.execvp("bash", ["bash", "--norc", "--noprofile", "-e", "-o", "errtrace", "-c",
                           'trap \'echo "[quickstart] failed ($?): $BASH_COMMAND"\' ERR; . "$0"',
                           path])
    out, answered, prompts, status = b"", 0, [], None
    end = time.time() + BLOCK_TIMEOUT
    while True:
        r, _, _ = select.select([fd], [], [], 0.2)
        data = b""
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            out += data
        # A prompt is answered once: only text after the last answer counts.
        tail = out[answered:]
        m = re.search(rb"([A-Za-z ]*passphrase: )$", tail)
        if m:
            prompts.append(m.group(1).decode().strip())
            os.write(fd, PASS + b"\n")
            answered = len(out)
        if status is None:
            wpid, st = os.waitpid(pid, os.WNOHANG)
            if wpid:
                status = st
        if status is not None and not data:
            break
        if time.time() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            out += b"\n[quickstart] timed out after %d s\n" % BLOCK_TIMEOUT
            status = -1
            break
    os.close(fd)
    if status == -1:
        rc = -1
    elif os.WIFEXITED(status):
        rc = os.WEXITSTATUS(status)
    else:
        rc = 128 + os.WTERMSIG(status)
    return rc, out, prompts


def daemon_state():
    """The pid in vproxy's pid file, alive or not, and its controlling terminal."""
    home = os.path.join(os.environ["HOME"], ".local/share/vrun")
    try:
        pid = int(open(os.path.join(home, "run", "vproxy.pid")).read().strip())
    except (OSError, ValueError) as e:
        return "no pid file: %s" % e
    try:
        stat = open("/proc/%d/stat" % pid).read()
    except OSError:
        return "pid %d: not running" % pid
    fields = stat[stat.rindex(")") + 2:].split()
    state, sid, tty_nr = fields[0], int(fields[3]), int(fields[4])
    return "pid %d: state %s, own session %s, controlling tty %d" % (
        pid, state, "yes" if sid == pid else "no", tty_nr)


def main():
    blocks = extract(README)
    with open(os.path.join(OUT, "blocks"), "w") as f:
        for kind, text in blocks:
            f.write("%s %d lines\n" % (kind, text.count("\n")))
    lo_up()
    serve()
    subs = []
    n = 0
    for kind, text in blocks:
        if kind != "run":
            continue
        n += 1
        text = substitute(text, subs)
        rc, out, prompts = run_block(n, text)
        with open(os.path.join(OUT, "block-%d.out" % n), "wb") as f:
            f.write(out)
        with open(os.path.join(OUT, "block-%d.rc" % n), "w") as f:
            f.write("%d\n" % rc)
        with open(os.path.join(OUT, "block-%d.prompts" % n), "w") as f:
            f.write("".join(p + "\n" for p in prompts))
        if re.search(r"^vproxy start\b", text, re.M):
            time.sleep(0.5)  # the pty is closed: give a SIGHUP time to land
            with open(os.path.join(OUT, "daemon"), "w") as f:
                f.write(daemon_state() + "\n")
        if rc != 0:
            break
    with open(os.path.join(OUT, "substitutions"), "w") as f:
        f.write("".join(s + "\n" for s in subs))


if __name__ == "__main__":
    main()
