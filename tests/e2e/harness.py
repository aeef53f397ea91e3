"""The end-to-end harness: real servers on loopback, a fresh vault, vproxy and
vrun, and teardown that stops exactly what it started.

Servers (all started by the test, all on 127.0.0.1 and ::1 high ports):
- nginx from Debian, its own config in a temp dir, one worker, TLS with a CA
  and leaves made here by the openssl CLI for api.e2e.test (bound),
  other.e2e.test (bound to nothing) and git.e2e.test (a git smart-HTTP
  repository behind fcgiwrap + git http-backend, Basic auth whose password is
  the real key). Its access log (JSON lines) records what arrived, the
  Authorization header and the full request line included.
- fcgiwrap on a unix socket in the temp dir (echo.cgi and git http-backend).
- a tiny DNS responder (UDP, 127.0.0.1 and ::1) and raw unix listeners, the
  host-side targets of the escape cases.

The server directory is hidden from every sandbox (profile "e2e": agent +
that directory), so a client can learn the key from nothing but the proxy.
"""
import base64
import ctypes
import errno
import json
import os
import pwd
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
PROFILES = os.path.join(SRC, "profiles")
ECHO_CGI = os.path.join(HERE, "echo.cgi")
ESCAPE = os.path.join(HERE, "escape.py")
CLIENTS = os.path.join(HERE, "clients")
SKIP = 77
# Debian's interpreter: the clients inside the sandbox use its packages (python3-requests).
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# sh -c GUARDED sh CMD...: for a client that would resolve names itself, first
# prove (escape.py guard) that no packet can leave the sandbox, even to a
# nameserver outside loopback; exit 3 without running CMD otherwise.
GUARDED = '"%s" "%s" guard >&2 && exec "$@"' % (PY, ESCAPE)

API, OTHER, GIT = "api.e2e.test", "other.e2e.test", "git.e2e.test"
GIT_HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"


class Checks:
    """ok/FAIL lines; a failure says what leaked or what was reachable. Skips
    are listed again at the end of every run (SKIPPED lines), pass or fail,
    so that a case that did not run is never taken for one that passed."""

    def __init__(self, suite):
        self.suite = suite
        self.failures = []
        self.passed = 0
        self.skipped = []
        self.notes = []

    def __call__(self, cond, what, detail=None):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if cond:
            self.passed += 1
        else:
            if detail is not None:
                text = detail if isinstance(detail, str) else repr(detail)
                for line in text[:3000].splitlines():
                    print("     " + line, flush=True)
            self.failures.append(what)
        return cond

    def skip(self, what, why):
        print("skip %s: %s" % (what, why), flush=True)
        self.skipped.append("%s: %s" % (what, why))

    def note(self, text):
        """A line repeated in the summary (what was tested where)."""
        print("# " + text, flush=True)
        self.notes.append(text)

    def summary(self):
        for n in self.notes:
            print("# " + n, flush=True)
        for s in self.skipped:
            print("# SKIPPED: " + s, flush=True)
        for f in self.failures:
            print("# FAILED: " + f, flush=True)
        print("# e2e %s: %d passed, %d failed, %d skipped" % (
            self.suite, self.passed, len(self.failures), len(self.skipped)), flush=True)
        return 1 if self.failures else 0


def secret_forms(secret):
    """The secret as a leak could show it: raw, percent-encoded, and the part of
    its base64 that does not depend on the neighbouring bytes, at each of the
    three alignments (so `user:SECRET` in a Basic header is caught too)."""
    b = secret.encode()
    forms = {b, urllib.parse.quote(secret, safe="").encode()}
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + b)
        first, last = -(-k // 3), (k + len(b)) // 3
        if last - first >= 4:
            forms.add(enc[first * 4:last * 4])
    return forms


def free_port(v6):
    """A TCP port free on 127.0.0.1 (and ::1 when v6): nginx binds it next."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if not v6:
            return port
        try:
            s6 = socket.socket(socket.AF_INET6)
            s6.bind(("::1", port))
            s6.close()
            return port
        except OSError:
            continue
    raise RuntimeError("no free port on 127.0.0.1 and ::1")


def have_ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def wait_until(cond, timeout=10.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class DnsResponder:
    """A UDP DNS server on 127.0.0.1 (and ::1, same port): answers every A
    query with 127.0.0.1 and records every datagram that arrived, DNS or not.
    v6_error says why there is no ::1 socket (the escapes report it as a skip)."""

    def __init__(self, v6):
        self.socks = []
        self.v6_error = None if v6 else "no IPv6 loopback on this machine"
        for _ in range(50):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
            if not v6:
                self.socks = [s]
                break
            s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            try:
                s6.bind(("::1", self.port))
                self.socks = [s, s6]
                break
            except OSError as e:
                s6.close()
                s.close()
                self.v6_error = "cannot bind UDP [::1]:%d: %s" % (self.port, errname(e.errno))
        if not self.socks:  # ::1 never bound: 127.0.0.1 alone, and v6_error says why
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
            self.socks = [s]
        elif len(self.socks) == 2:
            self.v6_error = None
        self.received = []
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def addrs(self):
        return ["127.0.0.1"] + (["::1"] if len(self.socks) > 1 else [])

    def _serve(self):
        import select
        while not self.stop:
            r, _, _ = select.select(self.socks, [], [], 0.1)
            for s in r:
                try:
                    data, peer = s.recvfrom(2048)
                except OSError:
                    continue
                self.received.append((peer, data))
                if len(data) >= 12:
                    try:
                        s.sendto(self._answer(data), peer)
                    except OSError:
                        pass

    @staticmethod
    def _answer(q):
        qid = q[:2]
        end = 12
        while end < len(q) and q[end] != 0:
            end += q[end] + 1
        question = q[12:end + 5]
        head = qid + struct.pack(">HHHHH", 0x8180, 1, 1, 0, 0)
        answer = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
        return head + question + answer

    def close(self):
        self.stop = True
        self.thread.join(timeout=2)
        for s in self.socks:
            s.close()


class UnixListener:
    """A listening unix socket (pathname or abstract) that counts connections."""

    def __init__(self, address):
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(address)
        self.sock.listen(16)
        self.sock.setblocking(False)

    def accepted(self):
        n = 0
        try:
            while True:
                c, _ = self.sock.accept()
                c.close()
                n += 1
        except (BlockingIOError, OSError):
            pass
        return n

    def close(self):
        self.sock.close()
        if isinstance(self.address, str) and not self.address.startswith("\0"):
            try:
                os.unlink(self.address)
            except OSError:
                pass


NGINX_CONF = r"""
worker_processes 1;
%(user)s
pid %(srv)s/nginx.pid;
error_log %(srv)s/error.log warn;
events { worker_connections 256; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    client_body_temp_path %(srv)s/tmp/body;
    proxy_temp_path %(srv)s/tmp/proxy;
    fastcgi_temp_path %(srv)s/tmp/fastcgi;
    uwsgi_temp_path %(srv)s/tmp/uwsgi;
    scgi_temp_path %(srv)s/tmp/scgi;
    client_max_body_size 64m;
    ssl_protocols TLSv1.2 TLSv1.3;
    # What arrived, verbatim: the full request line, the Authorization header,
    # the key headers, what the upstream answered.
    log_format e2e escape=json '{"server":"$server_name","sni":"$ssl_server_name",'
        '"host":"$http_host","request":"$request","status":"$status",'
        '"auth":"$http_authorization","x_api_key":"$http_x_api_key",'
        '"remote_user":"$remote_user","accept_encoding":"$http_accept_encoding",'
        '"user_agent":"$http_user_agent","content_encoding":"$sent_http_content_encoding",'
        '"bytes":"$body_bytes_sent","request_length":"$request_length"}';
    access_log %(srv)s/access.log e2e;

    server {
        %(listen)s
        server_name %(api)s;
        ssl_certificate %(srv)s/api.pem;
        ssl_certificate_key %(srv)s/api.key;
        root %(srv)s/www;
        location = /hdr {
            default_type text/plain;
            return 200 "authorization=$http_authorization\nx-api-key=$http_x_api_key\nargs=$args\n";
        }
        location /echo {
            fastcgi_pass unix:%(srv)s/fcgi.sock;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME %(echo_cgi)s;
        }
        location /chunked {
            fastcgi_pass unix:%(srv)s/fcgi.sock;
            fastcgi_buffering off;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME %(echo_cgi)s;
            fastcgi_param STREAM_DIR %(work)s;
        }
        location /gzip/ {
            gzip on;
            gzip_types *;
            gzip_min_length 0;
            gzip_proxied any;
        }
        location /forced-gzip/ {
            # Compressed whatever the client accepts, as some servers do.
            gzip_static always;
        }
    }
    server {
        %(listen)s
        server_name %(other)s;
        ssl_certificate %(srv)s/other.pem;
        ssl_certificate_key %(srv)s/other.key;
        location / { default_type text/plain; return 200 "other host: $http_authorization\n"; }
    }
    server {
        %(listen)s
        server_name %(git)s;
        ssl_certificate %(srv)s/git.pem;
        ssl_certificate_key %(srv)s/git.key;
        auth_basic "git";
        auth_basic_user_file %(srv)s/htpasswd;
        location / {
            fastcgi_pass unix:%(srv)s/fcgi.sock;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME %(git_backend)s;
            fastcgi_param GIT_PROJECT_ROOT %(srv)s/git;
            fastcgi_param GIT_HTTP_EXPORT_ALL "";
            fastcgi_param PATH_INFO $uri;
            fastcgi_param REMOTE_USER $remote_user;
        }
    }
}
"""


class Harness:
    def __init__(self, suite, vault_bin, vproxy_bin, vrun_bin):
        self.check = Checks(suite)
        self.vault_bin, self.vproxy_bin, self.vrun_bin = vault_bin, vproxy_bin, vrun_bin
        self.root = os.geteuid() == 0
        self.tmp = tempfile.mkdtemp(prefix="vrun-e2e-")
        os.chmod(self.tmp, 0o700)
        t = self.tmp
        self.srv, self.home, self.xdg = t + "/srv", t + "/home", t + "/xdg"
        self.vault_home, self.work, self.profiles = t + "/vault", t + "/work", t + "/profiles"
        for d in (self.srv, self.srv + "/tmp", self.srv + "/www", self.srv + "/git", self.home,
                  self.xdg, self.work, self.profiles):
            os.makedirs(d, mode=0o700, exist_ok=True)
        self.pass_file = t + "/pass"
        self.v6 = have_ipv6_loopback()
        self.procs = []  # (name, Popen) we started, in their own process groups
        self.closers = []
        self.vproxy_pid = None
        self.env = {"PATH": os.environ.get("PATH", SYSTEM_PATH), "HOME": self.home,
                    "LC_ALL": "C", "VAULT_HOME": self.vault_home, "XDG_RUNTIME_DIR": self.xdg,
                    "VAULT_PASSPHRASE_FILE": self.pass_file, "VRUN_PROFILE_DIR": self.profiles,
                    "TMPDIR": self.work, "GIT_TERMINAL_PROMPT": "0",
                    "GIT_CONFIG_NOSYSTEM": "1"}
        tag = os.urandom(10).hex()
        self.secrets = {
            "api-bearer": "sk_e2e_bearer_" + tag,
            "api-key": "sk_e2e_key_" + os.urandom(10).hex(),
            "git-token": "ghp_e2e_" + os.urandom(10).hex(),
        }
        self.port = None

    # ---- setup ----

    def start(self):
        # Daemons we start (vproxy forks into the background) and the children
        # of fcgiwrap come back to us when they exit, so teardown reaps them
        # even where PID 1 does not.
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            pass
        with open(self.pass_file, "w") as f:
            f.write("e2e passphrase %s\n" % os.urandom(8).hex())
        os.chmod(self.pass_file, 0o600)
        self._profiles()
        self._certs()
        self._content()
        self._git_repo()
        self._fcgiwrap()
        self._nginx()
        self.dns = DnsResponder(self.v6)
        self.closers.append(self.dns.close)
        self._vault()
        self._vproxy()

    def _profiles(self):
        shutil.copy(os.path.join(PROFILES, "agent"), self.profiles + "/agent")
        with open(self.profiles + "/e2e", "w") as f:
            f.write("# agent, plus the servers' directory (keys, logs, htpasswd)\n"
                    "include agent\nhide %s\n" % self.srv)
        for p in ("agent", "e2e"):
            os.chmod(self.profiles + "/" + p, 0o600)

    def _openssl(self, *a):
        subprocess.run(["openssl"] + list(a), check=True, capture_output=True, timeout=60)

    def _certs(self):
        s = self.srv
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-nodes", "-keyout", s + "/ca.key", "-out", s + "/ca.pem", "-days", "2",
                      "-subj", "/CN=vrun e2e test CA")
        for name, host in (("api", API), ("other", OTHER), ("git", GIT)):
            self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                          "-nodes", "-keyout", "%s/%s.key" % (s, name), "-out",
                          "%s/%s.csr" % (s, name), "-subj", "/CN=" + host)
            with open("%s/%s.ext" % (s, name), "w") as f:
                f.write("subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n" % host)
            self._openssl("x509", "-req", "-in", "%s/%s.csr" % (s, name), "-CA", s + "/ca.pem",
                          "-CAkey", s + "/ca.key", "-CAcreateserial", "-out",
                          "%s/%s.pem" % (s, name), "-days", "2", "-extfile",
                          "%s/%s.ext" % (s, name))

    def _content(self):
        www = self.srv + "/www"
        os.makedirs(www + "/gzip")
        os.makedirs(www + "/forced-gzip")
        # Random bytes: any corruption (or a scrubber that rewrites too much) shows.
        self.large = os.urandom(8 << 20)
        with open(www + "/large.bin", "wb") as f:
            f.write(self.large)
        self.text = b"".join(b"line %06d of a compressible text\n" % i for i in range(4000))
        with open(www + "/gzip/text.txt", "wb") as f:
            f.write(self.text)
        import gzip
        with open(www + "/forced-gzip/data.txt.gz", "wb") as f:
            f.write(gzip.compress(self.text))

    def git(self, *args, cwd=None, check=True, env=None):
        e = dict(self.env, GIT_AUTHOR_NAME="e2e", GIT_AUTHOR_EMAIL="e2e@e2e.test",
                 GIT_COMMITTER_NAME="e2e", GIT_COMMITTER_EMAIL="e2e@e2e.test")
        e.update(env or {})
        r = subprocess.run(["git"] + list(args), cwd=cwd, env=e, capture_output=True,
                           timeout=60)
        if check and r.returncode != 0:
            raise RuntimeError("git %s: %s" % (args, r.stderr.decode(errors="replace")))
        return r

    def _git_repo(self):
        self.bare = self.srv + "/git/repo.git"
        self.git("init", "-q", "--bare", "-b", "main", self.bare)
        self.git("config", "http.receivepack", "true", cwd=self.bare)
        seed = self.srv + "/seed"
        self.git("init", "-q", "-b", "main", seed)
        with open(seed + "/README", "w") as f:
            f.write("e2e repository\n")
        self.git("add", "README", cwd=seed)
        self.git("commit", "-q", "-m", "first", cwd=seed)
        self.git("push", "-q", self.bare, "main", cwd=seed)
        self.seed = seed
        # Basic auth for the git host; the password is the real key (hashed, apr1).
        h = subprocess.run(["openssl", "passwd", "-apr1", "-stdin"], check=True,
                           capture_output=True, input=self.secrets["git-token"].encode(),
                           timeout=30).stdout.decode().strip()
        with open(self.srv + "/htpasswd", "w") as f:
            f.write("e2e:%s\n" % h)

    def _spawn(self, name, argv, **kw):
        p = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL, **kw)
        self.procs.append((name, p))
        return p

    def _fcgiwrap(self):
        if shutil.which("fcgiwrap", path=SYSTEM_PATH + ":" + self.env["PATH"]) is None:
            raise RuntimeError("fcgiwrap is missing: apt-get install fcgiwrap (./setup)")
        sock = self.srv + "/fcgi.sock"
        log = open(self.srv + "/fcgiwrap.log", "wb")
        env = {"PATH": SYSTEM_PATH, "HOME": self.srv, "LC_ALL": "C"}
        self._spawn("fcgiwrap", ["fcgiwrap", "-c", "4", "-s", "unix:" + sock], env=env,
                    stdout=log, stderr=log)
        log.close()
        if not wait_until(lambda: os.path.exists(sock), 10):
            raise RuntimeError("fcgiwrap did not create its socket")

    def _nginx(self):
        conf = self.srv + "/nginx.conf"
        for attempt in range(5):
            self.port = free_port(self.v6)
            listen = "listen 127.0.0.1:%d ssl;" % self.port
            if self.v6:
                listen += " listen [::1]:%d ssl;" % self.port
            with open(conf, "w") as f:
                f.write(NGINX_CONF % {
                    "user": "user root;" if self.root else "", "srv": self.srv,
                    "listen": listen, "api": API, "other": OTHER, "git": GIT,
                    "echo_cgi": ECHO_CGI, "git_backend": GIT_HTTP_BACKEND,
                    "work": self.work})
            log = open(self.srv + "/nginx.out", "wb")
            p = self._spawn("nginx", ["nginx", "-c", conf, "-p", self.srv + "/",
                                      "-e", self.srv + "/error.log", "-g", "daemon off;"],
                            env={"PATH": SYSTEM_PATH}, stdout=log, stderr=log)
            log.close()
            if wait_until(lambda: p.poll() is not None or self._port_open(), 15):
                if p.poll() is None:
                    return
            self.procs.remove(("nginx", p))
            p.wait()
        with open(self.srv + "/error.log", errors="replace") as f:
            raise RuntimeError("nginx did not start: " + f.read()[-2000:])

    def _port_open(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def run(self, args, stdin=None, check=True, env=None, timeout=60):
        r = subprocess.run(args, env=env or self.env, input=stdin, capture_output=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("%s: rc %d: %s" % (args, r.returncode,
                                                 r.stderr.decode(errors="replace")))
        return r

    def hp(self, host):
        return "%s:%d" % (host, self.port)

    def _vault(self):
        v, ca = self.vault_bin, self.srv + "/ca.pem"
        self.run([v, "init", "--kdf", "interactive"])
        self.run([v, "add", "api-bearer", "--host", self.hp(API), "--inject", "bearer", "--ca",
                  ca], (self.secrets["api-bearer"] + "\n").encode())
        self.run([v, "add", "api-key", "--host", self.hp(API), "--ca", ca],
                 self.secrets["api-key"].encode())
        self.run([v, "add", "git-token", "--host", self.hp(GIT), "--ca", ca],
                 self.secrets["git-token"].encode())

    def _vproxy(self):
        args = [self.vproxy_bin, "start"]
        for h in (API, OTHER, GIT):
            args += ["--resolve", "%s:127.0.0.1" % self.hp(h)]
        self.run(args)
        out = self.run([self.vproxy_bin, "status"]).stdout.decode()
        self.vproxy_pid = int(out.split("pid ")[1].split(",")[0])

    # ---- running things ----

    def vrun(self, keys, cmd, profile="e2e", env=None, timeout=90, **kw):
        """CMD inside vrun with KEYS; returns the CompletedProcess."""
        args = [self.vrun_bin]
        for k in keys:
            args += ["-k", k]
        if profile:
            args += ["--profile", profile]
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("cwd", self.work)
        e = dict(self.env)
        e.update(env or {})
        try:
            return subprocess.run(args + ["--"] + cmd, env=e, capture_output=True,
                                  timeout=timeout, **kw)
        except subprocess.TimeoutExpired as ex:
            return subprocess.CompletedProcess(ex.cmd, -1, ex.stdout or b"",
                                               (ex.stderr or b"") + b"\n[timed out]")

    def escape(self, keys, *args, profile="e2e", env=None, inside=True):
        """escape.py ARGS inside vrun (or outside, as the control); returns its
        RESULT value (or "no result: ..." with what it printed)."""
        cmd = [PY, ESCAPE] + [str(a) for a in args]
        if inside:
            r = self.vrun(keys, cmd, profile=profile, env=env)
        else:
            e = dict(self.env)
            e.update(env or {})
            r = subprocess.run(cmd, env=e, capture_output=True, timeout=60,
                               stdin=subprocess.DEVNULL)
        for line in r.stdout.decode(errors="replace").splitlines():
            if line.startswith("RESULT "):
                return line[7:]
        return "no result: rc %d: %s %s" % (r.returncode, r.stdout[-500:], r.stderr[-800:])

    def leaks(self, data):
        """Names of the secrets found (in any form) in DATA (bytes)."""
        found = []
        for name, s in self.secrets.items():
            for form in secret_forms(s):
                if form in data:
                    found.append("%s (as %r)" % (name, form.decode(errors="replace")))
                    break
        return found

    def access_log(self):
        path = self.srv + "/access.log"
        if not os.path.exists(path):
            return []
        out = []
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        out.append({"raw": line})
        return out

    def log_mark(self):
        return len(self.access_log())

    def log_since(self, mark):
        return self.access_log()[mark:]

    def settled_log_since(self, mark):
        """The access-log lines since MARK once nginx has logged everything
        that reached it before now: a marker request of ours goes straight to
        nginx (outside any sandbox) and we wait for its line. nginx runs one
        worker, which logs each request when it finishes; a request that came
        earlier was logged before the marker's. The marker's line is left out.
        Raises when the marker never shows (then nothing can be concluded)."""
        tag = "settle-" + os.urandom(6).hex()
        ctx = ssl.create_default_context(cafile=self.srv + "/ca.pem")
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname=API) as t:
                t.sendall(b"GET /hdr?%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                          % (tag.encode(), self.hp(API).encode()))
                while t.recv(4096):
                    pass

        def seen():
            return any(tag in e.get("request", "") for e in self.access_log()[mark:])

        if not wait_until(seen, 10):
            raise RuntimeError("nginx never logged the marker request %s" % tag)
        return [e for e in self.access_log()[mark:] if tag not in e.get("request", "")]

    def vrun_inside(self, keys, cmd, **kw):
        """CMD inside vrun, behind a wrapper that first prints the session's
        placeholder of KEYS[0] ("INSIDE vrunph_..."): proof that vrun set up
        the sandbox and the session and started the command, so that a failure
        of the command is the command's own (not vrun's 125, a missing program's
        127, or a guard's exit). Returns (CompletedProcess with that line taken
        out of stdout, whether the line was there)."""
        var = self.env_var(keys[0])
        r = self.vrun(keys, ["sh", "-c", 'printf "INSIDE %%s\\n" "$%s"; exec "$@"' % var, "sh"]
                      + cmd, **kw)
        first, _, rest = r.stdout.partition(b"\n")
        ran = first.startswith(b"INSIDE vrunph_")
        if ran:
            r.stdout = rest
        return r, ran

    @staticmethod
    def env_var(key):
        return "".join(c if c.isalnum() else "_" for c in key.upper())

    def vproxy_running(self):
        return self.run([self.vproxy_bin, "status"], check=False).returncode == 0

    # ---- teardown ----

    def close(self):
        try:
            if self.vproxy_pid is not None:
                subprocess.run([self.vproxy_bin, "stop"], env=self.env, capture_output=True,
                               timeout=30)
                if not wait_until(lambda: not alive(self.vproxy_pid), 10):
                    os.kill(self.vproxy_pid, signal.SIGKILL)
            elif os.path.isdir(self.vault_home):
                subprocess.run([self.vproxy_bin, "stop"], env=self.env, capture_output=True,
                               timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            print("# teardown: vproxy: %s" % e, flush=True)
        for c in reversed(self.closers):
            try:
                c()
            except OSError:
                pass
        for name, p in reversed(self.procs):
            if p.poll() is None:
                # nginx: QUIT is a graceful stop of master and worker.
                try:
                    os.killpg(p.pid, signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
                except OSError:
                    pass
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            # Whatever is left of its process group (fcgiwrap's children, nginx's worker).
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            if p.poll() is None:
                p.wait()
        # Reap what came back to us (we are a subreaper) until none is left.
        end = time.monotonic() + 5
        try:
            while time.monotonic() < end:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    time.sleep(0.05)
        except ChildProcessError:
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---- the unprivileged run, as tests/runner/runner_test.py does it ----

def _uid_used(uid):
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        pass
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and os.stat("/proc/" + p).st_uid == uid:
                return True
        except OSError:
            pass
    return False


def _kill_uid(uid):
    """Whatever the throwaway user left running after a failure."""
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and os.stat("/proc/" + p).st_uid == uid:
                os.kill(int(p), signal.SIGKILL)
        except OSError:
            pass


def run_unprivileged(script, argv):
    """Re-run SCRIPT ARGV as an unused uid (setpriv) with a private temp dir:
    servers, vault, vproxy and vrun all run as that user, as a developer's
    would. Exit 77 (skipped) when not root."""
    if os.geteuid() != 0:
        print("skip: --unprivileged needs root (to switch to a throwaway uid)")
        return SKIP
    if shutil.which("setpriv") is None:
        print("FAIL setpriv (util-linux) is needed for the unprivileged run")
        return 1
    uid = next(u for u in range(61300, 65000) if not _uid_used(u))
    d = tempfile.mkdtemp(prefix="vrun-e2e-user-")
    try:
        os.chown(d, uid, uid)
        os.chmod(d, 0o700)
        env = {"PATH": SYSTEM_PATH, "TMPDIR": d, "HOME": d, "LC_ALL": "C"}
        for k in ("VRUN_E2E_NODE",):
            if k in os.environ:
                env[k] = os.environ[k]
        drop = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups", "--"]
        bins = [os.path.abspath(b) for b in argv if os.path.isabs(b) or "/" in b]
        reach = subprocess.run(drop + ["sh", "-c", '[ -r "$0" ] && [ -x "$1" ] && shift 2 && '
                                       'for f; do [ -x "$f" ] || exit 1; done', script,
                                       ECHO_CGI] + bins, env=env)
        if reach.returncode != 0:
            print("FAIL an unprivileged user cannot reach the binaries or %s: build and check "
                  "out where other users can read (not under a 0700 home)" % HERE)
            return 1
        python = shutil.which("python3", path=SYSTEM_PATH) or sys.executable
        print("# running the suite as uid %d" % uid, flush=True)
        r = subprocess.run(drop + [python, script] + argv, env=env, timeout=600)
        return r.returncode
    finally:
        _kill_uid(uid)
        shutil.rmtree(d, ignore_errors=True)


def errname(e):
    return errno.errorcode.get(e, str(e))
