#!/usr/bin/env python3
"""vproxy under valgrind memcheck, with real traffic on loopback.

vproxy runs in the foreground under `valgrind --tool=memcheck` twice: "1x"
and "4x", the second with four times the connections and short sessions of
the first. Each run:

- SESSIONS sessions with --rounds rounds each (x4 in the second run). A
  round is one connection of every kind in KINDS, WORKERS at a time:
  CONNECT + TLS + kept-alive requests with the bearer injected and the
  secret echoed back in the head and body (so scrubbing runs), chunked and
  1-byte-chunked responses, a POST body; a host bound to nothing (403); an
  upstream whose certificate fails verification (502); a client that hangs
  up mid-response; clients that give up before TLS, send garbage instead
  of TLS, stop mid-head, or send a malformed request (400); an opaque
  --allow-host tunnel; a plain-HTTP request injected under --allow-http; a
  connection still open when its session ends. The first session ends by its control
  connection dropping (as when vrun is killed), the middle ones by CLOSE,
  the last is still open, with its connections, at `vproxy stop`.
- CHURN short sessions (x4 in the second run), two connections each.
- `vproxy stop`, then valgrind's report.

The test fails on
- any memcheck error (invalid read or write, use of uninitialised memory,
  bad free, ...): valgrind's --error-exitcode and its ERROR SUMMARY,
- any "definitely lost" or "indirectly lost" byte,
- memory in use at exit that grows with the number of connections or
  sessions: the totals, and every loss record of any kind (matched by its
  allocation stack), compared between the two runs,
- traffic that did not go as each kind expects (so the paths above ran),
  or a request that reached the upstream without the injected bearer.

The suppressions file (memcheck.supp) may hold library-global one-time
allocations only; it says why it is empty. Memcheck does not see
libsodium's guarded allocations (mmap'd pages, used for every secret
buffer): a leaked secbuf is not caught here.

usage: memcheck_test.py [--valgrind PATH] [--suppressions FILE] [--rounds N]
                        [--origins] VAULT_BIN VPROXY_BIN
--origins adds --track-origins=yes (slower; says where uninitialised bytes
came from). VRUN_MEMCHECK_KEEP=1 keeps the valgrind logs and prints where.
Exit 77 (skipped) when valgrind cannot run.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import upstream  # noqa: E402
from checks import check, failures, run  # noqa: E402
import vrunctl  # noqa: E402
from testpki import make_certs, upstream_records  # noqa: E402

SESSIONS = 3          # sessions per run, each with its own rounds of connections
CHURN = 6             # short sessions per run (x GROWTH in the second), two connections each
WORKERS = 3           # client threads per session: connections overlap in vproxy
GROWTH = 4            # the second run has GROWTH times the connections of the first
VG_ERROR_EXIT = 99    # vproxy itself never exits with this
# In-use at exit of the two runs has been identical to the byte; the slack
# only allows for library state that might depend on timing. A leak of one
# block per connection of one kind adds (GROWTH - 1) * rounds * SESSIONS
# blocks, one per short session (GROWTH - 1) * CHURN; the variants within a
# kind (i % 2) and the two ways a short session ends each get about half of
# that, still above the slack (asserted in main).
SLACK_BLOCKS = 4
SLACK_BYTES = 2048
TIMEOUT = 60          # seconds for any one client socket operation under valgrind
BIG_CHUNK = 8192
BIG_CHUNKS = 128      # /long: 1 MiB, far more than a client reads before it hangs up

# ---- the upstream: upstream.py's echo server, plus a long chunked response ----

class Handler(upstream.Handler):
    def _serve(self):
        if not self.path.startswith("/long"):
            return upstream.Handler._serve(self)
        with open(self.server.log, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "headers": [[k, v] for k, v in self.headers.items()],
                                "body": "", "tls_resumed": False}) + "\n")
        # The bearer token inside the body keeps the scrubber busy until the client leaves.
        token = self.headers.get("Authorization", "").split(" ", 1)[-1].encode()
        piece = (b"token=" + token + b";" + b"x" * BIG_CHUNK)[:BIG_CHUNK]
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for _ in range(BIG_CHUNKS):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # vproxy dropped the upstream when the client went away
        self.close_connection = True

    do_GET = do_POST = do_HEAD = _serve


class Server(upstream.Server):
    def handle_error(self, request, client_address):
        pass  # connections vproxy abandons mid-response are expected here


def start_upstream(d, log, plain=False):
    srv = Server(("127.0.0.1", 0), Handler)
    srv.log = log
    if not plain:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(d + "/up.pem", d + "/up.key")
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


class World:
    """What every run shares: the upstreams' ports, the secrets, the files."""

    def __init__(self, tmp, port, pport, secret, psecret):
        self.tmp, self.port, self.pport = tmp, port, pport
        self.secret, self.psecret = secret, psecret
        self.log = tmp + "/upstream.log"

    def resolve_args(self):
        out = []
        for host, port in (("api.test", self.port), ("noca.test", self.port),
                           ("tunnel.test", self.port), ("plain.test", self.pport)):
            out += ["--resolve", "%s:%d:127.0.0.1" % (host, port)]
        return out

    def expected_auth(self, rec):
        """The Authorization the upstream must have seen for a logged request."""
        if rec["path"].startswith("/tunnel"):
            return None  # opaque: nothing injected, and the client sent none
        return "Bearer " + (self.psecret if rec["path"].startswith("/plain") else self.secret)


# ---- one connection of each kind ----

class Target:
    """Where a session's connections go."""

    def __init__(self, sess, w):
        self.proxy = sess.port
        self.ca = sess.ca_path
        self.port = w.port
        self.pport = w.pport
        self.upstream_ca = w.tmp + "/ca.pem"
        self.secret = w.secret.encode()
        self.psecret = w.psecret.encode()
        self.placeholder = sess.keys["deploy-key"][1].encode()


def connect(t, host):
    """CONNECT host:port through the session listener: (socket, status line)."""
    return vrunctl.connect_tunnel(t.proxy, b"%s:%d" % (host.encode(), t.port), TIMEOUT)


def tls(t, host):
    s, status = connect(t, host)
    if not status.startswith(b"HTTP/1.1 200"):
        s.close()
        raise ConnectionError("CONNECT %s: %r" % (host, status))
    ctx = ssl.create_default_context(cafile=t.ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(s, server_hostname=host)


def http_over(t, sock, host):
    c = http.client.HTTPConnection(host, t.port, timeout=TIMEOUT)
    c.sock = sock
    return c


def clean(t, data):
    return t.secret not in data


def conn_keepalive(t, i):
    """Several requests on one intercepted connection; the secret comes back in each
    response (the echo of the injected header, /reflect's forms) and must arrive as
    the placeholder."""
    s = tls(t, "api.test")
    c = http_over(t, s, "api.test")
    got = []
    plan = [("GET", "/hello?n=%d" % i, None), ("GET", "/reflect", None),
            ("GET", "/chunked", None), ("POST", "/post", b"b" * 3000),
            ("GET", "/reflect-chunk1", None)]
    for k, (method, path, body) in enumerate(plan):
        # Even i: the last request says close; odd i: the client hangs up while idle.
        close = k == len(plan) - 1 and i % 2 == 0
        c.request(method, path, body=body, headers={"Connection": "close"} if close else {})
        r = c.getresponse()
        data = str(r.headers).encode() + r.read()
        got.append((r.status, path, clean(t, data) and t.placeholder in data,
                    r.getheader("Transfer-Encoding")))
    c.close()
    ok = all(st == 200 and scrubbed for st, _, scrubbed, _ in got) and got[2][3] == "chunked"
    return ok, got, len(plan)


def conn_denied(t, i):
    s, status = connect(t, "unbound.test")
    rest = vrunctl.read_all(s)
    s.close()
    return status.startswith(b"HTTP/1.1 403") and b"not bound" in rest, status, 0


def conn_badcert(t, i):
    s = tls(t, "noca.test")
    c = http_over(t, s, "noca.test")
    c.request("GET", "/never")
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status == 502 and b"verification" in body, (r.status, body[:80]), 0


def midresponse(t, path, fin):
    """The client hangs up after a little of a long body, with or without a FIN first."""
    s = tls(t, "api.test")
    c = http_over(t, s, "api.test")
    c.request("GET", path)
    r = c.getresponse()
    part = r.read(3 * BIG_CHUNK)
    if fin:
        socket.socket.shutdown(s, socket.SHUT_RDWR)  # FIN at once, no TLS close_notify
    r.close()
    c.close()
    s.close()
    return r.status == 200 and len(part) == 3 * BIG_CHUNK and clean(t, part), len(part)


def conn_midresponse_chunked(t, i):
    """/long: chunked, the secret in every chunk (logged by the upstream)."""
    ok, got = midresponse(t, "/long", i % 2 == 1)
    return ok, got, 1


def conn_midresponse_length(t, i):
    """upstream.py's /big/N: a Content-Length body (not logged)."""
    ok, got = midresponse(t, "/big/%d" % (BIG_CHUNK * BIG_CHUNKS), i % 2 == 0)
    return ok, got, 0


def conn_abort_before_tls(t, i):
    s, status = connect(t, "api.test")
    s.close()
    return status.startswith(b"HTTP/1.1 200"), status, 0


def conn_garbage_tls(t, i):
    s, status = connect(t, "api.test")
    s.sendall(b"\x16\x03\x01\x00\x05hello" if i % 2 else b"GET / HTTP/1.1\r\n\r\n")
    rest = vrunctl.read_all(s)
    s.close()
    return status.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 200" not in rest, status, 0


def conn_partial_head(t, i):
    s = tls(t, "api.test")
    s.sendall(b"GET /partial HTTP/1.1\r\nHost: api.test:%d\r\nX-Half: " % t.port)
    s.close()
    return True, None, 0


def conn_malformed(t, i):
    s = tls(t, "api.test")
    s.sendall(b"GET / HTTP/1.1\r\nHost: api.test:%d\r\nContent-Length: 1\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % t.port)
    resp = vrunctl.read_all(s)
    s.close()
    return resp.startswith(b"HTTP/1.1 400"), resp[:40], 0


def conn_tunnel(t, i):
    """--allow-host: an opaque tunnel, TLS end to end with the upstream itself. Even i:
    the upstream ends it (Connection: close); odd i: the client does, after the answer."""
    s, status = connect(t, "tunnel.test")
    if not status.startswith(b"HTTP/1.1 200"):
        s.close()
        return False, status, 0
    ctx = ssl.create_default_context(cafile=t.upstream_ca)
    s = ctx.wrap_socket(s, server_hostname="tunnel.test")
    c = http_over(t, s, "tunnel.test")
    c.request("GET", "/tunnel", headers={"Connection": "close"} if i % 2 == 0 else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    s.close()
    return r.status == 200 and b'"/tunnel"' in data, r.status, 1


def conn_plain(t, i):
    """A plain-HTTP absolute-form request, injected (--allow-http); one per connection."""
    s = socket.create_connection(("127.0.0.1", t.proxy), timeout=TIMEOUT)
    s.sendall(b"GET http://plain.test:%d/plain?n=%d HTTP/1.1\r\nHost: plain.test:%d\r\n\r\n"
              % (t.pport, i, t.pport))
    resp = vrunctl.read_all(s)
    s.close()
    return resp.startswith(b"HTTP/1.1 200") and t.psecret not in resp, resp[:40], 1


def conn_left_open(t, i):
    """A kept-alive connection still open when its session ends; returns the socket."""
    s = tls(t, "api.test")
    c = http_over(t, s, "api.test")
    c.request("GET", "/open")
    r = c.getresponse()
    data = r.read()
    return r.status == 200 and clean(t, data), s, 1


KINDS = [conn_keepalive, conn_denied, conn_badcert, conn_midresponse_chunked,
         conn_midresponse_length, conn_abort_before_tls, conn_garbage_tls, conn_partial_head,
         conn_malformed, conn_tunnel, conn_plain, conn_left_open]


def drive(t, rounds):
    """rounds x every kind, WORKERS at a time. Returns (results, upstream requests, sockets)."""
    jobs = [(k, i) for i in range(rounds) for k in KINDS]
    results, expected, keep = {}, 0, []
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as ex:
        futs = [(k.__name__, ex.submit(k, t, i)) for k, i in jobs]
        for name, f in futs:
            try:
                ok, detail, nreq = f.result(timeout=600)
            except Exception as e:  # noqa: BLE001 - every failure is reported the same way
                ok, detail, nreq = False, repr(e), 0
            if name == "conn_left_open" and isinstance(detail, socket.socket):
                keep.append(detail)
            r = results.setdefault(name, [0, 0, None])
            r[0] += 1
            r[1] += 1 if ok else 0
            if not ok and r[2] is None:
                r[2] = detail
            expected += nreq if ok else 0
    return results, expected, keep


# ---- valgrind ----

RECORD = re.compile(r"^==\d+== (?:([\d,]+)|\(([\d,]+) direct, ([\d,]+) indirect\)) bytes in "
                    r"([\d,]+) blocks are (definitely lost|indirectly lost|possibly lost|"
                    r"still reachable) in loss record")
FRAME = re.compile(r"^==\d+==    (?:at|by) 0x[0-9A-F]+: (.*)$")


def num(s):
    return int(s.replace(",", ""))


def parse_log(path):
    """Summary numbers and loss records {(kind, stack): [bytes, blocks]} of a memcheck log."""
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    out = {"errors": None, "in_use": None, "records": {}, "lines": lines}
    for k in ("definitely lost", "indirectly lost", "possibly lost", "still reachable"):
        out[k] = (0, 0)
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.search(r"ERROR SUMMARY: ([\d,]+) errors", line)
        if m:
            out["errors"] = num(m.group(1))
        m = re.search(r"in use at exit: ([\d,]+) bytes in ([\d,]+) blocks", line)
        if m:
            out["in_use"] = (num(m.group(1)), num(m.group(2)))
        m = re.search(r"==\d+==\s+(definitely lost|indirectly lost|possibly lost|"
                      r"still reachable): ([\d,]+) bytes in ([\d,]+) blocks", line)
        if m:
            out[m.group(1)] = (num(m.group(2)), num(m.group(3)))
        m = RECORD.match(line)
        if m:
            stack, j = [], i + 1
            while j < len(lines) and FRAME.match(lines[j]):
                stack.append(FRAME.match(lines[j]).group(1))
                j += 1
            key = (m.group(5), tuple(stack))
            rec = out["records"].setdefault(key, [0, 0])
            rec[0] += num(m.group(1)) if m.group(1) else num(m.group(2)) + num(m.group(3))
            rec[1] += num(m.group(4))
            i = j
            continue
        i += 1
    return out


def error_excerpt(lines, limit=150):
    """The memcheck error reports of a log (not the leak records), for the failure output."""
    out, take = [], False
    for line in lines:
        body = re.sub(r"^==\d+== ?", "", line)
        if re.match(r"(Invalid |Conditional jump|Use of uninitialised|Syscall param|"
                    r"Mismatched free|Source and destination overlap|Argument )", body):
            take = True
        elif body == "" or body.startswith("HEAP SUMMARY"):
            if take:
                out.append("")
            take = False
        if take:
            out.append(body)
        if len(out) >= limit:
            out.append("... (more in the log)")
            break
    return out


def fmt_record(key, rec):
    kind, stack = key
    return ["%d bytes in %d blocks %s" % (rec[0], rec[1], kind)] + ["    " + s for s in stack[:14]]


# ---- one run: vproxy under valgrind, sessions, stop ----

def churn(runtime, w, n):
    """n short sessions: requests, a connection left open, then the session ends."""
    ok, expected = 0, 0
    for j in range(n):
        sess = vrunctl.Session(runtime, ["deploy"], args=("memcheck", "churn", str(j)))
        t = Target(sess, w)
        left = None
        try:
            a = conn_keepalive(t, j)
            b = conn_left_open(t, j)
            left = b[1]
            ok += 1 if a[0] and b[0] else 0
            expected += a[2] + b[2]
        except Exception as e:  # noqa: BLE001 - counted as a failed session by the caller
            print("short session %d: %r" % (j, e))
        if j % 2:
            sess.sock.close()  # as when vrun is killed
        else:
            sess.close()
        if isinstance(left, socket.socket):
            left.close()
    return ok, expected


def one_run(a, env, w, scale, label):
    rounds = a.rounds * scale
    vglog = "%s/memcheck-%s.log" % (w.tmp, label)
    runtime = env["VAULT_HOME"] + "/run"
    cmd = [a.valgrind, "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=all",
           "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=%d" % VG_ERROR_EXIT,
           "--num-callers=30", "--log-file=" + vglog]
    if a.origins:
        cmd.append("--track-origins=yes")
    if a.suppressions:
        cmd.append("--suppressions=" + a.suppressions)
    cmd += [a.vproxy, "start", "--foreground"] + w.resolve_args()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ready = threading.Event()
    stderr = []

    def collect():
        for line in proc.stderr:
            stderr.append(line.decode(errors="replace"))
            if b"vproxy: ready" in line:
                ready.set()

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    if not ready.wait(120):
        proc.kill()
        proc.wait()
        check(False, "%s: vproxy under valgrind did not get ready:\n%s" % (label,
                                                                         "".join(stderr)))
        return None
    n0 = len(upstream_records(w.log))
    expected, kinds, held = 0, {}, []
    rc = None
    try:
        for si in range(SESSIONS):
            sess = vrunctl.Session(runtime, ["deploy", "noca", "plain"],
                                   allow=["tunnel.test:%d" % w.port], args=("memcheck", str(si)))
            res, exp, keep = drive(Target(sess, w), rounds)
            expected += exp
            for name, (n, ok, why) in res.items():
                k = kinds.setdefault(name, [0, 0, None])
                k[0] += n
                k[1] += ok
                k[2] = k[2] or why
            if si == SESSIONS - 1:
                held.append(sess)  # still open, with its connections, at `vproxy stop`
                held.extend(keep)
                continue
            if si == 0:
                sess.sock.close()  # the control connection drops: vproxy ends the session
            else:
                check(sess.close(), "%s: session %d closed" % (label, si))
            for s in keep:
                s.close()
        ok, exp = churn(runtime, w, CHURN * scale)
        check(ok == CHURN * scale, "%s: %d/%d short sessions as expected" % (label, ok,
                                                                             CHURN * scale))
        expected += exp
    except Exception as e:  # noqa: BLE001 - vproxy may have died: its report says why
        check(False, "%s: traffic through vproxy: %r" % (label, e))
    try:
        time.sleep(0.5)  # let the last hang-ups arrive before the stop
        try:
            r = run([a.vproxy, "stop"], env, check_rc=False, timeout=120)
            check(r.returncode == 0, "%s: vproxy stop (rc %d)" % (label, r.returncode))
        except (OSError, subprocess.SubprocessError) as e:
            check(False, "%s: vproxy stop: %r" % (label, e))
        try:
            rc = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.terminate()  # SIGTERM: vproxy exits its loop the same way
            rc = proc.wait(timeout=120)
            check(False, "%s: vproxy ended by `vproxy stop`" % label)
    finally:
        for h in held:
            (h.sock if isinstance(h, vrunctl.Session) else h).close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    took = time.monotonic() - t0
    total = sum(k[0] for k in kinds.values())
    total += 2 * CHURN * scale
    print("%s: %d connections in %d sessions, %.1f s under valgrind"
          % (label, total, SESSIONS + CHURN * scale, took), flush=True)
    for kind in KINDS:
        n, ok, why = kinds.get(kind.__name__, (0, 0, "not run"))
        check(ok == n == rounds * SESSIONS,
              "%s: %s %d/%d as expected%s" % (label, kind.__name__, ok, rounds * SESSIONS,
                                              "" if ok == n else " (%r)" % (why,)))
    recs = upstream_records(w.log)[n0:]
    check(len(recs) == expected, "%s: %d requests reached the upstreams (expected %d)"
          % (label, len(recs), expected))
    wrong = [r["path"] for r in recs
             if dict((k.lower(), v) for k, v in r["headers"]).get("authorization") !=
             w.expected_auth(r)]
    check(not wrong, "%s: the bearer was injected in every request but tunnelled ones %r"
          % (label, wrong[:5]))
    if not os.path.exists(vglog):
        check(False, "%s: valgrind wrote no log (%s)" % (label, "".join(stderr)[-500:]))
        return None
    vg = parse_log(vglog)
    # With --errors-for-leak-kinds, each definite or indirect loss record counts as one error.
    leak_errors = sum(1 for k in vg["records"] if k[0] in ("definitely lost", "indirectly lost"))
    mem_errors = None if vg["errors"] is None else vg["errors"] - leak_errors
    check(rc == 0, "%s: valgrind's exit status is 0 (got %s; %d means errors or leaks)"
          % (label, rc, VG_ERROR_EXIT))
    if not check(mem_errors == 0, "%s: no memcheck errors (%s)" % (label, mem_errors)):
        print("\n".join(error_excerpt(vg["lines"])))
        print("vproxy's stderr:\n" + "".join(stderr)[-2000:])
    for kind in ("definitely lost", "indirectly lost"):
        lost = vg[kind]
        if not check(lost == (0, 0), "%s: %s: %d bytes in %d blocks" % (label, kind, *lost)):
            for key, rec in vg["records"].items():
                if key[0] == kind:
                    print("\n".join(fmt_record(key, rec)))
    print("%s: in use at exit %s bytes in %s blocks; still reachable %d/%d, possibly lost %d/%d"
          % (label, *(vg["in_use"] or ("?", "?")), *vg["still reachable"], *vg["possibly lost"]))
    vg["connections"] = total
    return vg


def compare(small, big):
    """In-use at exit, and every loss record, must not grow with connections or sessions."""
    a = small["in_use"] or (0, 0)
    b = big["in_use"] or (0, 0)
    check(b[1] - a[1] <= SLACK_BLOCKS and b[0] - a[0] <= SLACK_BYTES,
          "in use at exit does not grow with traffic: %d connections: %d bytes in %d blocks; "
          "%d connections: %d bytes in %d blocks" % (small["connections"], a[0], a[1],
                                                      big["connections"], b[0], b[1]))
    grown = []
    for key, rb in big["records"].items():
        ra = small["records"].get(key, [0, 0])
        if rb[1] - ra[1] > SLACK_BLOCKS or rb[0] - ra[0] > SLACK_BYTES:
            grown.append((rb[1] - ra[1], key, ra, rb))
    if not check(not grown, "no loss record grows with traffic (%d did)" % len(grown)):
        for d, key, ra, rb in sorted(grown, reverse=True)[:10]:
            print("grew by %d blocks (%d -> %d), %d -> %d bytes, %s:" % (d, ra[1], rb[1], ra[0],
                                                                      rb[0], key[0]))
            print("\n".join(fmt_record(key, rb)[1:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--valgrind", default="valgrind")
    ap.add_argument("--suppressions")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--origins", action="store_true",
                    help="--track-origins=yes: where uninitialised bytes came from (slower)")
    ap.add_argument("vault")
    ap.add_argument("vproxy")
    a = ap.parse_args()
    # The design margin: one leaked block per connection of one kind must exceed the slack.
    assert (GROWTH - 1) * a.rounds * SESSIONS > 2 * SLACK_BLOCKS, "too few rounds to see a leak"
    assert (GROWTH - 1) * CHURN > 2 * SLACK_BLOCKS, "too few sessions to see a per-session leak"
    try:
        subprocess.run([a.valgrind, "--version"], capture_output=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        print("skipped: valgrind (%s) cannot run; ./setup installs it" % a.valgrind)
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="vrun-memcheck-")
    os.chmod(tmp, 0o700)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "VAULT_HOME": tmp + "/home",
           "HOME": tmp, "VAULT_PASSPHRASE_FILE": tmp + "/pass"}
    secret = "sk_mc_" + os.urandom(12).hex()
    psecret = "plain_mc_" + os.urandom(12).hex()
    srv = psrv = None
    t0 = time.monotonic()
    try:
        with open(tmp + "/pass", "w") as f:
            f.write("memcheck passphrase %s\n" % os.urandom(8).hex())
        os.chmod(tmp + "/pass", 0o600)
        make_certs(tmp, ["api.test", "noca.test", "tunnel.test"], "vrun memcheck upstream CA")
        srv = start_upstream(tmp, tmp + "/upstream.log")
        psrv = start_upstream(tmp, tmp + "/upstream.log", plain=True)
        w = World(tmp, srv.server_address[1], psrv.server_address[1], secret, psecret)
        run([a.vault, "init", "--kdf", "interactive"], env)
        run([a.vault, "add", "deploy-key", "--host", "api.test:%d" % w.port, "--inject",
             "bearer", "--ca", tmp + "/ca.pem"], env, (secret + "\n").encode())
        # No --ca: the system roots do not know the upstream's CA, so verification fails.
        run([a.vault, "add", "noca", "--host", "noca.test:%d" % w.port, "--inject", "bearer"],
            env, b"noca-" + os.urandom(8).hex().encode())
        run([a.vault, "add", "plain", "--host", "plain.test:%d" % w.pport, "--inject", "bearer",
             "--allow-http"], env, psecret.encode())
        small = one_run(a, env, w, 1, "1x")
        big = one_run(a, env, w, GROWTH, "%dx" % GROWTH)
        if small is not None and big is not None:
            compare(small, big)
        else:
            check(False, "both runs produced a memcheck report")
    finally:
        try:
            subprocess.run([a.vproxy, "stop"], env=env, capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            pass
        for server in (srv, psrv):
            if server is not None:
                server.shutdown()
        if os.environ.get("VRUN_MEMCHECK_KEEP"):
            print("logs kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("memcheck test: %.1f s" % (time.monotonic() - t0))
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
