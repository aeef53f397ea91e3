#!/usr/bin/env python3
"""vproxy against a real TLS upstream on loopback, driven by curl and raw
sockets through a session opened with the control protocol (vrunctl.py
stands in for vrun). Proves: injection on the bound host only, 403 for
everything else, upstream certificate verification before any secret is
sent, strict HTTP (malformed requests never reach the upstream), SNI and
Host checks, and that the daemon survives bad control messages.

usage: proxy_test.py VAULT_BIN VPROXY_BIN
"""
import base64
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures, run  # noqa: E402
import vrunctl  # noqa: E402
from vrunctl import read_all  # noqa: E402
from testpki import make_certs, upstream_records  # noqa: E402

VAULT, VPROXY = sys.argv[1], sys.argv[2]
UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream.py")
def tls_through_proxy(port, host, upport, ca, sni=None):
    """CONNECT through the session listener and wrap in TLS; returns the TLS socket."""
    s, status = vrunctl.connect_tunnel(port, b"%s:%d" % (host.encode(), upport))
    if not status.startswith(b"HTTP/1.1 200"):
        s.close()
        raise ConnectionError(status.decode(errors="replace"))
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(s, server_hostname=sni or host)


def main():
    tmp = tempfile.mkdtemp(prefix="vrun-proxy-")
    os.chmod(tmp, 0o700)
    up = None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "VAULT_HOME": tmp + "/home",
           "HOME": tmp, "VAULT_PASSPHRASE_FILE": tmp + "/pass"}
    runtime = tmp + "/home/run"
    # Bytes that URL encoding changes, so its form differs from the raw one, and
    # bytes whose base64 has '/' and '+' (escaped differently by JSON encoders).
    secret_bearer = "sk_live_" + os.urandom(12).hex() + "/+=&???~~~"
    secret_ph = "ph_" + os.urandom(12).hex()
    secret_noca = "noca_" + os.urandom(12).hex()
    log = tmp + "/upstream.log"
    try:
        with open(tmp + "/pass", "w") as f:
            f.write("test passphrase %s\n" % os.urandom(8).hex())
        os.chmod(tmp + "/pass", 0o600)
        make_certs(tmp, ["api.test", "noca.test"], "vrun test upstream CA")
        up = subprocess.Popen([sys.executable, UPSTREAM, "--cert", tmp + "/up.pem", "--key",
                               tmp + "/up.key", "--log", log], stdout=subprocess.PIPE)
        port = int(up.stdout.readline())
        hp = "api.test:%d" % port
        run([VAULT, "init", "--kdf", "interactive"], env)
        run([VAULT, "add", "deploy-key", "--host", hp, "--inject", "bearer", "--ca",
             tmp + "/ca.pem"], env, (secret_bearer + "\n").encode())
        run([VAULT, "add", "ph", "--host", hp, "--ca", tmp + "/ca.pem"], env,
            secret_ph.encode())
        run([VAULT, "add", "noca", "--host", "noca.test:%d" % port, "--inject", "bearer"], env,
            secret_noca.encode())
        run([VAULT, "add", "wrongname", "--host", "wrong.test:%d" % port, "--inject", "bearer",
             "--ca", tmp + "/ca.pem"], env, b"wrongname-secret")
        run([VAULT, "add", "sysroots-key", "--host", hp, "--inject", "header:X-Sys"], env,
            b"sysroots-secret-value")
        resolve = []
        for h in ("api.test", "noca.test", "wrong.test"):
            resolve += ["--resolve", "%s:%d:127.0.0.1" % (h, port)]
        r = run([VPROXY, "start"] + resolve, env)
        check(b"started" in r.stderr, "vproxy start returns once ready")
        r = run([VPROXY, "start"], env)
        check(b"already running" in r.stderr, "a second start reports the running one")
        r = run([VPROXY, "status"], env)
        check(b"deploy-key" in r.stdout and b"sessions: 0" in r.stdout, "status lists keys")

        # A session for some keys; unknown and ambiguous names are refused up front.
        try:
            vrunctl.Session(runtime, ["nope"])
            check(False, "an unknown key is refused")
        except RuntimeError as e:
            check("no such key" in str(e), "an unknown key is refused (%s)" % e)
        s = vrunctl.Session(runtime, ["deploy", "ph", "noca", "wrongname"])
        check(set(s.keys) == {"deploy-key", "ph", "noca", "wrongname"}, "prefix resolved")
        check(os.path.exists(s.ca_path), "the CA bundle exists")
        ph = s.keys["ph"][1]
        proxy = "http://127.0.0.1:%d" % s.port

        def curl(*args):
            return subprocess.run(["curl", "-sS", "--max-time", "15", "--proxy", proxy,
                                   "--cacert", s.ca_path] + list(args),
                                  capture_output=True, timeout=60)

        n0 = len(upstream_records(log))
        r = curl("https://%s/hello?key=%s" % (hp, ph), "-H", "X-Api-Key: " + ph)
        recs = upstream_records(log)
        check(r.returncode == 0 and len(recs) == n0 + 1, "request through the proxy")
        rec = recs[-1] if recs else {"headers": [], "path": ""}
        hdrs = dict((k.lower(), v) for k, v in rec["headers"])
        check(hdrs.get("authorization") == "Bearer " + secret_bearer, "bearer injected")
        check(hdrs.get("x-api-key") == secret_ph, "placeholder swapped in a header")
        # An h2c upgrade is not passed on: the upstream speaks HTTP/1.1 with us.
        r = curl("https://%s/h2c" % hp, "-H", "Upgrade: h2c", "-H", "HTTP2-Settings: AAMAAABk",
                 "-H", "Connection: Upgrade, HTTP2-Settings")
        rh = upstream_records(log)[-1]
        names = set(k.lower() for k, v in rh["headers"])
        check(r.returncode == 0 and rh["path"] == "/h2c" and
              not names & {"upgrade", "http2-settings"} and
              "upgrade" not in dict((k.lower(), v.lower()) for k, v in rh["headers"]).get(
                  "connection", ""),
              "Upgrade: h2c and HTTP2-Settings stripped (%r)" % sorted(names))
        check(rec["path"] == "/hello?key=" + secret_ph, "placeholder swapped in the query")

        r = curl("-d", "a body of some length", "https://%s/post" % hp)
        rec = upstream_records(log)[-1]
        check(rec["method"] == "POST" and rec["body"] == "a body of some length",
              "request body relayed")
        r = curl("https://%s/chunked" % hp)
        check(r.returncode == 0 and b'"/chunked"' in r.stdout, "chunked response relayed")
        r = curl("https://%s/one" % hp, "https://%s/two" % hp)
        check(r.returncode == 0 and r.stdout.count(b'"path"') == 2, "keep-alive: two requests")
        # Compression: identity requested; a compressed answer is refused, not passed.
        r = curl("--compressed", "-w", "%{http_code}", "https://%s/gzip" % hp)
        rec = upstream_records(log)[-1]
        check(dict((k.lower(), v) for k, v in rec["headers"]).get("accept-encoding") ==
              "identity", "Accept-Encoding rewritten to identity")
        check(r.stdout.endswith(b"502") and b"compressed" in r.stdout,
              "a compressed response is refused with 502")
        r = curl("-I", "https://%s/head" % hp)
        check(r.returncode == 0 and b"200" in r.stdout, "HEAD response without body")

        # Scrubbing: whatever the upstream echoes, the client never sees a secret.
        secrets_forms = []
        for sec in (secret_bearer, secret_ph):
            b = sec.encode()
            secrets_forms.append(b)
            secrets_forms.append(urllib.parse.quote(sec, safe="").encode())
            for k in range(3):
                enc = base64.b64encode(b"u" * k + b":" + b + b"!")
                secrets_forms.append(enc[(k + 2) // 3 * 4 + 4: -8] if len(enc) > 20 else enc)
        for path in ("/reflect", "/reflect-chunk1", "/hello"):
            r = curl("-i", "https://%s%s" % (hp, path))
            unescaped = r.stdout
            for esc, ch in ((b"\\/", b"/"), (b"\\u002B", b"+"), (b"\\u002F", b"/"),
                            (b"%2B", b"+"), (b"%2F", b"/")):
                unescaped = unescaped.replace(esc, ch)
            leaked = [f for f in secrets_forms if f and (f in r.stdout or f in unescaped)]
            check(r.returncode == 0 and not leaked, "no secret in the response to %s" % path)
            check(s.keys["deploy-key"][1].encode() in r.stdout,
                  "the placeholder stands in for the secret in %s" % path)

        # Anything not bound: 403, nothing reaches any upstream.
        n0 = len(upstream_records(log))
        for target in ("https://unbound.test:%d/" % port, "https://api.test:%d/" % (port + 1),
                       "https://API.TEST.evil.test:%d/" % port, "https://127.0.0.1:%d/" % port):
            r = curl("-o", "/dev/null", "-w", "%{http_connect}", target)
            check(r.stdout.strip() == b"403", "403 for %s (got %r)" % (target, r.stdout))
        check(len(upstream_records(log)) == n0, "denied requests never reached the upstream")

        # Upstream verification: unknown root, and a name the cert does not cover.
        n0 = len(upstream_records(log))
        r = curl("-w", "%{http_code}", "https://noca.test:%d/" % port)
        check(b"502" in r.stdout and b"verification" in r.stdout,
              "unknown upstream root: 502 (%r)" % r.stdout[-120:])
        r = curl("-w", "%{http_code}", "https://wrong.test:%d/" % port)
        check(b"502" in r.stdout, "upstream name mismatch: 502")
        check(len(upstream_records(log)) == n0, "no request (no secret) sent to an unverified "
              "upstream")

        # Each key's secret goes only to a server verified the way its entry says:
        # a key without --ca (system roots) is never sent to api.test, which only
        # the test CA vouches for, and a session holding it together with a key
        # that trusts that CA is refused for the host rather than mixing the two.
        n0 = len(upstream_records(log))
        for names, want in ((["sysroots"], b"502"), (["deploy", "sysroots"], b"403")):
            sx = vrunctl.Session(runtime, names)
            r = subprocess.run(["curl", "-sS", "--max-time", "15", "--proxy",
                                "http://127.0.0.1:%d" % sx.port, "--cacert", sx.ca_path,
                                "-w", "%{http_connect} %{http_code}", "https://%s/trust" % hp],
                               capture_output=True, timeout=60)
            sx.sock.close()
            check(r.stdout.split()[:1] == [b"403"] if want == b"403" else want in r.stdout,
                  "keys %s on a host only the test CA vouches for: %s (%r)"
                  % ("+".join(names), want.decode(), r.stdout[-160:]))
        check(len(upstream_records(log)) == n0, "... and the upstream saw no request")

        # Strict HTTP inside the tunnel: each is 400 and reaches nobody.
        bad_requests = [
            b"GET / HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"0\r\n\r\n" % hp.encode(),
            b"POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"
            b"hello" % hp.encode(),
            b"GET / HTTP/1.1\r\nHost: %s\r\nX-A: 1\r\n folded\r\n\r\n" % hp.encode(),
            b"GET / HTTP/1.1\r\nHost : %s\r\n\r\n" % hp.encode(),
            b"GET / HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % port,
            b"GET / HTTP/1.1\r\nHost: %s\r\nHost: %s\r\n\r\n" % (hp.encode(), hp.encode()),
            b"POST / HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n"
            % hp.encode(),
            b"GET http://evil.test/ HTTP/1.1\r\nHost: %s\r\n\r\n" % hp.encode(),
            b"GET / HTTP/1.1\r\nHost: %s\r\nX: a\x00b\r\n\r\n" % hp.encode(),
            b"POST / HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
            b"0\r\n\r\n" % hp.encode(),
            b"POST / HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"
            b"0\r\n\r\n" % hp.encode(),
            b"POST / HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: identity\r\n\r\n"
            % hp.encode(),
            # (a bad size after a good chunk: the upstream may have the head, but
            # never a complete request)
            b"POST / HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\nzz\r\n" % hp.encode(),
            b"POST /head-first HTTP/1.1\r\nHost: %s\r\nContent-Length: +5\r\n\r\nhello"
            % hp.encode(),
        ]
        n0 = len(upstream_records(log))
        for i, raw in enumerate(bad_requests):
            t = tls_through_proxy(s.port, "api.test", port, s.ca_path)
            t.settimeout(10)
            t.sendall(raw)
            resp = read_all(t)
            t.close()
            check(resp.startswith(b"HTTP/1.1 400"), "malformed request %d -> 400 (%r)"
                  % (i, resp[:40]))
        check(len(upstream_records(log)) == n0, "no malformed request reached the upstream")
        big = b"GET / HTTP/1.1\r\nHost: %s\r\nX-Big: %s\r\n\r\n" % (hp.encode(), b"a" * 40000)
        t = tls_through_proxy(s.port, "api.test", port, s.ca_path)
        t.settimeout(10)
        t.sendall(big)
        resp = read_all(t)
        t.close()
        check(resp.startswith(b"HTTP/1.1 431"), "oversized head -> 431")

        # HTTP/1.0 with keep-alive: a body without chunks ends with the connection,
        # so vproxy closes it after the body (the client would otherwise wait).
        t = tls_through_proxy(s.port, "api.test", port, s.ca_path)
        t.settimeout(10)
        t.sendall(b"GET /http10 HTTP/1.0\r\nHost: %s\r\nConnection: keep-alive\r\n\r\n"
                  % hp.encode())
        t0 = time.monotonic()
        resp = read_all(t)
        t.close()
        check(resp.startswith(b"HTTP/1.1 200") and resp.rstrip().endswith(b"}") and
              b"Connection: close" in resp and time.monotonic() - t0 < 8,
              "HTTP/1.0 keep-alive client: body ended by vproxy closing (%r)" % resp[-40:])

        # A chunked body's first size line is checked before the head (with the
        # secret) goes out, also when the body follows after a pause.
        for first, want, what in ((b"zz\r\n", b"HTTP/1.1 400", "a bad first chunk size"),
                                  (b"5\r\nhello\r\n0\r\n\r\n", b"HTTP/1.1 200",
                                   "a good chunked body")):
            n0 = len(upstream_records(log))
            t = tls_through_proxy(s.port, "api.test", port, s.ca_path)
            t.settimeout(10)
            t.sendall(b"POST /head-first HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n" % hp.encode())
            time.sleep(0.5)
            t.sendall(first)
            resp = read_all(t)
            t.close()
            time.sleep(0.2)
            recs = upstream_records(log)[n0:]
            check(resp.startswith(want), "%s after a pause: %r" % (what, resp[:12]))
            if want.endswith(b"400"):
                check(recs == [], "... and not even its head reached the upstream (%d records)"
                      % len(recs))
            else:
                check(len(recs) == 2 and recs[-1].get("body") == "hello",
                      "... relayed whole (%r)" % [r.get("body") for r in recs])

        # The TLS name must be the tunnel's.
        try:
            t = tls_through_proxy(s.port, "api.test", port, s.ca_path, sni="noca.test")
            t.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % hp.encode())
            check(not read_all(t).startswith(b"HTTP/1.1 200"), "SNI mismatch refused")
        except (ssl.SSLError, ConnectionError, OSError):
            check(True, "SNI mismatch refused")
        # ... and given: a handshake without SNI for a named host is refused too.
        raw, status = vrunctl.connect_tunnel(s.port, b"api.test:%d" % port)
        ctx = ssl.create_default_context(cafile=s.ca_path)
        ctx.check_hostname = False
        try:
            t = ctx.wrap_socket(raw)
            t.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % hp.encode())
            check(not read_all(t).startswith(b"HTTP/1.1 200"), "handshake without SNI refused")
        except (ssl.SSLError, ConnectionError, OSError):
            check(True, "handshake without SNI refused")

        # An upstream that closes after its answer (no TLS close_notify), framed by
        # length or by the close: the client gets the whole body, also when it asked
        # to close itself, and the record says 200.
        for path, extra in (("/close", []), ("/close", ["-H", "Connection: close"]),
                            ("/close-delimited", []),
                            ("/close-delimited", ["-H", "Connection: close"])):
            r = curl("-w", "\n%{http_code}", "https://%s%s" % (hp, path), *extra)
            body, _, code = r.stdout.rpartition(b"\n")
            try:
                ok = json.loads(body)["path"] == path
            except ValueError:
                ok = False
            check(r.returncode == 0 and code == b"200" and ok,
                  "upstream closing after %s%s: whole answer relayed (rc %d, %r)"
                  % (path, " (client: close)" if extra else "", r.returncode, r.stdout[-80:]))
        time.sleep(0.3)  # an upstream close seen after the answer must not add a record

        # Pipelined requests are answered in order, each injected.
        n0 = len(upstream_records(log))
        t = tls_through_proxy(s.port, "api.test", port, s.ca_path)
        t.settimeout(10)
        t.sendall(b"GET /p1 HTTP/1.1\r\nHost: %s\r\n\r\n"
                  b"GET /p2 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                  % (hp.encode(), hp.encode()))
        resp = read_all(t)
        t.close()
        recs = upstream_records(log)[n0:]
        check(resp.count(b"HTTP/1.1 200") == 2 and resp.find(b"/p1") < resp.find(b"/p2"),
              "pipelined requests answered in order")
        check([r["path"] for r in recs] == ["/p1", "/p2"], "both pipelined requests relayed")

        # Expect: 100-continue is relayed, then the body and the final answer.
        r = curl("-H", "Expect: 100-continue", "--data-binary", "x" * 2000,
                 "https://%s/expect" % hp)
        rec = upstream_records(log)[-1]
        check(r.returncode == 0 and rec["path"] == "/expect" and len(rec["body"]) == 2000,
              "Expect: 100-continue")

        # A client that only speaks h2 fails cleanly (no downgrade surprises).
        try:
            raw, _ = vrunctl.connect_tunnel(s.port, hp.encode())
            ctx = ssl.create_default_context(cafile=s.ca_path)
            ctx.set_alpn_protocols(["h2"])
            t = ctx.wrap_socket(raw, server_hostname="api.test")
            check(False, "an h2-only client is refused")
            t.close()
        except (ssl.SSLError, OSError):
            check(True, "an h2-only client is refused")

        # Upstream TLS resumption: within a session and for the same destination
        # only; a resumed connection still gets the key injected.
        s8 = vrunctl.Session(runtime, ["deploy"])
        resumed = []
        for i in range(3):
            r = subprocess.run(["curl", "-sS", "--max-time", "15", "--proxy",
                                "http://127.0.0.1:%d" % s8.port, "--cacert", s8.ca_path,
                                "https://%s/resume%d" % (hp, i)], capture_output=True, timeout=60)
            rec = upstream_records(log)[-1]
            hdrs = dict((k.lower(), v) for k, v in rec["headers"])
            resumed.append((r.returncode, rec["path"] == "/resume%d" % i, rec["tls_resumed"],
                            hdrs.get("authorization") == "Bearer " + secret_bearer))
        check(resumed[0] == (0, True, False, True),
              "a new session's first upstream connection is a full handshake %r" % resumed)
        check(resumed[1:] == [(0, True, True, True)] * 2,
              "later connections to the same upstream resume it, key injected %r" % resumed)
        check(s8.close(), "resumption session closed")

        # A malformed control message costs that client, never the daemon.
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(vrunctl.socket_path(runtime))
        c.sendall(struct.pack(">HHI", 9, 1, 0) + b"junk")
        c.settimeout(5)
        try:
            dropped = c.recv(1) == b""
        except ConnectionResetError:
            dropped = True
        check(dropped, "malformed control message: that client is dropped")
        c.close()
        r = run([VPROXY, "status"], env)
        check(b"sessions: 1" in r.stdout, "the daemon survives and still serves the session")

        # Ending the session closes its listener and deletes its CA bundle.
        check(s.close(), "session closed")
        time.sleep(0.2)
        check(not os.path.exists(s.ca_path), "the CA bundle is gone")
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
            check(False, "the session listener is closed")
        except OSError:
            check(True, "the session listener is closed")

        # Keys added after start count from the next session on.
        run([VAULT, "add", "late", "--host", hp, "--inject", "header:X-Late", "--ca",
             tmp + "/ca.pem"], env, b"late-secret-value")
        s2 = vrunctl.Session(runtime, ["late"])
        r = subprocess.run(["curl", "-sS", "--max-time", "15", "--proxy",
                            "http://127.0.0.1:%d" % s2.port, "--cacert", s2.ca_path,
                            "https://%s/late" % hp], capture_output=True, timeout=60)
        rec = upstream_records(log)[-1]
        check(dict((k.lower(), v) for k, v in rec["headers"]).get("x-late") ==
              "late-secret-value", "a key added after start works in the next session")
        run([VAULT, "rm", "late"], env)
        try:
            vrunctl.Session(runtime, ["late"])
            check(False, "a key removed after start is refused for the next session")
        except RuntimeError as e:
            check("no such key" in str(e),
                  "a key removed after start is refused for the next session (%s)" % e)
        s2.close()

        # A session with a proxy credential (the macOS flow): nothing without it.
        token = os.urandom(16).hex()
        s7 = vrunctl.Session(runtime, ["deploy"], proxy_auth=token)

        def curl7(*extra):
            return subprocess.run(["curl", "-sS", "--max-time", "15", "--proxy",
                                   "http://127.0.0.1:%d" % s7.port, "--cacert", s7.ca_path,
                                   "-o", "/dev/null", "-w", "%{http_connect}"] + list(extra) +
                                  ["https://%s/auth" % hp], capture_output=True, timeout=60)

        check(curl7().stdout == b"407", "no proxy credential: 407")
        check(curl7("--proxy-user", "vrun:" + "0" * 32).stdout == b"407",
              "a wrong proxy credential: 407")
        r = curl7("--proxy-user", "vrun:" + token)
        rec = upstream_records(log)[-1]
        check(r.stdout == b"200" and rec["path"] == "/auth" and not any(
            k.lower() == "proxy-authorization" for k, v in rec["headers"]),
            "the right credential passes and is not forwarded")
        s7.close()

        # Placeholder inside Basic credentials (git's way of sending a token).
        s3 = vrunctl.Session(runtime, ["ph"])
        ph3 = s3.keys["ph"][1]
        subprocess.run(["curl", "-sS", "--max-time", "15", "--proxy",
                        "http://127.0.0.1:%d" % s3.port, "--cacert", s3.ca_path, "-u",
                        "x-token:" + ph3, "https://%s/basic" % hp], capture_output=True,
                       timeout=60)
        rec = upstream_records(log)[-1]
        want = "Basic " + base64.b64encode(("x-token:" + secret_ph).encode()).decode()
        check(dict((k.lower(), v) for k, v in rec["headers"]).get("authorization") == want,
              "placeholder swapped inside Basic credentials")
        s3.close()

        # --allow-host: an opaque tunnel, nothing injected, the real server's cert.
        s4 = vrunctl.Session(runtime, ["noca"], allow=["api.test:%d" % port])
        n0 = len(upstream_records(log))
        r = subprocess.run(["curl", "-sS", "--max-time", "15", "--proxy",
                            "http://127.0.0.1:%d" % s4.port, "--cacert", tmp + "/ca.pem",
                            "-H", "Authorization: Bearer " + s4.keys["noca"][1],
                            "https://%s/tunnel" % hp], capture_output=True, timeout=60)
        recs = upstream_records(log)[n0:]
        check(r.returncode == 0 and len(recs) == 1, "allow-host tunnel reaches the upstream")
        check(recs and dict((k.lower(), v) for k, v in recs[0]["headers"]).get(
            "authorization") == "Bearer " + s4.keys["noca"][1], "nothing injected in a tunnel")
        s4.close()

        # Plain HTTP: injected only with --allow-http.
        up2 = subprocess.Popen([sys.executable, UPSTREAM, "--plain", "--log", log],
                               stdout=subprocess.PIPE)
        try:
            pport = int(up2.stdout.readline())
            run([VAULT, "add", "plain-ok", "--host", "api.test:%d" % pport, "--inject",
                 "bearer", "--allow-http"], env, b"plain-allowed-secret")
            run([VAULT, "add", "plain-no", "--host", "api.test:%d" % pport, "--inject",
                 "header:X-No"], env, b"plain-denied-secret")
            run([VPROXY, "stop"], env)
            run([VPROXY, "start", "--resolve", "api.test:%d:127.0.0.1" % pport], env)
            s5 = vrunctl.Session(runtime, ["plain-ok", "plain-no"])
            subprocess.run(["curl", "-sS", "--max-time", "15", "--proxy",
                            "http://127.0.0.1:%d" % s5.port,
                            "http://api.test:%d/plain" % pport], capture_output=True,
                           timeout=60)
            rec = upstream_records(log)[-1]
            h = dict((k.lower(), v) for k, v in rec["headers"])
            check(rec["path"] == "/plain" and h.get("authorization") ==
                  "Bearer plain-allowed-secret", "plain HTTP: --allow-http key injected")
            check("x-no" not in h, "plain HTTP: key without --allow-http withheld")
            r = subprocess.run(["curl", "-sS", "--max-time", "15", "-o", "/dev/null", "-w",
                                "%{http_code}", "--proxy", "http://127.0.0.1:%d" % s5.port,
                                "http://unbound.test:%d/" % pport], capture_output=True,
                               timeout=60)
            check(r.stdout == b"403", "plain HTTP to an unbound host: 403")
            s5.close()
        finally:
            up2.kill()
            up2.wait()

        # The audit log: every request recorded, chain intact, no secret in it.
        run([VPROXY, "stop"], env)
        r = run([VAULT, "audit", "verify"], env, check_rc=False)
        check(r.returncode == 0 and b"intact" in r.stdout + r.stderr, "vault audit verify: intact")
        with open(tmp + "/home/audit.log", "rb") as f:
            raw_log = f.read()
        recs = [json.loads(line) for line in raw_log.splitlines()]
        types = set(r["type"] for r in recs)
        check({"session_start", "request", "session_end"} <= types, "start, request and end records")
        denied = [r for r in recs if r["type"] == "request" and r["decision"] == "denied"]
        check(any(r["host"] == "unbound.test" and r["status"] == 403 for r in denied),
              "the 403 for an unbound host is recorded as denied")
        check(any(r["status"] == 400 for r in denied), "malformed requests are recorded")
        check(any("trust different CAs" in r.get("reason", "") for r in denied),
              "a host whose keys disagree on its CA: refusal recorded with the reason")
        check(any("SNI" in r.get("reason", "") and "differs" in r["reason"] for r in denied) and
              any("without the tunnel's name" in r.get("reason", "") for r in denied),
              "refused TLS handshakes (wrong SNI, none) are recorded as denied")
        # One record per request, none made up: each session's request records match
        # the counts of its end record (a connection closed after its last answer
        # once produced a record of a request that never was).
        ends = {r["session"]: r for r in recs if r["type"] == "session_end"}
        for sid, end in ends.items():
            mine = [r for r in recs if r["type"] == "request" and r["session"] == sid]
            check(len(mine) == end["requests"] and
                  sum(r["decision"] == "denied" for r in mine) == end["denied"],
                  "session %s: %d request records, %d denied; its end record counts %d, %d"
                  % (sid[:8], len(mine), sum(r["decision"] == "denied" for r in mine),
                     end["requests"], end["denied"]))
        check(not any(r["type"] == "request" and r["method"] == "-" and r["status"] == 502
                      for r in recs), "no record of a request that never was")
        closers = [r for r in recs if r["type"] == "request" and r["path"].startswith("/close")]
        check(len(closers) == 4 and all(r["status"] == 200 and r["decision"] == "allowed"
                                        for r in closers),
              "answers ended by an upstream close are recorded once each, as 200 (%r)"
              % [(r["path"], r["status"]) for r in closers])
        allowed = [r for r in recs if r["type"] == "request" and r["decision"] == "allowed"]
        check(any(r["injected"] and r["key"] == "deploy-key" and r["host"] == "api.test"
                  for r in allowed), "injected requests are recorded with their key")
        check(any(r.get("scrubbed", 0) > 0 for r in allowed), "scrubbing is recorded")
        check(any(r["path"].startswith("/hello?key=") and "vrunph" not in r["path"]
                  for r in allowed), "query values are left out of the record")
        for sec in (secret_bearer, secret_ph, secret_noca, "late-secret-value",
                    "plain-allowed-secret"):
            check(sec.encode() not in raw_log and
                  base64.b64encode(sec.encode())[4:-4] not in raw_log,
                  "no secret in the audit log (%s...)" % sec[:6])

        # Fail closed: when a record cannot be written, nothing is answered as if it
        # were, and once the log has failed nothing more is forwarded until a record
        # can be written again. strace makes every write to audit.log after the
        # first (the session start) fail with ENOSPC.
        def traced_vproxy(inject):
            tracer = subprocess.Popen(
                ["strace", "-f", "-o", "/dev/null", "-P", tmp + "/home/audit.log", "-e",
                 "trace=write,fallocate", "-e", inject, VPROXY, "start", "--foreground",
                 "--resolve", "api.test:%d:127.0.0.1" % port], env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for _ in range(100):
                if os.path.exists(vrunctl.socket_path(runtime)):
                    break
                time.sleep(0.1)
            return tracer

        def through(sess, url):
            return subprocess.run(["curl", "-sS", "--max-time", "15", "-o", "/dev/null", "-w",
                                   "%{http_connect} %{http_code}", "--proxy",
                                   "http://127.0.0.1:%d" % sess.port, "--cacert",
                                   sess.ca_path, url], capture_output=True, timeout=60)

        def stop_traced(tracer):
            run([VPROXY, "stop"], env)
            tracer.wait(timeout=30)

        tracer = traced_vproxy("inject=write:error=ENOSPC:when=2+")
        s6 = vrunctl.Session(runtime, ["deploy"])
        n0 = len(upstream_records(log))
        r = through(s6, "https://%s/first-unrecorded" % hp)
        check(r.returncode != 0, "a request whose record fails is not delivered as complete "
              "(rc %d, %r)" % (r.returncode, r.stdout))
        time.sleep(0.3)
        n1 = len(upstream_records(log))
        check(n1 == n0 + 1, "that request had been forwarded before its record was due "
              "(%d -> %d)" % (n0, n1))
        r = through(s6, "https://%s/after-full" % hp)
        check(r.stdout.split()[:1] == [b"503"],
              "once the log failed, the next request is refused at CONNECT with 503 (%r)"
              % r.stdout)
        time.sleep(0.3)
        check(len(upstream_records(log)) == n1,
              "... and nothing of it reached the upstream (%d -> %d)"
              % (n1, len(upstream_records(log))))
        r = through(s6, "https://unbound.test:%d/" % port)
        check(r.stdout.split()[:1] == [b"503"],
              "a refusal that cannot be recorded is a 503 (%r)" % r.stdout)
        s6.sock.close()
        stop_traced(tracer)

        # A disk too full to hold the space vproxy keeps ahead for its records: the
        # first request is refused before anything goes out.
        tracer = traced_vproxy("inject=fallocate:error=ENOSPC")
        s7 = vrunctl.Session(runtime, ["deploy"])
        n0 = len(upstream_records(log))
        r = through(s7, "https://%s/no-room" % hp)
        check(r.stdout.split()[:1] == [b"503"],
              "no room reserved for the log: 503 before anything is forwarded (%r)" % r.stdout)
        time.sleep(0.3)
        check(len(upstream_records(log)) == n0, "... and the upstream saw nothing (%d -> %d)"
              % (n0, len(upstream_records(log))))
        s7.sock.close()
        stop_traced(tracer)
        try:
            vrunctl.Session(runtime, ["deploy"])
            check(False, "vproxy is stopped")
        except OSError:
            pass

        # The daemon's files: socket 0600 in a 0700 directory; CA bundles left by a
        # daemon killed with its sessions open are removed by the next one.
        run([VPROXY, "start"] + resolve, env)
        st = os.stat(vrunctl.socket_path(runtime))
        check(oct(st.st_mode & 0o777) == "0o600" and
              oct(os.stat(runtime).st_mode & 0o777) == "0o700",
              "control socket 0600 (%o) in a 0700 directory (%o)"
              % (st.st_mode & 0o777, os.stat(runtime).st_mode & 0o777))
        with open(os.path.join(runtime, "vproxy.pid")) as f:
            vpid = int(f.read())
        s9 = vrunctl.Session(runtime, ["deploy"])
        bundle = s9.ca_path
        check(os.path.exists(bundle), "a session's CA bundle exists while it is open")
        os.kill(vpid, 9)
        for _ in range(100):
            if not os.path.exists("/proc/%d" % vpid) or \
                    open("/proc/%d/stat" % vpid).read().split()[2] == "Z":
                break
            time.sleep(0.05)
        s9.sock.close()
        check(os.path.exists(bundle), "... and after vproxy was killed (left behind)")
        run([VPROXY, "start"] + resolve, env)
        check(not os.path.exists(bundle), "the next vproxy removed the stale bundle")

        # The runtime directory removed (as logind does at the last logout): the
        # daemon, now unreachable, exits rather than keep the keys for no one.
        with open(os.path.join(runtime, "vproxy.pid")) as f:
            vpid = int(f.read())
        shutil.rmtree(runtime)
        gone = False
        for _ in range(300):
            if not os.path.exists("/proc/%d" % vpid) or \
                    open("/proc/%d/stat" % vpid).read().split()[2] == "Z":
                gone = True
                break
            time.sleep(0.1)
        check(gone, "vproxy exits once its control socket is gone")
        with open(tmp + "/home/vproxy.log") as f:
            tail = f.read()[-400:]
        check("control socket was removed" in tail, "... and says why in its log (%r)"
              % tail[-160:])
        run([VPROXY, "start"] + resolve, env)
        r = run([VPROXY, "status"], env, check_rc=False)
        check(r.returncode == 0, "a new vproxy starts after that")

        run([VPROXY, "stop"], env, check_rc=False)
        r = run([VPROXY, "status"], env, check_rc=False)
        check(r.returncode == 3, "status after stop: exit 3")
        check(not os.path.exists(vrunctl.socket_path(runtime)), "control socket removed")
    finally:
        subprocess.run([VPROXY, "stop"], env=env, capture_output=True)
        if up is not None:
            up.kill()
            up.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
