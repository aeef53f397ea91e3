#!/usr/bin/env python3
"""vproxy under abuse: connection floods, slow clients, oversized heads,
upstreams with bad certificates or only TLS 1.0, authority tricks, and a
kill -9 mid-transfer. Each case is driven against servers this test starts
on loopback, through a session opened with the control protocol.

usage: abuse_test.py VAULT_BIN VPROXY_BIN
"""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures, run  # noqa: E402
import vrunctl  # noqa: E402

VAULT, VPROXY = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
UPSTREAM = os.path.join(HERE, "upstream.py")
def openssl(*a):
    subprocess.run(["openssl"] + list(a), check=True, capture_output=True)


def make_pki(d):
    """A CA, good leaves, an expired leaf (via `openssl ca` dates), a
    self-signed leaf, and a leaf from a CA nobody trusts."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d + "/ca.key", "-out", d + "/ca.pem", "-days", "1", "-subj", "/CN=abuse CA")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d + "/other-ca.key", "-out", d + "/other-ca.pem", "-days", "1",
            "-subj", "/CN=untrusted CA")
    os.makedirs(d + "/db")
    open(d + "/db/index", "w").close()
    with open(d + "/db/serial", "w") as f:
        f.write("01\n")
    with open(d + "/ca.cnf", "w") as f:
        f.write("[ca]\ndefault_ca = c\n[c]\ndatabase = %s/db/index\nserial = %s/db/serial\n"
                "new_certs_dir = %s/db\ndefault_md = sha256\npolicy = p\n"
                "copy_extensions = none\nunique_subject = no\n[p]\ncommonName = supplied\n"
                % (d, d, d))
    for name, san, ca, dates in (
            ("good", "DNS:good.test,DNS:tls1.test", "ca", None),
            ("expired", "DNS:expired.test", "ca", ("20200101000000Z", "20200102000000Z")),
            ("wrongname", "DNS:someone-else.test", "ca", None),
            ("unknownroot", "DNS:unknownroot.test", "other-ca", None)):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "%s/%s.key" % (d, name), "-out", "%s/%s.csr" % (d, name),
                "-subj", "/CN=" + san.split(",")[0][4:])
        with open("%s/%s.ext" % (d, name), "w") as f:
            f.write("[e]\nsubjectAltName = %s\n" % san)
        start, end = dates or ("20250101000000Z", "20991231000000Z")
        openssl("ca", "-batch", "-config", d + "/ca.cnf", "-cert", "%s/%s.pem" % (d, ca),
                "-keyfile", "%s/%s.key" % (d, ca), "-in", "%s/%s.csr" % (d, name),
                "-out", "%s/%s.pem" % (d, name), "-startdate", start, "-enddate", end,
                "-extfile", "%s/%s.ext" % (d, name), "-extensions", "e")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d + "/selfsigned.key", "-out", d + "/selfsigned.pem", "-days", "1",
            "-subj", "/CN=selfsigned.test", "-addext", "subjectAltName=DNS:selfsigned.test")


def start_upstream(d, name, log, *extra):
    p = subprocess.Popen([sys.executable, UPSTREAM, "--cert", "%s/%s.pem" % (d, name), "--key",
                          "%s/%s.key" % (d, name), "--log", log] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return p, int(p.stdout.readline())


def records(log):
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


def connect_status(port, authority):
    """Send CONNECT authority through the session listener; return the status line."""
    try:
        s, status = vrunctl.connect_tunnel(port, authority)
    except OSError:  # reset before any answer: no status
        return b""
    s.close()
    return status


def main():
    tmp = tempfile.mkdtemp(prefix="vrun-abuse-")
    os.chmod(tmp, 0o700)
    procs = []
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "VAULT_HOME": tmp + "/home",
           "HOME": tmp, "VAULT_PASSPHRASE_FILE": tmp + "/pass"}
    runtime = tmp + "/home/run"
    log = tmp + "/upstream.log"
    secret = "abuse-secret-" + os.urandom(8).hex()
    try:
        with open(tmp + "/pass", "w") as f:
            f.write("abuse passphrase\n")
        os.chmod(tmp + "/pass", 0o600)
        make_pki(tmp)
        ports = {}
        for name, extra in (("good", ()), ("expired", ()), ("wrongname", ()),
                            ("unknownroot", ()), ("selfsigned", ())):
            p, ports[name] = start_upstream(tmp, name, log, *extra)
            procs.append(p)
        p, ports["tls1"] = start_upstream(tmp, "good", log, "--tls1-only")
        procs.append(p)
        run([VAULT, "init", "--kdf", "interactive"], env)
        hosts = {"good": "good.test", "expired": "expired.test", "wrongname": "wrongname.test",
                 "unknownroot": "unknownroot.test", "selfsigned": "selfsigned.test",
                 "tls1": "tls1.test"}
        args = [VAULT, "add", "k", "--inject", "bearer", "--ca", tmp + "/ca.pem"]
        resolve = []
        for name, host in hosts.items():
            args += ["--host", "%s:%d" % (host, ports[name])]
            resolve += ["--resolve", "%s:%d:127.0.0.1" % (host, ports[name])]
        run(args, env, secret.encode())
        run([VPROXY, "start"] + resolve, env)
        s = vrunctl.Session(runtime, ["k"])

        def curl(url, *extra):
            return subprocess.run(["curl", "-sS", "--max-time", "20", "--proxy",
                                   "http://127.0.0.1:%d" % s.port, "--cacert", s.ca_path,
                                   "-w", "\n%{http_code}"] + list(extra) + [url],
                                  capture_output=True, timeout=60)

        good = "https://good.test:%d/" % ports["good"]
        check(curl(good).stdout.endswith(b"200"), "baseline request works")

        # Upstreams that must not be trusted: 502 with a reason, secret never sent.
        n0 = len(records(log))
        for name in ("expired", "wrongname", "unknownroot", "selfsigned", "tls1"):
            r = curl("https://%s:%d/" % (hosts[name], ports[name]))
            check(r.stdout.endswith(b"502"), "%s upstream: 502 (%r)" % (name, r.stdout[-60:]))
        check(len(records(log)) == n0, "no request reached an untrusted upstream")

        # Authority tricks: only the exact canonical binding passes.
        gp = ports["good"]
        cases = [
            (b"GOOD.TEST:%d" % gp, b"200"), (b"good.test.:%d" % gp, b"200"),
            (b"good.test.evil:%d" % gp, b"403"), (b"evil.good.test:%d" % gp, b"403"),
            (b"user@good.test:%d" % gp, b"400"), (b"good.test:0%d" % gp, b"400"),
            (b"good.test:0", b"400"), (b"good.test:65536", b"400"),
            (b"2130706433:%d" % gp, b"400"), (b"0x7f000001:%d" % gp, b"400"),
            (b"[::ffff:127.0.0.1]:%d" % gp, b"403"), (b"127.0.0.1:%d" % gp, b"403"),
            (b"good.test", b"400"), (b"good.test:%d " % gp, b"400"),
        ]
        for authority, want in cases:
            line = connect_status(s.port, authority)
            check(line.split(b" ")[1:2] == [want], "CONNECT %s -> %s (%r)" % (
                authority.decode(), want.decode(), line))

        # Oversized heads: refused early, never buffered whole.
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"CONNECT good.test:%d HTTP/1.1\r\nX-Big: " % gp)
        sent, refused = 0, b""
        try:
            while sent < 1024 * 1024:
                c.sendall(b"a" * 8192)
                sent += 8192
        except OSError:
            pass
        try:
            refused = c.recv(64)
        except OSError:
            pass
        c.close()
        # (vproxy buffers at most the head limit; the kernel may absorb the rest.)
        check(refused.startswith(b"HTTP/1.1 431"), "a 1 MB header line is refused with 431")
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        many = b"".join(b"X-%d: y\r\n" % i for i in range(10000))
        try:
            c.sendall(b"CONNECT good.test:%d HTTP/1.1\r\n%s\r\n" % (gp, many))
        except OSError:
            pass
        try:
            line = c.recv(64)
        except OSError:
            line = b""
        c.close()
        check(line.startswith(b"HTTP/1.1 431"), "10k header fields: 431 (%r)" % line[:40])

        # Slow clients hold a connection each; others still get through promptly.
        slow = []
        for _ in range(100):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            c.sendall(b"CONN")
            slow.append(c)
        t0 = time.monotonic()
        r = curl(good)
        check(r.stdout.endswith(b"200") and time.monotonic() - t0 < 10,
              "a normal request completes while 100 clients dawdle")
        # Flood: beyond the per-session cap, an immediate 503 and no descriptor kept.
        flood = []
        for _ in range(300):
            try:
                flood.append(socket.create_connection(("127.0.0.1", s.port), timeout=10))
            except OSError:
                break
        busy = 0
        for c in flood:
            c.settimeout(0.05)
            try:
                if c.recv(64).startswith(b"HTTP/1.1 503"):
                    busy += 1
            except OSError:
                pass
        check(busy >= 100, "connections beyond the cap get 503 (%d of %d)" % (busy, len(flood)))
        vpid = None
        st = run([VPROXY, "status"], env)
        for word in st.stdout.split():
            if word.rstrip(b",").isdigit():
                vpid = int(word.rstrip(b","))
                break
        if vpid:
            nfd = len(os.listdir("/proc/%d/fd" % vpid))
            check(nfd < 320, "vproxy's descriptors stay bounded (%d open)" % nfd)
        for c in slow + flood:
            c.close()
        time.sleep(0.5)
        check(curl(good).stdout.endswith(b"200"), "the session works again after the flood")

        # kill -9 mid-transfer: the client sees the cut, the log still verifies, restart works.
        with open(tmp + "/upload", "wb") as f:
            f.write(b"x" * 2000000)
        big = subprocess.Popen(["curl", "-sS", "--max-time", "20", "--proxy",
                                "http://127.0.0.1:%d" % s.port, "--cacert", s.ca_path,
                                "--limit-rate", "100k", "--data-binary", "@" + tmp + "/upload",
                                "https://good.test:%d/post" % gp], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        time.sleep(1.0)
        if vpid:
            os.kill(vpid, signal.SIGKILL)
        out, err = big.communicate(timeout=30)
        check(big.returncode != 0, "the client sees the transfer cut (rc %d)" % big.returncode)
        r = run([VAULT, "audit", "verify"], env, check_rc=False)
        check(r.returncode == 0, "the audit log verifies after kill -9 (%r)" % r.stderr[-200:])
        run([VPROXY, "start"] + resolve, env)
        s2 = vrunctl.Session(runtime, ["k"])
        r = subprocess.run(["curl", "-sS", "--max-time", "20", "--proxy",
                            "http://127.0.0.1:%d" % s2.port, "--cacert", s2.ca_path,
                            "-w", "\n%{http_code}", good], capture_output=True, timeout=60)
        check(r.stdout.endswith(b"200"), "vproxy restarts and serves after kill -9")
        s2.close()
        run([VPROXY, "stop"], env)

        # Out of descriptors (EMFILE): vproxy backs off instead of spinning, then recovers.
        subprocess.run(["prlimit", "--nofile=64:64", VPROXY, "start"] + resolve, env=env,
                       check=True, capture_output=True, timeout=60)
        s3 = vrunctl.Session(runtime, ["k"])
        st = run([VPROXY, "status"], env)
        vpid = int([w for w in st.stdout.split() if w.rstrip(b",").isdigit()][0].rstrip(b","))
        held = []
        for _ in range(120):
            try:
                held.append(socket.create_connection(("127.0.0.1", s3.port), timeout=2))
            except OSError:
                break

        def cpu_ticks(pid):
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])

        t0 = cpu_ticks(vpid)
        time.sleep(2.0)
        used = (cpu_ticks(vpid) - t0) / os.sysconf("SC_CLK_TCK")
        check(used < 0.5, "no busy loop at EMFILE (%.2f s CPU in 2 s)" % used)
        for c in held:
            c.close()
        time.sleep(0.5)
        r = subprocess.run(["curl", "-sS", "--max-time", "20", "--proxy",
                            "http://127.0.0.1:%d" % s3.port, "--cacert", s3.ca_path,
                            "-w", "\n%{http_code}", good], capture_output=True, timeout=60)
        check(r.stdout.endswith(b"200"), "the session serves again once descriptors free up")
        s3.close()
        run([VPROXY, "stop"], env)
    finally:
        subprocess.run([VPROXY, "stop"], env=env, capture_output=True)
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
