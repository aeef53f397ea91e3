"""Real clients inside `vrun`, unchanged, against nginx through vproxy. For
each: the upstream's access log shows the real key arrived, the client's own
output (stdout and stderr) never holds it, in any form."""
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess

import harness
from harness import API, GIT, OTHER, PY, CLIENTS

# Prints the placeholders the command was given, then runs it.
SHOW_PH = 'printf "PH %s %s %s\\n" "$API_BEARER" "$API_KEY" "$GIT_TOKEN"; exec "$@"'


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


class Run:
    """One client run: its output, the placeholders it saw, the log lines it caused."""

    def __init__(self, h, keys, cmd, env=None, shell=None):
        self.mark = mark = h.log_mark()
        if shell is not None:
            cmd = ["sh", "-c", shell, "sh"] + cmd
        self.r = h.vrun(keys, ["sh", "-c", SHOW_PH, "sh"] + cmd, env=env)
        self.rc = self.r.returncode
        out = self.r.stdout
        first, _, rest = out.partition(b"\n")
        parts = first.decode(errors="replace").split(" ")
        self.ph = dict(zip(("api-bearer", "api-key", "git-token"), parts[1:4])) \
            if parts[:1] == ["PH"] else {}
        self.stdout = rest if self.ph else out
        self.stderr = self.r.stderr
        self.output = self.r.stdout + self.r.stderr
        self.log = h.log_since(mark)
        self.leaks = h.leaks(self.output)
        self.error = None

    def detail(self):
        return "rc %d%s\nstdout: %r\nstderr: %r\nupstream log: %s" % (
            self.rc, " (%s)" % self.error if self.error else "", self.stdout[-1200:],
            self.stderr[-1200:], json.dumps(self.log)[-1500:])

    def holds(self, pred, *args):
        try:
            return bool(pred(*args))
        except (OSError, KeyError, ValueError, IndexError) as e:
            self.error = "%s: %s" % (type(e).__name__, e)
            return False


def client(h, what, keys, cmd, log_pred, out_pred=None, env=None, shell=None, want_rc=0):
    """Runs a client and checks: exit status, the key arrived upstream
    (log_pred over the new access-log lines), nothing leaked, and out_pred."""
    run = Run(h, keys, cmd, env=env, shell=shell)
    ok_rc = run.rc == want_rc

    def logged():
        # nginx writes its log line just after the answer: allow it a moment.
        run.log = h.log_since(run.mark)
        return bool(run.log) and run.holds(log_pred, run.log, h.secrets)

    arrived = ok_rc and harness.wait_until(logged, 5)
    h.check(ok_rc and arrived, "%s: the real key arrived upstream" % what, run.detail())
    h.check(not run.leaks, "%s: the client's output never holds the key" % what,
            "leaked in the client's output: %s\n%s" % (run.leaks, run.detail()))
    if out_pred is not None:
        h.check(ok_rc and run.holds(out_pred, run), "%s: the client got the right answer" % what,
                run.detail())
    return run


def last_auth(log):
    return log[-1].get("auth", "")


def curl_cases(h):
    api = "https://" + h.hp(API)
    client(h, "curl, bearer injected by the proxy", ["api-bearer"],
           ["curl", "-sS", "-f", api + "/hdr"],
           lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"],
           # nginx echoes the header back: the client sees the placeholder instead.
           lambda run: ("authorization=Bearer " + run.ph["api-bearer"]).encode() in run.stdout)
    client(h, "curl, placeholder in a header", ["api-key"], [],
           lambda log, s: log[-1].get("x_api_key") == s["api-key"],
           lambda run: ("x-api-key=" + run.ph["api-key"]).encode() in run.stdout,
           shell='curl -sS -f -H "X-Api-Key: $API_KEY" %s/hdr' % api)
    # The upstream echoes the Authorization it got, the real key inside the
    # base64. vproxy masks a key found in base64 (README: "base64 fragments
    # are masked"): its bits become zero, and the bits of "user:" around it
    # stay. So the client gets exactly Basic base64("user:" + NUL * len(key)):
    # the key was found at its alignment, nothing of it and nothing more was
    # touched.
    masked = "Basic " + base64.b64encode(b"user:" + b"\0" * len(h.secrets["api-key"])).decode()
    client(h, "curl, placeholder in Basic via -u user:$API_KEY", ["api-key"], [],
           lambda log, s: last_auth(log) == basic("user", s["api-key"]),
           lambda run: _json(run.stdout)["headers"]["authorization"] == masked,
           shell='curl -sS -f -u "user:$API_KEY" %s/echo/basic' % api)
    client(h, "curl, placeholder in the query string", ["api-key"], [],
           lambda log, s: log[-1].get("request") ==
           "GET /echo/query?api_key=%s&x=1 HTTP/1.1" % s["api-key"],
           lambda run: ('"query": "api_key=%s&x=1"' % run.ph["api-key"]).encode() in run.stdout,
           shell='curl -sS -f "%s/echo/query?api_key=$API_KEY&x=1"' % api)

    # Regression (found by this suite): curl --http1.0 offers ALPN "http/1.0"
    # only, and vproxy used to accept "http/1.1" alone and close the
    # connection. The control shows nginx serves such a client directly.
    direct = _direct_curl(h, ["-sS", "--http1.0", "-o", "/dev/null", "-w", "HTTP %{http_code}",
                              api + "/hdr"])
    h.check(direct == b"HTTP 200", "control: nginx serves curl --http1.0 directly", direct)
    client(h, "curl --http1.0 (ALPN http/1.0 only), bearer", ["api-bearer"],
           ["curl", "-sS", "-f", "--http1.0", "-w", "HTTP %{http_code}\n", api + "/hdr"],
           lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"],
           lambda run: run.stdout == ("authorization=Bearer %s\nx-api-key=\nargs=\nHTTP 200\n"
                                      % run.ph["api-bearer"]).encode())

    # A body is relayed as it is: the placeholder is swapped in the request
    # line and headers only (DESIGN.md), never inside a body.
    run = client(h, "curl, POST body relayed", ["api-bearer", "api-key"], [],
                 lambda log, s: log[-1]["request"].startswith("POST /echo/post ") and
                 last_auth(log) == "Bearer " + s["api-bearer"],
                 shell='curl -sS -f --data-binary "token=$API_KEY&n=1" %s/echo/post' % api)
    body = _json(run.stdout).get("body")
    h.check(body == "token=%s&n=1" % run.ph.get("api-key"),
            "curl, POST body: the placeholder in a body reaches the upstream unchanged "
            "(no swap in bodies)", body)

    # Uploads: a 2 MiB body with Content-Length (curl sends Expect: 100-continue)
    # and the same streamed from stdin, which curl sends chunked.
    up = h.work + "/upload.bin"
    with open(up, "wb") as f:
        f.write(os.urandom(2 << 20))
    want = hashlib.sha256(open(up, "rb").read()).hexdigest()
    for what, shell in (("curl, 2 MiB upload (Content-Length)", "curl -sS -f -T %s %s/echo/up1"),
                        ("curl, 2 MiB upload streamed (chunked request)",
                         "curl -sS -f -T - %s/echo/up2 < %s")):
        args = (up, api) if "up1" in shell else (api, up)
        client(h, what, ["api-bearer"], [],
               lambda log, s: log[-1]["request"].startswith("PUT /echo/up") and
               last_auth(log) == "Bearer " + s["api-bearer"],
               lambda run: _json(run.stdout).get("body_sha256") == want,
               shell=shell % args)
    os.unlink(up)

    # A large file: every byte intact through TLS, vproxy's scrubber and TLS again.
    out = h.work + "/large.bin"
    run = client(h, "curl, large file (8 MiB)", ["api-bearer"],
                 ["curl", "-sS", "-f", "-o", out, api + "/large.bin"],
                 lambda log, s: log[-1].get("bytes") == str(len(h.large)) and
                 last_auth(log) == "Bearer " + s["api-bearer"])
    got = open(out, "rb").read() if os.path.exists(out) else b""
    h.check(hashlib.sha256(got).digest() == hashlib.sha256(h.large).digest(),
            "curl, large file: identical (sha256) to the upstream's", "got %d bytes" % len(got))
    if os.path.exists(out):
        os.unlink(out)

    # Chunked: nginx streams the CGI's output with Transfer-Encoding: chunked.
    direct = _direct_curl(h, ["-sS", "-D", "-", "-o", "/dev/null", api + "/chunked?lines=3"])
    h.check(b"transfer-encoding: chunked" in direct.lower(),
            "control: nginx answers /chunked with Transfer-Encoding: chunked", direct)
    want = b"".join(b"chunk line %06d ..............................................\n" % i
                    for i in range(3000))
    client(h, "curl, chunked response", ["api-bearer"],
           ["curl", "-sS", "-f", api + "/chunked?lines=3000"],
           lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"],
           lambda run: run.stdout == want)

    # gzip: nginx compresses when asked; vproxy asks for identity, so the
    # client gets the plain text even with --compressed.
    direct = _direct_curl(h, ["-sS", "--compressed", "-D", "-", "-o", "/dev/null",
                              api + "/gzip/text.txt"])
    h.check(b"content-encoding: gzip" in direct.lower(),
            "control: nginx compresses /gzip/ for a client that accepts gzip", direct)
    client(h, "curl --compressed, gzip-capable upstream", ["api-bearer"],
           ["curl", "-sS", "-f", "--compressed", "-D", h.work + "/gz.head", "-o",
            h.work + "/gz.out", api + "/gzip/text.txt"],
           lambda log, s: log[-1].get("accept_encoding") == "identity" and
           log[-1].get("content_encoding") == "",
           lambda run: open(h.work + "/gz.out", "rb").read() == h.text and
           b"content-encoding" not in open(h.work + "/gz.head", "rb").read().lower())
    # A server that compresses anyway: vproxy cannot scrub it, so it refuses (502).
    client(h, "curl, upstream forces gzip", ["api-bearer"],
           ["curl", "-sS", "-w", "\nHTTP %{http_code}\n", api + "/forced-gzip/data.txt"],
           lambda log, s: log[-1].get("content_encoding") == "gzip" and
           last_auth(log) == "Bearer " + s["api-bearer"],
           lambda run: run.stdout.endswith(b"HTTP 502\n") and b"compressed" in run.stdout and
           b"\x1f\x8b" not in run.stdout)


def _json(data):
    try:
        return json.loads(data.decode(errors="replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


def _direct_curl(h, args):
    """curl straight to nginx, outside any sandbox (a control of the server)."""
    r = subprocess.run(["curl", "--noproxy", "*", "--cacert", h.srv + "/ca.pem", "--resolve",
                        "%s:127.0.0.1" % h.hp(API)] + args, capture_output=True, timeout=60,
                       env={"PATH": h.env["PATH"]})
    return r.stdout + r.stderr


def wget_cases(h):
    api = "https://" + h.hp(API)
    # Debian's wget uses GnuTLS, which does not read SSL_CERT_FILE: it takes
    # the proxy from https_proxy but cannot trust the session CA unchanged.
    run = Run(h, ["api-bearer"], ["wget", "-O", "-", api + "/hdr"])
    run.log = h.settled_log_since(run.mark)
    h.check(run.rc == 5 and not run.log and b"not trusted" in run.stderr and
            re.search(rb"Connecting to 127\.0\.0\.1:\d+", run.stderr) is not None,
            "wget unchanged: uses the proxy, does not trust the session CA, fails closed "
            "(nothing reached the upstream)", run.detail())
    h.check(not run.leaks, "wget unchanged: its output never holds the key", run.leaks)
    client(h, "wget --ca-certificate=$SSL_CERT_FILE", ["api-bearer"], [],
           lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"],
           lambda run: ("authorization=Bearer " + run.ph["api-bearer"]).encode() in run.stdout,
           shell='wget -q -O - --ca-certificate="$SSL_CERT_FILE" %s/hdr' % api)


def python_cases(h):
    api = "https://" + h.hp(API)
    pc = os.path.join(CLIENTS, "py_client.py")
    client(h, "python3 urllib, bearer", ["api-bearer"], [PY, pc, "urllib", api + "/echo/u1"],
           lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"],
           lambda run: run.stdout.startswith(b"STATUS 200"))
    client(h, "python3 urllib, placeholder in a header", ["api-key"],
           [PY, pc, "urllib", api + "/echo/u2", "--header", "X-Api-Key=API_KEY"],
           lambda log, s: log[-1].get("x_api_key") == s["api-key"],
           lambda run: run.stdout.startswith(b"STATUS 200"))
    have_requests = subprocess.run([PY, "-c", "import requests"], capture_output=True,
                                   timeout=30).returncode == 0
    if not have_requests:
        h.check(False, "python3-requests is installed (./setup installs it)")
        return
    client(h, "python3 requests, placeholder in Basic (auth=)", ["api-key"],
           [PY, pc, "requests", api + "/echo/r1", "--basic", "user=API_KEY"],
           lambda log, s: last_auth(log) == basic("user", s["api-key"]),
           lambda run: run.stdout.startswith(b"STATUS 200"))
    client(h, "python3 requests, placeholder in the query string", ["api-key"],
           [PY, pc, "requests", api + "/echo/r2?key=$API_KEY"],
           lambda log, s: log[-1].get("request") == "GET /echo/r2?key=%s HTTP/1.1"
           % s["api-key"],
           lambda run: run.stdout.startswith(b"STATUS 200"))
    # A streamed response (server-sent events): the second event is only sent
    # once the client has seen the first, so the stream ends ("released") only
    # if vproxy passes data on as it comes instead of holding the response.
    flag = "stream-" + os.urandom(4).hex()
    client(h, "python3 requests, streamed response (event stream)", ["api-bearer"],
           [PY, pc, "stream", api + "/chunked?wait=" + flag, h.work + "/" + flag],
           lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"],
           lambda run: run.stdout.split(b"\n")[:3] == [b"STATUS 200", b"data: first",
                                                      b"data: released"])
    client(h, "python3 requests, bearer, POST", ["api-bearer"],
           [PY, pc, "requests", api + "/echo/r3", "--data", "hello"],
           lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"] and
           log[-1]["request"].startswith("POST "),
           lambda run: _json(run.stdout).get("body") == "hello")


def git_cases(h):
    url = "https://%s/repo.git" % h.hp(GIT)
    s = h.secrets

    def basic_git(log, s):
        auths = [e for e in log if e.get("auth")]
        return bool(auths) and all(e["auth"] == basic("e2e", s["git-token"]) and
                                   e.get("remote_user") == "e2e" for e in auths) and \
            all(e["status"] in ("200", "401") for e in log) and \
            any(e["status"] == "200" for e in log)

    # Controls, outside the sandbox: the server checks the password, and the
    # real key is that password.
    def direct(password):
        return subprocess.run(
            ["git", "-c", "http.sslCAInfo=" + h.srv + "/ca.pem", "-c",
             "http.curloptResolve=%s:127.0.0.1" % h.hp(GIT), "ls-remote",
             "https://e2e:%s@%s/repo.git" % (password, h.hp(GIT))],
            capture_output=True, timeout=60, env=dict(h.env, NO_PROXY="*"))
    r = direct("wrong")
    h.check(r.returncode != 0 and b"Authentication failed" in r.stderr,
            "control: git with a wrong password is refused by the server", r.stderr)
    r = direct(s["git-token"])
    h.check(r.returncode == 0 and b"refs/heads/main" in r.stdout,
            "control: git with the real key as the password is let in", r.stderr)
    run = Run(h, ["git-token"], ["git", "ls-remote", url])
    h.check(run.rc != 0 and any(e["status"] == "401" for e in run.log) and
            not any(e["status"] == "200" for e in run.log),
            "git without credentials gets 401 (the proxy adds none of its own)",
            run.detail())

    clone = h.work + "/clone"
    client(h, "git clone, placeholder as the password in the URL", ["git-token"], [],
           basic_git, lambda run: open(clone + "/README").read() == "e2e repository\n",
           shell='git clone -q "https://e2e:$GIT_TOKEN@%s/repo.git" %s' % (h.hp(GIT), clone))
    stored = _grep_tree(h, clone)
    h.check(not stored, "git clone: nothing in the clone (config, refs, objects) holds the key",
            stored)

    # Someone pushes upstream; fetch inside the sandbox picks it up.
    with open(h.seed + "/NEWS", "w") as f:
        f.write("from upstream\n")
    h.git("add", "NEWS", cwd=h.seed)
    h.git("commit", "-q", "-m", "upstream change", cwd=h.seed)
    h.git("push", "-q", h.bare, "main", cwd=h.seed)
    want = h.git("rev-parse", "HEAD", cwd=h.seed).stdout.decode().strip()
    # The clone's remote URL holds the placeholder of the session that cloned:
    # placeholders are made per session, so in a new one it is no key at all.
    old_ph = h.git("-C", clone, "remote", "get-url", "origin").stdout.decode()
    old_ph = old_ph.split("e2e:", 1)[-1].split("@", 1)[0]
    run = Run(h, ["git-token"], ["git", "-C", clone, "fetch", "-q", "origin"])
    h.check(run.rc != 0 and old_ph.startswith("vrunph_") and old_ph != run.ph.get("git-token")
            and run.log and all(e["status"] == "401" for e in run.log) and
            any(e["auth"] == basic("e2e", old_ph) for e in run.log) and not run.leaks,
            "git fetch with a placeholder stored by an earlier session: 401, the stale "
            "placeholder is not swapped (documented limit)", run.detail())
    # What works across sessions: keep the variable, not its value, in the config.
    h.git("-C", clone, "remote", "set-url", "origin", url)
    h.git("-C", clone, "config", "credential.helper",
          '!f() { echo username=e2e; echo "password=$GIT_TOKEN"; }; f')
    client(h, "git fetch, credential helper printing $GIT_TOKEN", ["git-token"],
           ["git", "-C", clone, "fetch", "-q", "origin"], basic_git,
           lambda run: h.git("rev-parse", "origin/main", cwd=clone).stdout.decode().strip() ==
           want)

    # Push through a credential helper that prints the placeholder.
    work2 = h.work + "/clone2"
    script = h.work + "/push.sh"
    with open(script, "w") as f:
        f.write("set -e\n"
                "helper='!f() { echo username=e2e; echo \"password=$GIT_TOKEN\"; }; f'\n"
                "git -c credential.helper=\"$helper\" clone -q %s %s\n"
                "cd %s\n"
                "echo pushed > PUSHED\n"
                "head -c 2097152 /dev/urandom > big.bin\n"
                "git add PUSHED big.bin\n"
                "git -c user.name=e2e -c user.email=e2e@e2e.test commit -q -m pushed\n"
                "git -c credential.helper=\"$helper\" push -q origin HEAD:main\n"
                % (url, work2, work2))
    # The pack is over git's 1 MiB http.postBuffer: pushed as a chunked request.
    client(h, "git clone + push (2 MiB, chunked), credential helper printing the placeholder",
           ["git-token"], ["sh", script],
           lambda log, s: basic_git(log, s) and any(
               e["request"].startswith("POST /repo.git/git-receive-pack ") and
               e["status"] == "200" and int(e["request_length"]) > 2000000 for e in log),
           lambda run: b"pushed" in h.git("--git-dir", h.bare, "show", "main:PUSHED",
                                           check=False).stdout and
           h.git("--git-dir", h.bare, "cat-file", "-s", "main:big.bin",
                 check=False).stdout.strip() == b"2097152")
    stored = _grep_tree(h, work2)
    h.check(not stored, "git push: nothing in the work tree holds the key", stored)


def _grep_tree(h, top):
    found = []
    for dirpath, _, files in os.walk(top):
        for name in files:
            p = os.path.join(dirpath, name)
            try:
                with open(p, "rb") as f:
                    leaked = h.leaks(f.read())
            except OSError:
                continue
            if leaked:
                found.append("%s: %s" % (p, leaked))
    return found


def go_cases(h):
    go = shutil.which("go", path=h.env["PATH"] + ":/usr/lib/go/bin")
    if go is None:
        h.check(False, "go is installed (./setup installs Debian's golang-go)")
        return
    binary = h.work + "/go_client"
    gotmp = h.tmp + "/gocache"
    env = {"PATH": h.env["PATH"], "HOME": h.home, "GOCACHE": gotmp + "/cache",
           "GOPATH": gotmp + "/path", "GOPROXY": "off", "GOFLAGS": "-mod=mod",
           "GO111MODULE": "off", "CGO_ENABLED": "0", "GOTMPDIR": h.work}
    r = subprocess.run([go, "build", "-o", binary, os.path.join(CLIENTS, "go_client.go")],
                       env=env, capture_output=True, timeout=300)
    if not h.check(r.returncode == 0, "go build of the Go client (no module downloads)",
                   r.stderr):
        return
    api = "https://" + h.hp(API)
    client(h, "Go net/http (HTTPS_PROXY, SSL_CERT_FILE), bearer and placeholder header",
           ["api-bearer", "api-key"], [binary, api + "/echo/go", "X-Api-Key=API_KEY"],
           lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"] and
           log[-1].get("x_api_key") == s["api-key"],
           lambda run: run.stdout.startswith(b"STATUS 200"))
    client(h, "Go net/http, placeholder in the query string", ["api-key"],
           [binary, api + "/echo/goq?key=$API_KEY"],
           lambda log, s: log[-1].get("request") == "GET /echo/goq?key=%s HTTP/1.1"
           % s["api-key"],
           lambda run: run.stdout.startswith(b"STATUS 200"))


def audit_cases(h):
    r = h.run([h.vault_bin, "audit", "--json"], check=False)
    recs = [_json(line.encode()) for line in r.stdout.decode().splitlines() if line.strip()]
    reqs = [x for x in recs if x.get("host") == API]
    h.check(r.returncode == 0 and len(reqs) >= 10,
            "vault audit records the clients' requests to %s" % API, r.stdout[-800:])
    with open(h.vault_home + "/audit.log", "rb") as f:
        leaked = h.leaks(f.read())
    h.check(not leaked, "the audit log never holds a key", leaked)
    q = [x.get("path") for x in reqs if "/echo/query" in (x.get("path") or "")]
    h.check(q == ["/echo/query?api_key=&x="], "the audit log drops query values", q)
    r = h.run([h.vault_bin, "audit", "verify"], check=False)
    h.check(r.returncode == 0, "vault audit verify: the chain is intact", r.stderr)
    other = [e for e in h.access_log() if e.get("server") == OTHER]
    h.check(not other, "nothing reached the unbound host", other)


def run(h):
    curl_cases(h)
    wget_cases(h)
    python_cases(h)
    git_cases(h)
    go_cases(h)
    audit_cases(h)
