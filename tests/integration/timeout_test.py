#!/usr/bin/env python3
"""vproxy's timeouts and buffers under slow and endless clients.

vproxy runs with short timeouts (vproxy start --timeout ...) so that every
limit is actually reached: trickled request heads (slowloris, before and
inside TLS), idle kept-alive connections, a stalled TLS handshake, a stalled
request body, a client that stops reading a large response, and an endless
chunked upload. Each is cut at its timeout, never earlier than the limit
and not much later; a normal request in the same session still completes
promptly; vproxy's memory and descriptors stay bounded.

usage: timeout_test.py VAULT VPROXY
"""
import json
import os
import select
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures, run  # noqa: E402
import vrunctl  # noqa: E402
from testpki import make_certs, upstream_records  # noqa: E402

VAULT, VPROXY = sys.argv[1], sys.argv[2]
UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream.py")
T = {"head": 2, "idle": 3, "handshake": 2, "exchange": 3, "connect": 3}
SLACK = 2.5  # timers, scheduling and a loaded 2-core machine
def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def connect(port, authority, sock=None):
    s, status = vrunctl.connect_tunnel(port, authority, sock=sock)
    if not status.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(status)
    return s


def read_response(sock):
    """One whole response (vproxy re-chunks bodies): its head and decoded body."""
    sock.settimeout(15)
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            return buf, b""
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    if b"transfer-encoding: chunked" not in head.lower():
        return head, rest
    body = b""
    while True:
        while b"\r\n" not in rest:
            rest += sock.recv(65536)
        line, rest = rest.split(b"\r\n", 1)
        size = int(line.split(b";")[0], 16)
        while len(rest) < size + 2:
            rest += sock.recv(65536)
        body += rest[:size]
        rest = rest[size + 2:]
        if size == 0:
            return head, body


def audit_records(env):
    with open(env["VAULT_HOME"] + "/audit.log") as f:
        return [json.loads(line) for line in f if line.strip()]


def wait_closed(sock, limit):
    """Read (and drop) until EOF or error; seconds it took, or None past limit."""
    t0 = time.monotonic()
    sock.settimeout(0.2)
    first = b""
    while time.monotonic() - t0 < limit:
        try:
            data = sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        except (OSError, ssl.SSLError):
            return time.monotonic() - t0, first
        if not data:
            return time.monotonic() - t0, first
        if not first:
            first = data[:64]
    return None, first


def main():
    tmp = tempfile.mkdtemp(prefix="vrun-timeouts-")
    os.chmod(tmp, 0o700)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "VAULT_HOME": tmp + "/home",
           "HOME": tmp, "VAULT_PASSPHRASE_FILE": tmp + "/pass",
           # Under AddressSanitizer freed memory sits in a quarantine (256 MB by
           # default) and would count as growth; keep it small so RSS means
           # what vproxy holds. No effect on an ordinary build.
           "ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                  "quarantine_size_mb=1"]))}
    runtime = tmp + "/home/run"
    log = tmp + "/upstream.log"
    up = None
    try:
        with open(tmp + "/pass", "w") as f:
            f.write("timeout passphrase\n")
        os.chmod(tmp + "/pass", 0o600)
        make_certs(tmp, ["slow.test"], "vrun timeout test CA")
        up = subprocess.Popen([sys.executable, UPSTREAM, "--cert", tmp + "/up.pem", "--key",
                               tmp + "/up.key", "--log", log], stdout=subprocess.PIPE)
        port = int(up.stdout.readline())
        authority = b"slow.test:%d" % port
        run([VAULT, "init", "--kdf", "interactive"], env)
        run([VAULT, "add", "k", "--host", authority.decode(), "--inject", "bearer", "--ca",
             tmp + "/ca.pem"], env, b"timeout-secret-value")
        # A destination that never answers a connect: a listener whose accept queue
        # is full (backlog 0, filled, never accepted) drops further SYNs.
        hole = socket.socket()
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        hport = hole.getsockname()[1]
        fillers = []
        for _ in range(4):
            f = socket.socket()
            f.setblocking(False)
            try:
                f.connect(("127.0.0.1", hport))
            except BlockingIOError:
                pass
            fillers.append(f)
        run([VAULT, "add", "hole", "--host", "hole.test:%d" % hport, "--inject", "bearer"], env,
            b"hole-secret-value")
        args = [VPROXY, "start", "--resolve", "slow.test:%d:127.0.0.1" % port,
                "--resolve", "hole.test:%d:127.0.0.1" % hport]
        for name, sec in T.items():
            args += ["--timeout", "%s=%d" % (name, sec)]
        run(args, env)
        st = run([VPROXY, "status", "--json"], env)
        vpid = json.loads(st.stdout)["pid"]
        s = vrunctl.Session(runtime, ["k"])
        ctx = ssl.create_default_context(cafile=s.ca_path)
        ctx.set_alpn_protocols(["http/1.1"])
        url = "https://%s/" % authority.decode()

        def curl(target=url):
            t0 = time.monotonic()
            r = subprocess.run(["curl", "-sS", "--max-time", "20", "--proxy",
                                "http://127.0.0.1:%d" % s.port, "--cacert", s.ca_path,
                                "-o", "/dev/null", "-w", "%{http_code}", target],
                               capture_output=True, timeout=60)
            return r.stdout, time.monotonic() - t0

        def tls(sock):
            return ctx.wrap_socket(sock, server_hostname="slow.test")

        def request(path, extra=b""):
            return (b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (path, authority, extra))

        check(curl()[0] == b"200", "baseline request")
        fd0 = nfds(vpid)

        # Slowloris before TLS: 150 connections trickling a CONNECT head, a byte
        # every 0.5 s -- far under any idle timeout -- are all cut at the head
        # deadline, counted from the accept.
        head = b"CONNECT " + authority + b" HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 64
        socks = {}
        for _ in range(150):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            c.setblocking(False)
            socks[c] = [time.monotonic(), 0, None, b""]
        result = {}

        def trickle():
            end = time.monotonic() + T["head"] + SLACK + 3
            while socks and time.monotonic() < end:
                for c, st_ in list(socks.items()):
                    if st_[1] < len(head):
                        try:
                            c.send(head[st_[1]:st_[1] + 1])
                            st_[1] += 1
                        except OSError:
                            pass
                r_, _, _ = select.select(list(socks), [], [], 0.5)
                for c in r_:
                    try:
                        data = c.recv(256)
                    except OSError:
                        data = b""
                    socks[c][3] += data
                    if not data or b"\r\n\r\n" in socks[c][3]:
                        socks[c][2] = time.monotonic() - socks[c][0]
                        result[c] = socks.pop(c)
        th = threading.Thread(target=trickle)
        th.start()
        time.sleep(0.5)
        code, took = curl()
        check(code == b"200" and took < 3, "a normal request completes while 150 clients "
              "trickle heads (%.2f s)" % took)
        th.join()
        times = sorted(v[2] for v in result.values())
        answers = set(v[3].split(b"\r\n")[0] for v in result.values())
        check(len(result) == 150 and not socks, "all 150 trickling clients were cut (%d)" %
              len(result))
        check(times and times[0] >= T["head"] - 0.3 and times[-1] <= T["head"] + SLACK,
              "at the head deadline (%.2f-%.2f s, limit %d s)" %
              (times[0] if times else -1, times[-1] if times else -1, T["head"]))
        check(answers <= {b"HTTP/1.1 408 Request Timeout", b""},
              "answered 408 or closed (%r)" % answers)
        for c in list(result) + list(socks):
            c.close()

        # A connection that says nothing at all is closed at the head timeout,
        # unanswered and unrecorded (the audit log is for requests).
        n_audit = len(audit_records(env))
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        took, first = wait_closed(c, T["head"] + SLACK + 5)
        check(took is not None and T["head"] - 0.3 <= took <= T["head"] + SLACK and
              first == b"", "a silent connection is closed at the head timeout (%s s, %r)" %
              (took, first))
        check(len(audit_records(env)) == n_audit, "and leaves no audit record")
        c.close()

        # Slowloris inside TLS: the next request head trickled on a kept-alive
        # connection is cut head seconds after its first byte.
        t = tls(connect(s.port, authority))
        t.sendall(request(b"/first"))
        resp, _ = read_response(t)
        check(resp.startswith(b"HTTP/1.1 200"), "first request on the connection")
        t0 = time.monotonic()
        second = request(b"/second")
        cut = None
        for i in range(len(second)):
            try:
                t.sendall(second[i:i + 1])
            except OSError:
                cut = time.monotonic() - t0
                break
            r_, _, _ = select.select([t], [], [], 0.5)
            if r_:
                data = t.recv(256)
                cut = time.monotonic() - t0
                check(data.startswith(b"HTTP/1.1 408") or data == b"",
                      "the trickled head is answered 408 (%r)" % data[:40])
                break
        check(cut is not None and T["head"] - 0.3 <= cut <= T["head"] + SLACK,
              "a head trickled inside TLS is cut at its deadline (%s s)" % cut)
        t.close()

        # Idle: a kept-alive connection with nothing more to say.
        t = tls(connect(s.port, authority))
        t.sendall(request(b"/idle"))
        read_response(t)
        took, _ = wait_closed(t, T["idle"] + SLACK + 5)
        check(took is not None and T["idle"] - 0.3 <= took <= T["idle"] + SLACK,
              "an idle kept-alive connection is closed after idle (%s s)" % took)
        t.close()

        # An upstream that never answers the connect: 504 at the connect timeout.
        sh = vrunctl.Session(runtime, ["hole"])
        t0 = time.monotonic()
        r = subprocess.run(["curl", "-sS", "--max-time", "20", "--proxy",
                            "http://127.0.0.1:%d" % sh.port, "--cacert", sh.ca_path, "-o",
                            "/dev/null", "-w", "%{http_connect} %{http_code}",
                            "https://hole.test:%d/" % hport], capture_output=True, timeout=60)
        took = time.monotonic() - t0
        sh.sock.close()
        check(b"504" in r.stdout and T["connect"] - 0.3 <= took <= T["connect"] + SLACK,
              "a connect that is never answered: 504 after connect (%r, %.1f s)"
              % (r.stdout, took))
        for f in fillers:
            f.close()
        hole.close()

        # A client that never starts its TLS handshake after CONNECT.
        c = connect(s.port, authority)
        took, _ = wait_closed(c, T["handshake"] + SLACK + 5)
        check(took is not None and T["handshake"] - 0.3 <= took <= T["handshake"] + SLACK,
              "a stalled TLS handshake is cut (%s s)" % took)
        c.close()

        # A request body that stops halfway.
        t = tls(connect(s.port, authority))
        t.sendall(b"POST /sink HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n" %
                  authority + b"b" * 1000)
        took, _ = wait_closed(t, T["exchange"] + SLACK + 5)
        check(took is not None and T["exchange"] - 0.3 <= took <= T["exchange"] + SLACK,
              "a stalled request body is cut after exchange (%s s)" % took)
        t.close()

        # A request body trickled a byte at a time: every byte resets the idle
        # timeout, but the body must keep a minimum pace (1 KiB per exchange).
        t = tls(connect(s.port, authority))
        t.sendall(b"POST /sink HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n" %
                  authority)
        t0, cut, answer = time.monotonic(), None, b""
        while time.monotonic() - t0 < 2 * T["exchange"] + SLACK + 3:
            try:
                t.sendall(b"b")
            except OSError:
                cut = time.monotonic() - t0
                break
            r_, _, _ = select.select([t], [], [], 0.3)
            if r_:
                try:
                    answer = t.recv(256)
                except (OSError, ssl.SSLError):
                    pass
                cut = time.monotonic() - t0
                break
        check(cut is not None and T["exchange"] - 0.3 <= cut <= T["exchange"] + SLACK,
              "a trickled request body is cut at its pace check (%s s)" % cut)
        check(answer.startswith(b"HTTP/1.1 408") or answer == b"",
              "answered 408 or closed (%r)" % answer[:40])
        t.close()

        # A client that reads, but only a trickle: the response must keep moving.
        # The kernel's buffers hide the cut from the client for a long while;
        # the audit record says when and why vproxy gave up.
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.settimeout(10)
        t = tls(connect(s.port, authority, sock=raw))
        t.sendall(request(b"/big/100000000"))
        plain = socket.socket(fileno=os.dup(t.fileno()))
        plain.settimeout(0.5)
        t0, got = time.monotonic(), 0
        while time.monotonic() - t0 < 2 * T["exchange"] + SLACK:
            try:
                data = plain.recv(100)  # ciphertext, about 200 bytes/s
            except socket.timeout:
                continue
            except OSError:
                break
            if not data:
                break
            got += len(data)
            time.sleep(0.5)
        slow = [r for r in audit_records(env) if r.get("path") == "/big/100000000"]
        check(len(slow) == 1 and slow[0].get("reason") in (
            "client reading the response too slowly", "client stopped reading the response"),
              "a client reading a trickle is cut (%d bytes read; %r)" % (
                  got, [r.get("reason") for r in slow]))
        plain.close()
        t.close()

        # A client that stops reading a 1 GB response: vproxy holds only a
        # bounded amount for it, then cuts it at the exchange timeout.
        rss0 = rss_kib(vpid)
        t = tls(connect(s.port, authority))
        t.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        t.sendall(request(b"/big/1000000000"))
        time.sleep(1.5)
        grown = rss_kib(vpid) - rss0
        check(grown < 8 * 1024, "a non-reading client costs vproxy %d KiB, not the response" %
              grown)
        t0 = time.monotonic()
        total = 0
        time.sleep(T["exchange"] + SLACK)
        t.settimeout(2)
        try:
            while True:
                data = t.recv(1 << 20)
                if not data:
                    break
                total += len(data)
        except (OSError, ssl.SSLError):
            pass
        check(total < 64 * 1024 * 1024, "the non-reading client was cut at exchange (got "
              "%d bytes of 1 GB after %.1f s)" % (total, time.monotonic() - t0))
        t.close()

        # An endless chunked upload is streamed, never gathered.
        rss0 = rss_kib(vpid)
        t = tls(connect(s.port, authority))
        t.sendall(b"POST /sink HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n" %
                  authority)
        chunk = b"%x\r\n%s\r\n" % (65536, b"c" * 65536)
        peak, sent, t0 = 0, 0, time.monotonic()
        while sent < 256 * 1024 * 1024 and time.monotonic() - t0 < 60:
            t.sendall(chunk)
            sent += 65536
            if sent % (16 * 1024 * 1024) == 0:
                peak = max(peak, rss_kib(vpid) - rss0)
        t.sendall(b"0\r\n\r\n")
        resp, body = read_response(t)
        check(resp.startswith(b"HTTP/1.1 200") and json.loads(body or b"{}").get(
            "received") == sent, "a %d MiB chunked upload arrives whole (%r)" % (
            sent >> 20, body[:60]))
        check(peak < 16 * 1024, "streamed with at most %d KiB more memory" % peak)
        t.close()

        # Afterwards: nothing left over, and the session still serves.
        code, took = curl()
        check(code == b"200" and took < 3, "the session still serves promptly")
        time.sleep(0.5)
        check(nfds(vpid) <= fd0 + 2, "no descriptor left behind (%d, was %d)" %
              (nfds(vpid), fd0))
        records = upstream_records(log)
        check(not any(r["path"].startswith("/second") for r in records),
              "the trickled request never reached the upstream")
        s.close()
        r = run([VAULT, "audit", "verify"], env)
        check(r.returncode == 0, "the audit log verifies")
    finally:
        subprocess.run([VPROXY, "stop"], env=env, capture_output=True, timeout=60)
        if up is not None:
            up.kill()
            up.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
