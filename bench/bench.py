#!/usr/bin/env python3
"""The body of bench/run (which installs packages and builds first).

Sets up, on loopback only and in a temporary directory of its own: a test CA
and a leaf for api.bench.test (made here, never stored), an nginx TLS
upstream with one worker, a fresh VAULT_HOME with a key bound to that name
(--ca the test CA), `vproxy start --resolve`, squid (ssl_bump, header
replaced, upstream verified) and mitmdump (an addon setting Authorization,
upstream verified). Then measures every configuration side by side, in
rounds that rotate the order, and prints a markdown table of medians with
ratios to the baseline and the issue's targets. Everything it started is
stopped on the way out, whatever happens.

No name is ever looked up in DNS: vproxy gets --resolve, squid a hosts_file,
mitmdump a server_connect hook, the load generator numeric addresses.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import vrunctl  # noqa: E402

HOST = "api.bench.test"
KEY = "bench-key"
CONFIGS = ("direct", "vproxy", "squid", "mitmproxy")
CLK_TCK = os.sysconf("SC_CLK_TCK")
# proxy/session.c SESSION_CONNS_MAX: connections past it get 503.
VPROXY_SESSION_CONNS = 250


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise BenchError("%s exited (status %s) before listening" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise BenchError("%s does not listen on %d after %ds" % (what, port, timeout))


def cpu_seconds(pid):
    """utime + stime of one process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BenchError("no VmRSS for pid %d" % pid)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def median(xs):
    return statistics.median(xs) if xs else None


class Bench:
    def __init__(self, a):
        self.a = a
        self.build = a.build_dir
        self.vault = os.path.join(self.build, "vault", "vault")
        self.vproxy = a.vproxy or os.path.join(self.build, "proxy", "vproxy")
        self.vrun = os.path.join(self.build, "runner", "vrun")
        self.vload_bin = os.path.join(self.build, "bench", "vload")
        self.vsession_bin = os.path.join(self.build, "bench", "vsession")
        for p in (self.vault, self.vproxy, self.vload_bin, self.vsession_bin):
            if not os.access(p, os.X_OK):
                raise BenchError("%s is not built (run bench/run, or cmake --build %s --target "
                                 "vault vproxy vload vsession)" % (p, self.build))
        # Frozen copies: the build may be rebuilt while we measure (and perf needs the
        # file that is running to name its functions).
        self.tmp = tempfile.mkdtemp(prefix="vrun-bench-")
        # Traversable by squid's unprivileged user; everything secret below is 0600/0700.
        os.chmod(self.tmp, 0o711)
        bindir = os.path.join(self.tmp, "bin")
        os.mkdir(bindir)
        for attr in ("vault", "vproxy", "vrun", "vload_bin", "vsession_bin"):
            src = getattr(self, attr)
            if os.access(src, os.X_OK):
                dst = os.path.join(bindir, os.path.basename(src))
                shutil.copy2(src, dst)
                setattr(self, attr, dst)
        self.procs = []          # (name, Popen) started here, stopped in close()
        self.vproxy_pid = None   # the daemon forked by `vproxy start`
        self.vproxy_started = False
        self.sessions = []
        self.notes = []
        self.results = {}
        self.start = datetime.datetime.now(datetime.timezone.utc)
        self.load_at_start = open("/proc/loadavg").read().split()[:3]
        self.revision = revision()
        self.secret = "sk_bench_" + os.urandom(16).hex()
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": self.tmp, "LANG": "C",
                    "VAULT_HOME": os.path.join(self.tmp, "home"),
                    "VAULT_PASSPHRASE_FILE": os.path.join(self.tmp, "pass")}
        self.runtime = os.path.join(self.tmp, "home", "run")

    # ---- plumbing ----

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def spawn(self, name, args, **kw):
        out = open(self.path("%s.log" % name), "ab")
        p = subprocess.Popen(args, stdout=kw.pop("stdout", out), stderr=out,
                             stdin=subprocess.DEVNULL, **kw)
        self.procs.append((name, p))
        return p

    def run(self, args, env=None, stdin=None, timeout=120):
        r = subprocess.run(args, env=env or self.env, input=stdin, capture_output=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise BenchError("%s: exit %d: %s" % (" ".join(args[:3]), r.returncode,
                                                  r.stderr.decode(errors="replace").strip()))
        return r

    def close(self):
        for s in self.sessions:
            try:
                s.close()
            except Exception:
                pass
        if self.vproxy_started:
            try:
                subprocess.run([self.vproxy, "stop"], env=self.env, capture_output=True,
                               timeout=20)
            except Exception:
                pass
            # Only the daemon we started, found by the pid it reported.
            if self.vproxy_pid is not None:
                for _ in range(50):
                    if not os.path.exists("/proc/%d" % self.vproxy_pid):
                        break
                    time.sleep(0.1)
                else:
                    try:
                        # ... and only while that pid still runs our copy of vproxy.
                        with open("/proc/%d/cmdline" % self.vproxy_pid, "rb") as f:
                            if f.read().split(b"\0")[0] == self.vproxy.encode():
                                os.kill(self.vproxy_pid, signal.SIGKILL)
                    except OSError:
                        pass
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.a.keep:
            log("kept %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- setup ----

    def certs(self):
        d = self.path("pki")
        os.mkdir(d, 0o700)

        def openssl(*a):
            subprocess.run(["openssl"] + list(a), check=True, capture_output=True)

        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", d + "/ca.key", "-out", d + "/ca.pem",
                "-days", "2", "-subj", "/CN=vrun bench upstream CA")
        openssl("req", *ec, "-keyout", d + "/up.key", "-out", d + "/up.csr",
                "-subj", "/CN=" + HOST)
        with open(d + "/up.ext", "w") as f:
            f.write("subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\n"
                    "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n" % HOST)
        openssl("x509", "-req", "-in", d + "/up.csr", "-CA", d + "/ca.pem", "-CAkey",
                d + "/ca.key", "-CAcreateserial", "-out", d + "/up.pem", "-days", "2",
                "-extfile", d + "/up.ext")
        self.ca = d + "/ca.pem"

    def files(self):
        www = self.path("www")
        os.mkdir(www)
        with open(www + "/10m", "wb") as f:
            f.write(os.urandom(10 << 20))
        if self.a.big:
            # 1 GiB of incompressible bytes, quickly: one random 16 MiB block repeated.
            block = os.urandom(16 << 20)
            with open(www + "/1g", "wb") as f:
                for _ in range(64):
                    f.write(block)

    def nginx(self):
        d = self.path("nginx")
        os.mkdir(d, 0o700)
        self.up_port = free_port()
        small = ("vrun bench: a response of about one hundred bytes, "
                 "the size of a small JSON API answer.........\n")
        conf = """
worker_processes 1;
%(user)s
pid %(d)s/nginx.pid;
error_log %(d)s/error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path %(d)s/body; proxy_temp_path %(d)s/proxy;
    fastcgi_temp_path %(d)s/fastcgi; uwsgi_temp_path %(d)s/uwsgi; scgi_temp_path %(d)s/scgi;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    client_header_timeout 600s;
    server {
        listen 127.0.0.1:%(port)d ssl;
        server_name %(host)s;
        ssl_certificate %(pki)s/up.pem;
        ssl_certificate_key %(pki)s/up.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location = /small { default_type application/json; return 200 "%(small)s"; }
        location = /check {
            default_type text/plain;
            if ($http_authorization = "Bearer %(secret)s") { return 200 "injected\\n"; }
            return 401 "no credential\\n";
        }
        location /files/ { alias %(www)s/; }
    }
}
""" % {"d": d, "port": self.up_port, "host": HOST, "pki": self.path("pki"),
       "small": small.strip().replace('"', ""), "secret": self.secret,
       "www": self.path("www"), "user": "user root;" if os.getuid() == 0 else ""}
        with open(d + "/nginx.conf", "w") as f:
            f.write(conf)
        p = self.spawn("nginx", ["nginx", "-c", d + "/nginx.conf", "-p", d, "-e",
                                 d + "/error.log", "-g", "daemon off;"])
        wait_port(self.up_port, p, "nginx")
        self.nginx_proc = p
        for _ in range(50):
            kids = children(p.pid)
            if kids:
                self.nginx_worker = kids[0]
                break
            time.sleep(0.1)
        else:
            raise BenchError("nginx started no worker")

    def vault_and_vproxy(self):
        with open(self.env["VAULT_PASSPHRASE_FILE"], "w") as f:
            f.write("bench passphrase %s\n" % os.urandom(8).hex())
        os.chmod(self.env["VAULT_PASSPHRASE_FILE"], 0o600)
        self.run([self.vault, "init", "--kdf", "interactive"])
        self.run([self.vault, "add", KEY, "--host", "%s:%d" % (HOST, self.up_port),
                  "--inject", "bearer", "--ca", self.ca], stdin=self.secret.encode())
        venv = dict(self.env)
        pre = [os.path.join(self.build, "bench", "libwhatif_%s.so" % w)
               for w in self.a.whatif.split(",") if w]
        for p in pre:
            if not os.path.exists(p):
                raise BenchError("%s is not built (cmake --build %s --target whatif_%s)" % (
                    p, self.build, os.path.basename(p)[11:-3]))
        if pre:
            venv["LD_PRELOAD"] = ":".join(pre)
            self.notes.append("what-if run: vproxy with %s preloaded (bench/whatif/), not the "
                              "product as built" % ", ".join(os.path.basename(p) for p in pre))
        for kv in self.a.vproxy_env:
            k, _, v = kv.partition("=")
            venv[k] = v
        r = self.run([self.vproxy, "start", "--resolve",
                      "%s:%d:127.0.0.1" % (HOST, self.up_port)], env=venv)
        self.vproxy_started = True
        m = re.search(rb"pid (\d+)", r.stderr)
        if m is None:
            r = self.run([self.vproxy, "status"])
            m = re.search(rb"pid (\d+)", r.stdout)
        if m is None:
            raise BenchError("cannot tell vproxy's pid")
        self.vproxy_pid = int(m.group(1))

    def session(self):
        """A vproxy session whose listener has room for 1,000 pending connections."""
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.bind(("127.0.0.1", 0))
        ls.listen(4096)
        s = vrunctl.Session(self.runtime, [KEY], args=("bench",), listener=ls)
        self.sessions.append(s)
        return s

    def end_session(self, s):
        self.sessions.remove(s)
        s.close()

    def squid(self):
        d = self.path("squid")
        os.mkdir(d, 0o700)
        self.squid_port = free_port()
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        subprocess.run(["openssl", "req", "-x509", *ec, "-keyout", d + "/bump.key", "-out",
                        d + "/bump.pem", "-days", "2", "-subj", "/CN=squid bench bump CA",
                        "-addext", "basicConstraints=critical,CA:TRUE",
                        "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                       check=True, capture_output=True)
        with open(d + "/hosts", "w") as f:
            f.write("127.0.0.1 %s\n" % HOST)
        shutil.copy(self.ca, d + "/upstream-ca.pem")
        conf = """
http_port 127.0.0.1:%(port)d ssl-bump generate-host-certificates=on dynamic_cert_mem_cache_size=16MB tls-cert=%(d)s/bump.pem tls-key=%(d)s/bump.key
sslcrtd_program /usr/lib/squid/security_file_certgen -s %(d)s/ssl_db -M 16MB
sslcrtd_children 4 startup=1 idle=1
acl step1 at_step SslBump1
ssl_bump peek step1
ssl_bump bump all
tls_outgoing_options cafile=%(d)s/upstream-ca.pem
hosts_file %(d)s/hosts
dns_nameservers 127.0.0.1
request_header_access Authorization deny all
request_header_add Authorization "Bearer %(secret)s" all
http_access allow all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
logfile_rotate 0
cache_log %(d)s/cache.log
pid_filename %(d)s/squid.pid
coredump_dir %(d)s
max_filedescriptors 65536
workers 1
shutdown_lifetime 1 seconds
%(user)s
""" % {"d": d, "port": self.squid_port, "secret": self.secret,
       "user": "cache_effective_user proxy" if os.getuid() == 0 else ""}
        with open(d + "/squid.conf", "w") as f:
            f.write(conf)
        if os.getuid() == 0:
            subprocess.run(["chown", "-R", "proxy:proxy", d], check=True)
            initdb = ["setpriv", "--reuid=proxy", "--regid=proxy", "--init-groups"]
        else:
            initdb = []
        subprocess.run(initdb + ["/usr/lib/squid/security_file_certgen", "-c", "-s",
                                 d + "/ssl_db", "-M", "16MB"], check=True, capture_output=True)
        p = self.spawn("squid", ["squid", "-N", "-f", d + "/squid.conf"])
        wait_port(self.squid_port, p, "squid")
        self.squid_proc = p
        self.squid_ca = d + "/bump.pem"

    def mitmproxy(self):
        d = self.path("mitmproxy")
        os.mkdir(d, 0o700)
        self.mitm_port = free_port()
        with open(d + "/addon.py", "w") as f:
            # The one line that injects; the hook below it only maps the test name
            # to loopback (mitmproxy has no --resolve), keeping SNI and verification.
            f.write("""SECRET, HOST, ADDR = %r, %r, ("127.0.0.1", %d)
def request(flow): flow.request.headers["Authorization"] = "Bearer " + SECRET
def server_connect(data):
    if data.server.address and data.server.address[0] == HOST:
        data.server.sni = data.server.sni or HOST
        data.server.address = ADDR
""" % (self.secret, HOST, self.up_port))
        p = self.spawn("mitmdump", [
            "mitmdump", "--listen-host", "127.0.0.1", "--listen-port", str(self.mitm_port),
            "--set", "confdir=" + d, "--set", "ssl_verify_upstream_trusted_ca=" + self.ca,
            "--set", "stream_large_bodies=1m", "--set", "flow_detail=0",
            "--set", "termlog_verbosity=warn", "-s", d + "/addon.py"],
            env=dict(self.env, HOME=d))
        wait_port(self.mitm_port, p, "mitmdump", timeout=60)
        self.mitm_proc = p
        self.mitm_ca = d + "/mitmproxy-ca-cert.pem"
        for _ in range(100):
            if os.path.exists(self.mitm_ca):
                break
            time.sleep(0.1)

    # ---- measuring ----

    def url(self, path):
        return "https://%s:%d%s" % (HOST, self.up_port, path)

    def target(self, cfg):
        """(vload arguments, pid whose CPU is the proxy's, or None) for a configuration."""
        if cfg == "direct":
            return (["--connect", "127.0.0.1:%d" % self.up_port, "--cacert", self.ca,
                     "-H", "Authorization: Bearer " + self.secret], self.nginx_worker)
        if cfg == "vproxy":
            return (["-x", "127.0.0.1:%d" % self.sess.port, "--cacert", self.sess.ca_path],
                    self.vproxy_pid)
        if cfg == "squid":
            return (["-x", "127.0.0.1:%d" % self.squid_port, "--cacert", self.squid_ca],
                    self.squid_proc.pid)
        if cfg == "mitmproxy":
            return (["-x", "127.0.0.1:%d" % self.mitm_port, "--cacert", self.mitm_ca],
                    self.mitm_proc.pid)
        raise ValueError(cfg)

    def vload(self, cfg, path, extra, timeout=None):
        args, pid = self.target(cfg)
        cmd = [self.vload_bin] + extra + args + [self.url(path)]
        c0, n0 = cpu_seconds(pid), cpu_seconds(self.nginx_worker)
        u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(cmd, capture_output=True, timeout=timeout or 3600)
        u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        c1, n1 = cpu_seconds(pid), cpu_seconds(self.nginx_worker)
        client = (u1.ru_utime + u1.ru_stime) - (u0.ru_utime + u0.ru_stime)
        if r.returncode != 0:
            raise BenchError("vload %s: %s" % (cfg, r.stderr.decode(errors="replace")))
        res = json.loads(r.stdout.decode().strip().splitlines()[-1])
        res["cpu_s"] = c1 - c0
        per = (lambda x: x * 1e6 / res["all_requests"]) if res["all_requests"] else (
            lambda x: None)
        res["cpu_us_per_req"] = per(c1 - c0)
        res["client_cpu_us_per_req"] = per(client)
        res["nginx_cpu_us_per_req"] = per(n1 - n0)
        if res["errors"] or res["non2xx"]:
            self.notes.append("%s via %s: %d errors, %d non-2xx (%s)" % (
                path, cfg, res["errors"], res["non2xx"], res["first_error"] or "status"))
        return res

    def sanity(self, configs):
        """One request per configuration to /check: 200 only if Authorization arrived."""
        ok = []
        for cfg in configs:
            try:
                r = self.vload(cfg, "/check", ["-n", "1", "-c", "1", "-w", "0"], timeout=60)
            except (BenchError, subprocess.TimeoutExpired) as e:
                self.notes.append("%s unusable: %s" % (cfg, e))
                continue
            if r["requests"] == 1 and r["non2xx"] == 0 and r["errors"] == 0:
                ok.append(cfg)
            else:
                self.notes.append("%s left out: the upstream did not see the credential (%s)" %
                                  (cfg, r["first_error"] or "401"))
        return ok

    def rounds(self, name, configs, path, extra):
        """Every configuration once per round, the order rotated each round; medians."""
        runs = {c: [] for c in configs}
        n = self.a.rounds
        for r in range(n):
            order = list(configs[r % len(configs):]) + list(configs[:r % len(configs)])
            for cfg in order:
                log("  %s: round %d/%d, %s" % (name, r + 1, n, cfg))
                runs[cfg].append(self.vload(cfg, path, extra))
        out = {}
        for cfg, rs in runs.items():
            out[cfg] = {k: median([x[k] for x in rs if x.get(k) is not None])
                        for k in ("rate", "p50_ms", "p99_ms", "mib_s", "cpu_us_per_req",
                                  "client_cpu_us_per_req", "nginx_cpu_us_per_req",
                                  "connects", "errors")}
            out[cfg]["runs"] = rs
        return out

    def keepalive(self, configs):
        log("== keep-alive, %d connections, %gs window x %d rounds" % (
            self.a.conns, self.a.duration, self.a.rounds))
        self.results["keepalive"] = self.rounds(
            "keep-alive", configs, "/small",
            ["-c", str(self.a.conns), "-z", str(self.a.duration), "-w", str(self.a.warmup)])
        for cfg, r in self.results["keepalive"].items():
            if r["connects"] > 2 * self.a.conns:
                self.notes.append("keep-alive via %s reconnected (%d connects): not a pure "
                                  "keep-alive run" % (cfg, r["connects"]))

    def newconn(self, configs):
        log("== new connection per request, %d connections" % self.a.conns)
        self.results["newconn"] = self.rounds(
            "new-conn", configs, "/small",
            ["--new", "-c", str(self.a.conns), "-z", str(self.a.duration),
             "-w", str(self.a.warmup)])

    def large(self, configs):
        log("== 10 MiB downloads, one connection")
        self.results["large10m"] = self.rounds(
            "10 MiB", configs, "/files/10m",
            ["-c", "1", "-z", str(self.a.duration), "-w", str(self.a.warmup)])
        if self.a.big:
            log("== 1 GiB download, one connection")
            self.results["large1g"] = self.rounds(
                "1 GiB", [c for c in configs if c != "mitmproxy" or self.a.big_mitm],
                "/files/1g", ["-c", "1", "-n", "1", "-w", "0"])

    def idle_rss(self, cfg, n, with_request=False):
        """RSS growth of the proxy per idle intercepted connection (KiB).

        vproxy takes at most SESSION_CONNS_MAX (256) connections per session, so for
        vproxy the n connections are spread over enough sessions, all opened (and each
        warmed with one request) before the first RSS reading."""
        if cfg == "vproxy":
            nsess = (n + VPROXY_SESSION_CONNS - 1) // VPROXY_SESSION_CONNS
            sessions = [self.session() for _ in range(nsess)]
            targets = [(["-x", "127.0.0.1:%d" % s.port, "--cacert", s.ca_path], self.vproxy_pid)
                       for s in sessions]
        else:
            sessions = []
            targets = [self.target(cfg)]
        pid = targets[0][1]
        share = [n // len(targets) + (1 if i < n % len(targets) else 0)
                 for i in range(len(targets))]
        procs = []
        try:
            # One connection first in each, so one-time setup (contexts, leaf cache) is
            # not counted.
            for args, _ in targets:
                r = subprocess.run([self.vload_bin, "-n", "1", "-c", "1", "-w", "0"] + args +
                                   [self.url("/small")], capture_output=True, timeout=60)
                if r.returncode != 0:
                    raise BenchError("vload via %s: %s" % (cfg, r.stderr.decode()))
            time.sleep(0.5)
            before = rss_kib(pid)
            t0 = time.monotonic()
            held = 0
            for (args, _), k in zip(targets, share):
                extra = ["--idle", str(k), "-c", "32"] + (["--idle-req"] if with_request else [])
                p = subprocess.Popen([self.vload_bin] + extra + args + [self.url("/small")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
                procs.append(p)
                line = p.stdout.readline().decode()
                if not line.startswith("ready"):
                    raise BenchError("vload --idle via %s: %s" % (cfg, p.stderr.read().decode()))
                held += int(line.split()[1])
            setup = time.monotonic() - t0
            time.sleep(1.0)
            after = rss_kib(pid)
        finally:
            results = []
            for p in procs:
                p.stdin.close()  # vload lets go of the connections and reports
            for p in procs:
                try:
                    out = p.stdout.read()
                    p.wait(timeout=120)
                    results.append(json.loads(out.decode().strip().splitlines()[-1]))
                except (subprocess.TimeoutExpired, ValueError, IndexError):
                    p.kill()
                    p.wait()
            for sess in sessions:
                self.end_session(sess)
        dropped = sum(r["dropped"] for r in results)
        if dropped:
            self.notes.append("idle via %s: %d connections dropped while held" % (cfg, dropped))
        if held < n:
            errs = set(r["first_error"] for r in results if r["first_error"])
            self.notes.append("idle via %s: only %d of %d connections held (%s)" % (
                cfg, held, n, "; ".join(sorted(errs))))
        return {"before_kib": before, "after_kib": after, "held": held, "setup_s": setup,
                "sessions": len(targets),
                "per_conn_kib": (after - before) / held if held else None}

    def memory(self, configs):
        n = self.a.idle
        log("== memory: %d idle intercepted connections" % n)
        out = {}
        for cfg in configs:
            if cfg == "direct":
                continue
            log("  memory: %s" % cfg)
            out[cfg] = self.idle_rss(cfg, n)
            time.sleep(1)
        if "vproxy" in configs:
            log("  memory: vproxy, one request on each connection first")
            out["vproxy+req"] = self.idle_rss("vproxy", n, with_request=True)
        self.results["memory"] = out

    def session_open(self):
        log("== session open/close, %d sessions" % self.a.sessions)
        r = subprocess.run([self.vsession_bin, "-s", os.path.join(self.runtime, "control.sock"),
                            "-k", KEY, "-n", str(self.a.sessions), "-w", "20"],
                           capture_output=True, timeout=600)
        if r.returncode != 0:
            raise BenchError("vsession: %s" % r.stderr.decode(errors="replace"))
        self.results["session"] = json.loads(r.stdout.decode())

    def sandbox(self):
        log("== sandbox start-up, %d runs each" % self.a.spawns)
        bwrap = ["bwrap", "--unshare-user", "--unshare-net", "--ro-bind", "/", "/",
                 "--dev", "/dev", "--proc", "/proc", "true"]
        vrun = [self.vrun, "--key", KEY, "--", "true"]
        # The profiles of this checkout, not an installed copy (there may be none).
        venv = dict(self.env, VRUN_PROFILE_DIR=os.path.join(ROOT, "profiles"))
        true = [shutil.which("true") or "/bin/true"]
        # For the analysis: bwrap asked for the namespaces vrun makes (user, net, mount,
        # pid, ipc), so the cost of the namespace set and of vrun itself can be told apart.
        bwrap_ns = bwrap[:1] + ["--unshare-pid", "--unshare-ipc"] + bwrap[1:]
        if not os.access(self.vrun, os.X_OK):
            self.results["sandbox"] = {"skipped": "vrun is not built (%s)" % self.vrun}
            return
        if shutil.which("bwrap") is None:
            self.results["sandbox"] = {"skipped": "bwrap is not installed (any more: it was "
                                       "checked at the start; apt-get install bubblewrap)"}
            return
        probe = subprocess.run(vrun, env=venv, capture_output=True, timeout=60)
        if probe.returncode != 0:
            self.results["sandbox"] = {"skipped": "`vrun --key %s -- true` exits %d: %s" % (
                KEY, probe.returncode, probe.stderr.decode(errors="replace").strip()[:200])}
            return
        probe = subprocess.run(bwrap, capture_output=True, timeout=60)
        if probe.returncode != 0:
            self.results["sandbox"] = {"skipped": "bwrap exits %d: %s" % (
                probe.returncode, probe.stderr.decode(errors="replace").strip()[:200])}
            return
        cmds = (("vrun", vrun), ("bwrap", bwrap), ("true", true), ("bwrap_ns", bwrap_ns))
        times = {name: [] for name, _ in cmds}
        for i in range(self.a.spawns):
            for name, cmd in cmds[i % len(cmds):] + cmds[:i % len(cmds)]:
                t0 = time.perf_counter()
                r = subprocess.run(cmd, env=venv, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                dt = time.perf_counter() - t0
                if r.returncode != 0:
                    raise BenchError("%s exited %d during the sandbox runs" % (name,
                                                                               r.returncode))
                times[name].append(dt * 1000)
        self.results["sandbox"] = {k: median(v) for k, v in times.items()}
        self.results["sandbox"]["runs"] = times

    def perf(self):
        """perf record of vproxy during one extra keep-alive, new-connection and 10 MiB run,
        and 1,000 session opens."""
        if shutil.which("perf") is None:
            self.notes.append("--perf: perf not installed")
            return
        out = {}
        for name, path, extra in (
                ("keepalive", "/small", ["-c", str(self.a.conns)]),
                ("newconn", "/small", ["--new", "-c", str(self.a.conns)]),
                ("large10m", "/files/10m", ["-c", "1"]),
                ("session", None, None)):
            data = self.path("perf-%s.data" % name)
            # DWARF unwinding: Debian's libraries have no frame pointers.
            pr = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "499",
                                   "--call-graph", "dwarf,32768",
                                   "-p", str(self.vproxy_pid), "-o", data],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(("perf", pr))
            time.sleep(0.5)
            if path is None:
                subprocess.run([self.vsession_bin, "-s", os.path.join(self.runtime,
                                                                      "control.sock"),
                                "-k", KEY, "-n", "1000", "-w", "0"], capture_output=True,
                               timeout=600)
            else:
                self.vload("vproxy", path, extra + ["-z", str(self.a.duration), "-w", "0"])
            pr.send_signal(signal.SIGINT)
            pr.wait(timeout=60)
            rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio",
                                  "--sort", "dso", "-g", "none", "--percent-limit", "0.5"],
                                 capture_output=True, timeout=300)
            txt = "\n".join(l.rstrip() for l in rep.stdout.decode(errors="replace").splitlines()
                            if l.strip() and not l.startswith("#"))
            rep2 = subprocess.run(["perf", "report", "-i", data, "--children", "--stdio",
                                   "--sort", "symbol", "-g", "none", "--percent-limit", "1.5"],
                                  capture_output=True, timeout=300)
            # User-space frames only (the kernel's share shows in the DSO table), named ones.
            outer = {"_start", "main", "cmd_start", "daemon_run", "serve", "event_base_loop",
                     "__libc_start_main_impl", "__libc_start_call_main"}
            keep = []
            for l in rep2.stdout.decode(errors="replace").splitlines():
                m = re.search(r"\[\.\] (\S+)", l)
                if m and not m.group(1).startswith("0x") and m.group(1) not in outer:
                    keep.append(l.rstrip())
            txt2 = "\n".join(re.sub(r"\s+-\s+-\s*$", "", l) for l in keep[:40])
            out[name] = (txt, txt2)
            with open(self.path("perf-%s.txt" % name), "w") as f:
                f.write("== self time by object\n%s\n\n== user-space functions, "
                        "including callees\n%s\n" % (txt, txt2))
        self.results["perf"] = out

    def hey(self, configs):
        """Cross-check of the keep-alive figure with hey (-t 0, -x for the proxy)."""
        if shutil.which("hey") is None:
            self.notes.append("--hey: hey not installed")
            return
        out = {}
        for cfg in configs:
            if cfg == "direct":
                cmd = ["hey", "-host", "%s:%d" % (HOST, self.up_port),
                       "https://127.0.0.1:%d/small" % self.up_port]
            else:
                port = {"vproxy": self.sess.port, "squid": self.squid_port,
                        "mitmproxy": self.mitm_port}[cfg]
                cmd = ["hey", "-x", "http://127.0.0.1:%d" % port, self.url("/small")]
            cmd[1:1] = ["-z", "%gs" % self.a.duration, "-c", str(self.a.conns), "-t", "0"]
            log("  hey: %s" % cfg)
            r = subprocess.run(cmd, capture_output=True, timeout=self.a.duration + 120)
            txt = r.stdout.decode(errors="replace")
            rate = re.search(r"Requests/sec:\s+([\d.]+)", txt)
            p50 = re.search(r"50% in ([\d.]+) secs", txt)
            p99 = re.search(r"99% in ([\d.]+) secs", txt)
            out[cfg] = {"rate": float(rate.group(1)) if rate else None,
                        "p50_ms": float(p50.group(1)) * 1000 if p50 else None,
                        "p99_ms": float(p99.group(1)) * 1000 if p99 else None}
        self.results["hey"] = out


# ---- report ----

def fmt(v, unit="", nd=None):
    if v is None:
        return "—"
    if nd is None:
        nd = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2 if abs(v) >= 1 else 3
    s = "{:,.{}f}".format(v, nd)
    return s + unit


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fr(r):
    return "—" if r is None else "%.2fx" % r if r >= 0.1 else "%.3fx" % r


def verdict(ok):
    return "—" if ok is None else "**PASS**" if ok else "**FAIL**"


def revision():
    """The commit measured, and whether the tree had uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, timeout=10).stdout.decode().strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--",
                                "proxy", "certs", "vault", "runner", "include"],
                               capture_output=True, timeout=10).stdout.decode().strip()
        return head + (" + uncommitted changes" if dirty else "") if head else "?"
    except Exception:
        return "?"


def machine_line(start, load):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    def ver(cmd, rx):
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=30)
            m = re.search(rx, (r.stdout + r.stderr).decode(errors="replace"))
            return m.group(1) if m else "?"
        except Exception:
            return "?"

    return ("Machine: %d cores, %s, kernel %s, %s; load average at start %s; "
            "nginx %s, squid %s, mitmproxy %s, OpenSSL %s" % (
                os.cpu_count(), cpu, platform.release(),
                start.strftime("%Y-%m-%d %H:%M UTC"),
                " ".join(load), ver(["nginx", "-v"], r"nginx/([\d.]+)"),
                ver(["squid", "-v"], r"Version ([\d.]+)"),
                ver(["mitmdump", "--version"], r"Mitmproxy: ([\d.]+)"),
                ver(["openssl", "version"], r"OpenSSL ([\w.]+)")))


def report(b):
    R, a = b.results, b.a
    lines = [machine_line(b.start, b.load_at_start) + "; vrun at %s" % b.revision, "",
             "Every figure: median of %d rounds, configurations interleaved; %gs window after "
             "%gs warm-up; load generator: bench/vload (C), %d connections; client, proxy and "
             "nginx (1 worker) share the machine's cores." % (
                 a.rounds, a.duration, a.warmup, a.conns), "",
             "| figure | baseline | vproxy | vproxy / baseline | target | result "
             "| squid | mitmproxy |",
             "|---|---|---|---|---|---|---|---|"]

    def peer(fig, cfg, key, base, unit="", inv=False):
        r = R.get(fig, {}).get(cfg)
        if r is None:
            return "—"
        v = r[key]
        return "%s (%s)" % (fmt(v, unit), fr(ratio(v, base)))

    ka = R.get("keepalive", {})
    if ka:
        d, v = ka.get("direct", {}).get("rate"), ka.get("vproxy", {}).get("rate")
        rr = ratio(v, d)
        lines.append("| keep-alive requests/s | %s (direct) | %s | %s | >= 0.5x | %s | %s | %s |" % (
            fmt(d), fmt(v), fr(rr), verdict(None if rr is None else rr >= 0.5),
            peer("keepalive", "squid", "rate", d), peer("keepalive", "mitmproxy", "rate", d)))
        sq = ka.get("squid", {})
        for k, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
            dv, vv, sv = (ka.get("direct", {}).get(k), ka.get("vproxy", {}).get(k),
                          sq.get(k))
            ok = None if vv is None or sv is None else vv <= sv
            lines.append("| keep-alive latency %s, ms | %s (direct) | %s | %s; vs squid %s "
                         "| <= squid's | %s | %s | %s |" % (
                             label, fmt(dv), fmt(vv), fr(ratio(vv, dv)), fr(ratio(vv, sv)),
                             verdict(ok), fmt(sv),
                             fmt(ka.get("mitmproxy", {}).get(k))))
    nc = R.get("newconn", {})
    if nc:
        d, v = nc.get("direct", {}).get("rate"), nc.get("vproxy", {}).get("rate")
        rr = ratio(v, d)
        lines.append("| new connections/s (CONNECT + 2 TLS handshakes each) | %s (direct) | %s "
                     "| %s | >= 0.8x | %s | %s | %s |" % (
                         fmt(d), fmt(v), fr(rr), verdict(None if rr is None else rr >= 0.8),
                         peer("newconn", "squid", "rate", d),
                         peer("newconn", "mitmproxy", "rate", d)))
        lines.append("| new-connection latency p50, ms | %s (direct) | %s | %s | — | — | %s | %s |"
                     % (fmt(nc.get("direct", {}).get("p50_ms")),
                        fmt(nc.get("vproxy", {}).get("p50_ms")),
                        fr(ratio(nc.get("vproxy", {}).get("p50_ms"),
                                 nc.get("direct", {}).get("p50_ms"))),
                        fmt(nc.get("squid", {}).get("p50_ms")),
                        fmt(nc.get("mitmproxy", {}).get("p50_ms"))))
    for fig, label in (("large10m", "10 MiB downloads, MiB/s"), ("large1g", "1 GiB download, MiB/s")):
        lg = R.get(fig, {})
        if not lg:
            continue
        d, v = lg.get("direct", {}).get("mib_s"), lg.get("vproxy", {}).get("mib_s")
        rr = ratio(v, d)
        lines.append("| %s (scrubbing on) | %s (direct) | %s | %s | >= 0.7x | %s | %s | %s |" % (
            label, fmt(d), fmt(v), fr(rr), verdict(None if rr is None else rr >= 0.7),
            peer(fig, "squid", "mib_s", d), peer(fig, "mitmproxy", "mib_s", d)))
    mem = R.get("memory", {})
    if mem:
        v = mem.get("vproxy", {}).get("per_conn_kib")
        lines.append("| RSS growth per idle intercepted connection (%d, CONNECT + TLS), KiB "
                     "| — | %s | — | <= 64 KiB | %s | %s | %s |" % (
                         a.idle, fmt(v), verdict(None if v is None else v <= 64),
                         fmt(mem.get("squid", {}).get("per_conn_kib")),
                         fmt(mem.get("mitmproxy", {}).get("per_conn_kib"))))
        if "vproxy+req" in mem:
            lines.append("| ... the same after one request on each (upstream TLS kept), KiB "
                         "| — | %s | — | — | — | — | — |" % fmt(mem["vproxy+req"]["per_conn_kib"]))
    se = R.get("session")
    if se:
        v = se["open_p50_ms"]
        lines.append("| session open (control round trip + session CA + bundle), ms p50 "
                     "| — | %s | — | <= 1 ms | %s | — | — |" % (fmt(v), verdict(v <= 1.0)))
    sb = R.get("sandbox")
    if sb:
        if "skipped" in sb:
            lines.append("| sandbox start-up `vrun --key k -- true` vs bwrap | — | skipped: %s "
                         "| — | <= 0.75x | — | — | — |" % sb["skipped"].replace("|", "/"))
        else:
            rr = ratio(sb["vrun"], sb["bwrap"])
            lines.append("| sandbox start-up, ms median (`vrun --key k -- true` vs bwrap) "
                         "| %s (bwrap) | %s | %s | <= 0.75x | %s | — | — |" % (
                             fmt(sb["bwrap"]), fmt(sb["vrun"]), fr(rr),
                             verdict(rr <= 0.75)))
    # Details that explain the headline figures: CPU time is steadier than rates on a
    # shared machine, and says who pays.
    lines += ["", "CPU per request, µs (user+system; medians of rounds): the load generator, "
              "the proxy process, nginx's worker, and their sum. The sum against the cores "
              "available is what bounds the rates above.", "",
              "| run | configuration | client | proxy | nginx | total |",
              "|---|---|---|---|---|---|"]
    for fig, label in (("keepalive", "keep-alive"), ("newconn", "new connection"),
                       ("large10m", "10 MiB download")):
        for c in CONFIGS:
            r = R.get(fig, {}).get(c)
            if r is None:
                continue
            cl, px, ng = (r.get("client_cpu_us_per_req"), r.get("cpu_us_per_req"),
                          r.get("nginx_cpu_us_per_req"))
            if c == "direct":
                px = None
            tot = sum(x for x in (cl, px, ng) if x is not None)
            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                label, c, fmt(cl), fmt(px), fmt(ng), fmt(tot)))
    if se:
        lines += ["", "Session: open p50 %s ms, p90 %s ms, p99 %s ms, mean %s ms; close p50 %s "
                  "ms; %d sessions one after another (bench/vsession, C)." % (
                      fmt(se["open_p50_ms"]), fmt(se["open_p90_ms"]), fmt(se["open_p99_ms"]),
                      fmt(se["open_mean_ms"]), fmt(se["close_p50_ms"]), se["sessions"])]
    if sb and "skipped" not in sb:
        lines += ["", "Sandbox: medians of %d runs each, interleaved, timed from Python "
                  "(subprocess.run); spawning plain `true` the same way takes %s ms, included "
                  "in both figures (without it: vrun %s ms, bwrap %s ms, %s). bwrap asked "
                  "for the same namespaces as vrun (adding --unshare-pid --unshare-ipc): %s ms "
                  "(vrun is %s of that)." % (
                      a.spawns, fmt(sb["true"]), fmt(sb["vrun"] - sb["true"]),
                      fmt(sb["bwrap"] - sb["true"]),
                      fr(ratio(sb["vrun"] - sb["true"], sb["bwrap"] - sb["true"])),
                      fmt(sb["bwrap_ns"]), fr(ratio(sb["vrun"], sb["bwrap_ns"])))]
    if mem:
        lines += ["", "Memory: VmRSS of the proxy process before and after holding the "
                  "connections: " + "; ".join(
                      "%s %s -> %s KiB (%d held, set up in %.1fs)" % (
                          k, fmt(m["before_kib"]), fmt(m["after_kib"]), m["held"],
                          m["setup_s"]) for k, m in mem.items()) + "."]
    if "hey" in R:
        lines += ["", "Cross-check with hey (-t 0, -z %gs, -c %d), one run each: " % (
            a.duration, a.conns) + "; ".join(
                "%s %s req/s p50 %s ms p99 %s ms" % (c, fmt(r["rate"]), fmt(r["p50_ms"]),
                                                     fmt(r["p99_ms"]))
                for c, r in R["hey"].items()) + "."]
    if b.notes:
        lines += ["", "Notes:"] + ["- " + n for n in b.notes]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(
        prog="bench/run", description="vproxy and vrun against direct connections, squid, "
        "mitmproxy and bubblewrap (see bench/README.md).")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("-z", "--duration", type=float, default=5.0,
                    help="measured window per run, seconds (5)")
    ap.add_argument("-w", "--warmup", type=float, default=1.0,
                    help="warm-up before each window, seconds (1)")
    ap.add_argument("-r", "--rounds", type=int, default=3,
                    help="rounds per figure; medians are reported (3)")
    ap.add_argument("-c", "--conns", type=int, default=32, help="connections (32)")
    ap.add_argument("--idle", type=int, default=1000, help="idle connections held (1000)")
    ap.add_argument("--sessions", type=int, default=200, help="sessions opened (200)")
    ap.add_argument("--spawns", type=int, default=30, help="sandbox start-ups each (30)")
    ap.add_argument("--big", action="store_true", help="also the 1 GiB download (slow)")
    ap.add_argument("--big-mitm", action="store_true",
                    help="with --big: mitmproxy too (minutes)")
    ap.add_argument("--quick", action="store_true",
                    help="1 round of 2s windows, 300 idle connections: a smoke test")
    ap.add_argument("--only", default="",
                    help="comma list of figures: keepalive,newconn,large,memory,session,"
                    "sandbox (default: all)")
    ap.add_argument("--peers", default="squid,mitmproxy",
                    help="peer proxies to run (default squid,mitmproxy; '' for none)")
    ap.add_argument("--perf", action="store_true",
                    help="also perf-record vproxy during extra runs and print the hot spots")
    ap.add_argument("--hey", action="store_true", help="also cross-check keep-alive with hey")
    ap.add_argument("--vproxy", help="the vproxy binary to measure (default: the build's), "
                    "for A/B comparisons of candidate builds")
    ap.add_argument("--vproxy-env", action="append", default=[], metavar="NAME=VALUE",
                    help="extra environment for vproxy (experiments, e.g. LD_PRELOAD)")
    ap.add_argument("--whatif", default="", metavar="sodpool,nodelay",
                    help="preload bench/whatif/ experiments into vproxy: sodpool (reuse "
                    "guarded allocations), nodelay (TCP_NODELAY)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("-o", "--output", help="also write the markdown table to this file")
    a = ap.parse_args()
    if a.quick:
        a.duration, a.warmup, a.rounds, a.idle, a.sessions, a.spawns = 2, 0.5, 1, 300, 50, 10
    figures = set(x for x in a.only.split(",") if x) or {
        "keepalive", "newconn", "large", "memory", "session", "sandbox"}
    peers = [p for p in a.peers.split(",") if p]

    # Our children inherit this: 1,000 idle connections need ~2,000 descriptors in a proxy.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    def on_signal(sig, frame):
        raise SystemExit(128 + sig)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    b = Bench(a)
    try:
        log("== setup in %s" % b.tmp)
        b.certs()
        b.files()
        b.nginx()
        b.vault_and_vproxy()
        b.sess = b.session()
        if "squid" in peers:
            b.squid()
        if "mitmproxy" in peers:
            b.mitmproxy()
        configs = b.sanity(["direct", "vproxy"] + peers)
        for must in ("direct", "vproxy"):
            if must not in configs:
                raise BenchError("%s does not work; see %s" % (must, b.tmp))
        steps = [("keepalive", lambda: b.keepalive(configs)),
                 ("newconn", lambda: b.newconn(configs)),
                 ("large", lambda: b.large(configs)),
                 ("memory", lambda: b.memory(configs)),
                 ("session", b.session_open),
                 ("sandbox", b.sandbox),
                 ("hey", lambda: b.hey(configs)),
                 ("perf", b.perf)]
        for name, step in steps:
            if name in figures or (name == "hey" and a.hey) or (name == "perf" and a.perf):
                try:
                    step()
                except (BenchError, subprocess.SubprocessError, OSError, ValueError) as e:
                    b.notes.append("%s figure failed: %s" % (name, e))
                    log("bench/run: %s figure failed: %s" % (name, e))
        text = report(b)
        print(text)
        if "perf" in b.results:
            for name, (selfs, kids) in b.results["perf"].items():
                print("perf (cpu-clock, DWARF call graphs) of vproxy, %s run:\n\nself time by "
                      "object:\n%s\n\nfunctions including callees (user space):\n%s\n" % (
                          name, selfs, kids))
        if a.output:
            with open(a.output, "w") as f:
                f.write(text)
        with open(b.path("results.json"), "w") as f:
            json.dump(b.results, f, indent=1, default=str)
        if a.keep:
            log("raw results: %s" % b.path("results.json"))
        return 0
    except BenchError as e:
        log("bench/run: %s" % e)
        return 1
    finally:
        b.close()


if __name__ == "__main__":
    sys.exit(main())
