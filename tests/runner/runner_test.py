#!/usr/bin/env python3
"""vrun end to end: a fresh vault, vproxy against a TLS upstream on loopback
(tests/integration/upstream.py, names mapped with --resolve), and real
clients inside the sandbox. Proves: the key is injected while the command
only ever sees a placeholder; every escape the sandbox exists to stop fails
(direct TCP/UDP/IPv6, abstract sockets, masked files and sockets, other
processes, keyrings, TIOCSTI, new user namespaces, mounts, capabilities,
inherited descriptors, the agents in /run/user/UID whatever XDG_RUNTIME_DIR
says); --allow-host and profile allow-host; the audit records of a session;
exit statuses, signal forwarding, terminal handling (also in pipelines and
scripts), and failing closed with advice (no vproxy, unknown key, no user
namespaces, no /proc of its own, bad profile) before the command runs.
Probes run inside the sandbox by probe.py; the same probe outside it shows
each escape would work there.

usage: runner_test.py VAULT VPROXY VRUN            as the current user
       runner_test.py --unprivileged VAULT VPROXY VRUN
                       as root: run the same suite as a throwaway uid
                       (setpriv); exit 77 (skipped) when not root
"""
import errno
import fcntl
import json
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
UPSTREAM = os.path.join(SRC, "tests", "integration", "upstream.py")
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
from testpki import make_certs, upstream_records  # noqa: E402
PROBE = os.path.join(HERE, "probe.py")
PROFILES = os.path.join(SRC, "profiles")
SKIP = 77
failures = []


def check(cond, what, detail=None):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        if detail is not None:
            print("     " + str(detail)[:2000], flush=True)
        failures.append(what)


def unprivileged(argv):
    """Re-run this suite as an unused uid with a private temp dir."""
    if os.geteuid() != 0:
        print("skip: --unprivileged needs root (to switch to a throwaway uid)")
        return SKIP
    if shutil.which("setpriv") is None:
        print("FAIL setpriv (util-linux) is needed for the unprivileged run")
        return 1
    import pwd
    uid = next(u for u in range(61234, 65000) if not _uid_used(pwd, u))
    d = tempfile.mkdtemp(prefix="vrun-runner-user-")
    made = []
    try:
        os.chown(d, uid, uid)
        os.chmod(d, 0o700)
        # The user's /run/user/UID, as systemd-logind would make it: the suite
        # tests the masks of agents there. Removed afterwards.
        for rd in ("/run/user", "/run/user/%d" % uid):
            if not os.path.lexists(rd):
                os.mkdir(rd, 0o755 if rd == "/run/user" else 0o700)
                made.append(rd)
        if made and made[-1] == "/run/user/%d" % uid:
            os.chown(made[-1], uid, uid)
        # System paths only: root's own tools (pyenv, ~/.local) are not the user's.
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        python = shutil.which("python3", path=path) or sys.executable
        env = {"PATH": path, "TMPDIR": d, "HOME": d, "LC_ALL": "C"}
        drop = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups", "--"]
        bins = [os.path.abspath(b) for b in argv[:3]]
        reach = subprocess.run(drop + ["sh", "-c", '[ -r "$0" ] && [ -r "$1" ] && shift && '
                                       'for f; do [ -x "$f" ] || exit 1; done', PROBE,
                                       UPSTREAM] + bins, env=env)
        if reach.returncode != 0:
            print("FAIL an unprivileged user cannot reach the binaries or %s: build and check "
                  "out where other users can read (not under a 0700 home)" % HERE)
            return 1
        print("# running the suite as uid %d" % uid, flush=True)
        r = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                            "--", python, os.path.abspath(__file__)] + argv, env=env,
                           timeout=240)
        return r.returncode
    finally:
        _kill_uid(uid)
        shutil.rmtree(d, ignore_errors=True)
        for rd in reversed(made):
            shutil.rmtree(rd, ignore_errors=True)


def _uid_used(pwd, uid):
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
    """Whatever the throwaway user left running (vproxy after a failure)."""
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and os.stat("/proc/" + p).st_uid == uid:
                os.kill(int(p), signal.SIGKILL)
        except OSError:
            pass


def user_runtime_listeners(uid):
    """Listeners where gpg-agent and D-Bus keep their sockets whatever
    XDG_RUNTIME_DIR says: /run/user/UID/gnupg/S.gpg-agent and /run/user/UID/bus.
    Returns ({path: socket}, made): made is what the test created, to remove
    afterwards in reverse order. A path that exists already (a real agent or
    bus) is left alone and its check skipped, visibly."""
    base = "/run/user/%d" % uid
    socks, made = {}, []
    for rel in ("gnupg/S.gpg-agent", "bus"):
        path = base + "/" + rel
        if os.path.lexists(path):
            print("# skip: %s exists (a real agent or bus?): its mask is not tested here" % path)
            continue
        try:
            todo, d = [], os.path.dirname(path)
            while not os.path.isdir(d):
                todo.append(d)
                d = os.path.dirname(d)
            for d in reversed(todo):
                os.mkdir(d, 0o700)
                made.append(d)
            s = socket.socket(socket.AF_UNIX)
            s.bind(path)
            made.append(path)
            s.listen(8)
            s.setblocking(False)
        except OSError as e:
            print("# skip: cannot make %s (%s): its mask is not tested here" % (path, e))
            continue
        socks[path] = s
    return socks, made


def remove_made(made):
    for path in reversed(made):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError:
            pass


def proc_with_cmdline(needle):
    """Pids whose command line is exactly needle (a list)."""
    want = ("\0".join(needle) + "\0").encode()
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                if f.read() == want:
                    found.append(int(p))
        except OSError:
            pass
    return found


def wait_until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


class Pty:
    """A command on a fresh pseudo-terminal that is its controlling terminal."""

    def __init__(self, argv, env):
        self.master, slave = os.openpty()

        def ctty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                  start_new_session=True, preexec_fn=ctty)
        os.close(slave)
        self.out = b""

    def read_until(self, token, timeout=10.0):
        end = time.monotonic() + timeout
        while token not in self.out and time.monotonic() < end:
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.out += chunk
        return token in self.out

    def finish(self, timeout=20):
        self.read_until(b"\0never\0", timeout=0.2)
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.read_until(b"\0never\0", timeout=0.5)
        os.close(self.master)
        return rc


def main(argv):
    if argv and argv[0] == "--unprivileged":
        return unprivileged(argv[1:])
    if len(argv) != 3:
        print(__doc__)
        return 2
    vault_bin, vproxy_bin, vrun_bin = (os.path.abspath(a) for a in argv)
    root = os.geteuid() == 0
    print("# runner suite as uid %d (%s)" % (os.geteuid(), "root" if root else "unprivileged"),
          flush=True)
    tmp = tempfile.mkdtemp(prefix="vrun-runner-")
    os.chmod(tmp, 0o700)
    home, xdg, vh = tmp + "/home", tmp + "/xdg", tmp + "/vault"
    for d in (home, xdg, home + "/.ssh", home + "/.aws", home + "/.config", home + "/.gnupg",
              home + "/.config/gcloud", home + "/.kube", xdg + "/podman", xdg + "/containerd"):
        os.makedirs(d, mode=0o700, exist_ok=True)
    secret = "sk_live_" + os.urandom(12).hex()
    secret_ph = "ph_" + os.urandom(12).hex()
    pass_file = tmp + "/pass"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LC_ALL": "C",
           "VAULT_HOME": vh, "XDG_RUNTIME_DIR": xdg, "VAULT_PASSPHRASE_FILE": pass_file,
           "VRUN_PROFILE_DIR": PROFILES, "SSH_AUTH_SOCK": xdg + "/ssh-agent.sock",
           "DBUS_SESSION_BUS_ADDRESS": "unix:path=%s/bus" % xdg, "TMPDIR": tmp}
    up = None
    listeners = []
    run_made = []
    shm = "/dev/shm/vrun-test-%s" % os.urandom(6).hex()
    creds = [home + "/.gnupg/private-keys-v1.d", home + "/.config/gcloud/credentials.db",
             home + "/.kube/config"]
    try:
        with open(pass_file, "w") as f:
            f.write("runner passphrase %s\n" % os.urandom(8).hex())
        os.chmod(pass_file, 0o600)
        files = [(home + "/.ssh/id_ed25519", "PRIVATE KEY"),
                 (home + "/.aws/credentials", "aws_secret_access_key=x"),
                 (home + "/visible.txt", "visible")] + [(c, "credential") for c in creds]
        for name, text in files:
            with open(name, "w") as f:
                f.write(text)
        with open(shm, "w") as f:
            f.write("host shared memory")
        make_certs(tmp, ["api.test", "allowed.test", "unlisted.test"], "vrun runner test CA")
        log = tmp + "/upstream.log"
        up = subprocess.Popen([sys.executable, UPSTREAM, "--cert", tmp + "/up.pem", "--key",
                               tmp + "/up.key", "--log", log], stdout=subprocess.PIPE)
        port = int(up.stdout.readline())
        hp = "api.test:%d" % port

        def run(args, stdin=None, check_rc=True, e=None):
            r = subprocess.run(args, env=e or env, input=stdin, capture_output=True, timeout=60)
            if check_rc and r.returncode != 0:
                raise RuntimeError("%s: rc %d: %s" % (args, r.returncode, r.stderr.decode()))
            return r

        run([vault_bin, "init", "--kdf", "interactive"])
        run([vault_bin, "add", "deploy-key", "--host", hp, "--inject", "bearer", "--ca",
             tmp + "/ca.pem"], (secret + "\n").encode())
        run([vault_bin, "add", "ph-key", "--host", hp, "--ca", tmp + "/ca.pem"],
            secret_ph.encode())
        for n in ("amb-one", "amb-two"):
            run([vault_bin, "add", n, "--host", "other.test"], b"unused-" + n.encode())
        run([vproxy_bin, "start"] + [a for n in ("api.test", "allowed.test", "unlisted.test")
                                     for a in ("--resolve", "%s:%d:127.0.0.1" % (n, port))])
        status = run([vproxy_bin, "status"]).stdout.decode()
        vproxy_pid = int(status.split("pid ")[1].split(",")[0])
        control = [os.path.join(xdg, "vrun", d, "control.sock")
                   for d in os.listdir(xdg + "/vrun")
                   if os.path.exists(os.path.join(xdg, "vrun", d, "control.sock"))][0]

        def vrun(args, cmd, e=None, **kw):
            kw.setdefault("stdin", subprocess.DEVNULL)
            return subprocess.run([vrun_bin] + args + ["--"] + cmd, env=e or env,
                                  capture_output=True, timeout=30, **kw)

        def sessions():
            out = run([vproxy_bin, "status"]).stdout.decode()
            return int(out.split("sessions: ")[1].split()[0])

        # ---- the key reaches the upstream; the command sees placeholders ----
        n0 = len(upstream_records(log))
        r = vrun(["--key", "deploy"], ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                       "https://%s/inject" % hp])
        recs = upstream_records(log)
        check(r.returncode == 0 and r.stdout == b"200" and len(recs) == n0 + 1,
              "curl inside the sandbox reaches the bound host through vproxy", r)
        hdrs = dict((k.lower(), v) for k, v in (recs[-1]["headers"] if recs else []))
        check(hdrs.get("authorization") == "Bearer " + secret, "the key was injected upstream")
        check(b"vrun: key 'deploy' is 'deploy-key'" in r.stderr, "prefix resolution noted",
              r.stderr)
        # The upstream echoes the request headers back, key included.
        r = vrun(["-k", "deploy"], ["curl", "-sS", "https://%s/echo" % hp])
        check(r.returncode == 0 and b'"/echo"' in r.stdout and secret.encode() not in r.stdout,
              "the echoed key is scrubbed: no byte the command receives holds it", r)
        r = vrun(["-k", "ph-key"], ["sh", "-c", 'curl -sS -o /dev/null -H "X-Api-Key: $PH_KEY" '
                                                 'https://%s/ph' % hp])
        recs = upstream_records(log)
        hdrs = dict((k.lower(), v) for k, v in (recs[-1]["headers"] if recs else []))
        check(r.returncode == 0 and hdrs.get("x-api-key") == secret_ph,
              "the placeholder in $PH_KEY was swapped for the key", r)
        check(sessions() == 0, "the sessions ended with their commands")

        # ---- extra hosts: --allow-host and a profile's allow-host ----
        # Tunnelled opaquely: the command sees the upstream's own certificate.
        allowed = "allowed.test:%d" % port
        code = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_connect} %{http_code}",
                "--cacert", tmp + "/ca.pem"]
        allowing = tmp + "/allowing"
        with open(allowing, "w") as f:
            f.write("hide ~/.ssh\nallow-host %s\n" % allowed)
        os.chmod(allowing, 0o644)
        for how, args in (("--allow-host", ["--allow-host", allowed]),
                          ("a profile's allow-host", ["--profile", allowing])):
            n0 = len(upstream_records(log))
            path = "/allowed-%d" % len(how)
            r = vrun(["-k", "deploy"] + args, code + ["https://%s%s" % (allowed, path)])
            recs = upstream_records(log)[n0:]
            hdrs = dict((k.lower(), v) for k, v in (recs[0]["headers"] if recs else []))
            check(r.returncode == 0 and r.stdout == b"200 200" and
                  [x["path"] for x in recs] == [path] and "authorization" not in hdrs,
                  "%s: the command reaches that host, nothing injected" % how, (r, recs))
        n0 = len(upstream_records(log))
        r = vrun(["-k", "deploy"], code + ["https://%s/not-allowed" % allowed])
        r2 = vrun(["-k", "deploy", "--allow-host", allowed],
                  code + ["https://unlisted.test:%d/not-allowed" % port])
        check(r.returncode != 0 and r.stdout.startswith(b"403 ") and r2.returncode != 0 and
              r2.stdout.startswith(b"403 ") and len(upstream_records(log)) == n0,
              "any other host: vproxy answers CONNECT with 403, nothing reaches it", (r, r2))

        # ---- the audit log: what vproxy recorded of one vrun ----
        arg = "audit-%s" % os.urandom(4).hex()
        p = subprocess.Popen([vrun_bin, "-k", "deploy", "--allow-host", allowed, "--", "sh", "-c",
                              "curl -sS -o /dev/null https://%s/audited; curl -sS -o /dev/null "
                              "https://unlisted.test:%d/; exit 5" % (hp, port), arg],
                             cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        p.communicate(timeout=60)

        def audit(kind, **match):
            with open(vh + "/audit.log") as f:
                recs = [json.loads(line) for line in f if line.strip()]
            return [x for x in recs if x.get("type") == kind and
                    all(x.get(k) == v for k, v in match.items())]

        starts = audit("session_start", pid=p.pid)
        st = starts[0] if len(starts) == 1 else {}
        cmd = st.get("command") or ""
        check(p.returncode == 5 and st.get("uid") == os.getuid() and cmd.startswith("sh -c ") and
              cmd.endswith(" " + arg) and st.get("cwd") == home and
              st.get("keys") == ["deploy-key"] and st.get("profile") == "agent" and
              st.get("allow_hosts") == [allowed],
              "audit: session_start holds vrun's pid, uid, argv, cwd, keys, profile, hosts",
              (p.returncode, starts))
        ends = []
        wait_until(lambda: bool(audit("session_end", session=st.get("session", "?"))))
        ends = audit("session_end", session=st.get("session", "?"))
        en = ends[0] if len(ends) == 1 else {}
        check(en.get("exit") == 5 and en.get("requests") == 2 and en.get("denied") == 1,
              "audit: session_end holds the exit status and the request counts", ends)

        # ---- the probe: outside (control), then inside ----
        tcp4 = socket.socket()
        tcp4.bind(("127.0.0.1", 0))
        tcp4.listen(8)
        tcp4.setblocking(False)
        listeners.append(tcp4)
        tcp6 = None
        try:
            tcp6 = socket.socket(socket.AF_INET6)
            tcp6.bind(("::1", 0))
            tcp6.listen(8)
            tcp6.setblocking(False)
            listeners.append(tcp6)
        except OSError:
            tcp6 = None
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(0.5)
        listeners.append(udp)
        abstract = "vrun-test-%s" % os.urandom(6).hex()
        abs_sock = socket.socket(socket.AF_UNIX)
        abs_sock.bind("\0" + abstract)
        abs_sock.listen(8)
        abs_sock.setblocking(False)
        listeners.append(abs_sock)
        agents = []
        # Container daemons' sockets in the runtime directory (hidden by the agent profile).
        daemons = [xdg + "/docker.sock", xdg + "/podman/podman.sock",
                   xdg + "/containerd/containerd.sock"]
        for path in [env["SSH_AUTH_SOCK"], xdg + "/bus"] + daemons:
            s = socket.socket(socket.AF_UNIX)
            s.bind(path)
            s.listen(8)
            listeners.append(s)
            agents.append(s)
        # The user's /run/user/UID, which gpg and D-Bus use even when XDG_RUNTIME_DIR
        # (here: xdg) points elsewhere.
        run_socks, run_made = user_runtime_listeners(os.getuid())
        listeners.extend(run_socks.values())
        agents.extend(run_socks.values())

        def drain():
            """Connections and datagrams that reached the host's listeners."""
            got = []
            for s in [tcp4, tcp6, abs_sock] + agents:
                if s is None:
                    continue
                s.setblocking(False)
                try:
                    while True:
                        c, _ = s.accept()
                        c.close()
                        got.append(s.family)
                except (BlockingIOError, OSError):
                    pass
            try:
                while True:
                    udp.recvfrom(100)
                    got.append("udp")
            except (socket.timeout, BlockingIOError, OSError):
                pass
            return got

        x86 = platform.machine() == "x86_64"
        probe_args = {
            "tcp4": tcp4.getsockname()[1], "tcp6": tcp6.getsockname()[1] if tcp6 else 0,
            "udp": udp.getsockname()[1], "abstract": abstract, "upstream": port,
            "control": control, "ssh_agent": env["SSH_AUTH_SOCK"], "dbus": xdg + "/bus",
            "read": [vh + "/vault.db", home + "/.ssh/id_ed25519", home + "/.aws/credentials",
                     pass_file, home + "/visible.txt", shm] + creds,
            "unix": daemons + sorted(run_socks),
            "write": [], "listdir": [vh, home + "/.ssh", "/dev/shm"],
            "pids": [vproxy_pid, os.getpid()], "syscalls": False, "mask": home + "/.ssh"}
        r = run([sys.executable, PROBE, json.dumps(probe_args)])
        out = json.loads(r.stdout)
        reached = drain()
        check(out["tcp4"] == "ok" and out["abstract"] == "ok" and out["upstream"] == "ok" and
              (tcp6 is None or out["tcp6"] == "ok") and "udp" in reached and
              out["read"][vh + "/vault.db"] == "ok" and
              all(v == "ok" for v in out["unix"].values()) and
              all(out["read"][c] == "ok" for c in creds),
              "control: outside the sandbox the probe reaches everything", (out, reached))

        probe_args.update(syscalls=x86, write=[home + "/.ssh/new", vh + "/new"])
        extra_r, extra_w = os.pipe()  # an inherited descriptor vrun must not pass on
        r = vrun(["-k", "deploy", "-k", "ph"], [sys.executable, PROBE, json.dumps(probe_args)],
                 pass_fds=(extra_w,))
        os.close(extra_r)
        os.close(extra_w)
        try:
            out = json.loads(r.stdout)
        except ValueError:
            out = None
        check(r.returncode == 0 and out is not None, "the probe ran in the sandbox", r)
        out = out or {}
        reached = drain()
        e = out.get("env", {})
        env_text = json.dumps(e)
        ph = e.get("DEPLOY_KEY", "")
        ca = e.get("SSL_CERT_FILE", "")
        check(ph and e.get("PH_KEY") and ph != secret, "placeholders in DEPLOY_KEY and PH_KEY")
        check(secret not in env_text and secret_ph not in env_text,
              "no secret anywhere in the command's environment")
        proxy_ok = all(e.get(v, "").startswith("http://127.0.0.1:") for v in
                       ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                        "all_proxy"))
        check(proxy_ok and e.get("NO_PROXY") == "" and e.get("no_proxy") == "" and
              e.get("NODE_USE_ENV_PROXY") == "1", "proxy variables point at the listener")
        check(ca.startswith(xdg) and all(e.get(v) == ca for v in (
            "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",
            "DENO_CERT", "CARGO_HTTP_CAINFO", "PIP_CERT")), "CA variables name the bundle")
        check("VAULT_PASSPHRASE_FILE" not in e and e.get("VAULT_HOME") == vh,
              "passphrase file variable removed, the rest inherited")
        check(out.get("fds") == ["0", "1", "2", "3"], "only descriptors 0-2 are inherited",
              out.get("fds"))
        st = out.get("status", {})
        check(all(st.get(k) == "0000000000000000" for k in
                  ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")),
              "no capabilities: effective, permitted, inheritable, bounding, ambient", st)
        check(st.get("NoNewPrivs") == "1" and st.get("Seccomp") == "2",
              "no_new_privs and a seccomp filter", st)
        check(out.get("uid") == os.getuid() and out.get("gid") == os.getgid(),
              "uid and gid mapped to themselves")
        check(out.get("ifaces") == ["lo"], "the only network interface is lo", out.get("ifaces"))
        check(out.get("tcp4") == "ECONNREFUSED", "TCP to a host 127.0.0.1 listener fails",
              out.get("tcp4"))
        if tcp6 is not None:
            check(out.get("tcp6") in ("ECONNREFUSED", "ENETUNREACH", "EADDRNOTAVAIL"),
                  "TCP to a host ::1 listener fails", out.get("tcp6"))
        check(out.get("upstream") == "ECONNREFUSED",
              "the upstream's port is unreachable without the proxy")
        check(reached == [], "nothing reached the host's TCP, UDP or unix listeners", reached)
        check(out.get("udp") == "ok" and "udp" not in reached,
              "UDP datagrams to a host listener never arrive")
        check(out.get("abstract") == "ECONNREFUSED", "a host abstract unix socket is unreachable",
              out.get("abstract"))
        check(out.get("control") == "ENOENT", "the control socket is hidden", out.get("control"))
        check(out.get("ssh_agent") not in ("ok", None) and out.get("dbus") not in ("ok", None),
              "the ssh agent and D-Bus session sockets are masked",
              (out.get("ssh_agent"), out.get("dbus")))
        rd = out.get("read", {})
        cont = out.get("content", {})
        check(rd.get(vh + "/vault.db") == "ENOENT", "the vault file is hidden",
              rd.get(vh + "/vault.db"))
        check(out.get("listdir", {}).get(vh) == [], "the vault directory looks empty",
              out.get("listdir"))
        check(rd.get(home + "/.ssh/id_ed25519") == "ENOENT" and
              rd.get(home + "/.aws/credentials") == "ENOENT" and
              out.get("listdir", {}).get(home + "/.ssh") == [],
              "profile paths (~/.ssh, ~/.aws) are hidden")
        check(all(rd.get(c) == "ENOENT" for c in creds),
              "profile paths ~/.gnupg, ~/.config/gcloud, ~/.kube are hidden",
              dict((c, rd.get(c)) for c in creds))
        ux = out.get("unix", {})
        check(all(ux.get(d) not in ("ok", None) for d in daemons),
              "docker, podman and containerd sockets in $XDG_RUNTIME_DIR are masked",
              dict((d, ux.get(d)) for d in daemons))
        for path in sorted(run_socks):
            check(ux.get(path) not in ("ok", None),
                  "%s is unreachable although XDG_RUNTIME_DIR is %s" % (path, xdg), ux.get(path))
        check(cont.get(pass_file, "x") == "", "the passphrase file reads as empty (/dev/null)",
              (rd.get(pass_file), cont.get(pass_file)))
        check(cont.get(home + "/visible.txt") == "visible", "other files stay visible")
        check(rd.get(shm) == "ENOENT" and out.get("listdir", {}).get("/dev/shm") == [],
              "the host's /dev/shm is not shared")
        wr = out.get("write", {})
        check(wr.get(home + "/.ssh/new") == "EROFS" and wr.get(vh + "/new") == "EROFS",
              "masks are read-only", wr)
        for pid, what in ((vproxy_pid, "vproxy"), (os.getpid(), "a host process")):
            check(out.get("pid_%d_mem" % pid) not in ("ok", None) and
                  out.get("pid_%d_environ" % pid) not in ("ok", None),
                  "/proc/%s/mem and environ of %s are unreadable" % (pid, what),
                  (out.get("pid_%d_mem" % pid), out.get("pid_%d_environ" % pid)))
            check(out.get("pid_%d_kill0" % pid) == "ESRCH", "%s cannot be signalled" % what,
                  out.get("pid_%d_kill0" % pid))
        pids = out.get("proc_pids", [])
        check(1 in pids and len(pids) <= 4, "/proc shows only the sandbox's processes", pids)
        abi = landlock_abi()
        if abi >= 6:
            check(out.get("kill0_init") == "EPERM",
                  "Landlock ABI %d: the sandbox's init cannot be signalled" % abi,
                  out.get("kill0_init"))
        else:
            print("# Landlock ABI %d: signal scoping not available, kill(1, 0) gave %s"
                  % (abi, out.get("kill0_init")))
        init = (out.get("init_fd"), out.get("init_fd_open"), out.get("init_mem"))
        check(init == ("EACCES", "EACCES", "EACCES"),
              "the sandbox's init (pid 1) is closed: its descriptors and memory", init)
        check(out.get("fork") == "ok", "ordinary fork and exec still work")
        check(out.get("unshare_cmd") not in ("ok", None), "`unshare -U` fails inside")
        if x86:
            for k in ("keyctl", "add_key", "request_key"):
                check(out.get(k) == "EPERM", "%s is denied" % k, out.get(k))
            check(out.get("unshare_newuser") == "EPERM", "unshare(CLONE_NEWUSER) is denied")
            check(out.get("clone_newuser") == "EPERM", "clone(CLONE_NEWUSER) is denied")
            check(out.get("clone3") == "ENOSYS", "clone3 answers ENOSYS (libc falls back)",
                  out.get("clone3"))
            check(out.get("ptrace_traceme") == "EPERM", "ptrace is denied")
            check(out.get("mount_tmpfs") == "EPERM" and out.get("umount_mask") == "EPERM",
                  "mount and umount are denied", (out.get("mount_tmpfs"), out.get("umount_mask")))
            check(out.get("io_uring_setup") == "EPERM" and out.get("userfaultfd") == "EPERM",
                  "io_uring and userfaultfd are denied")
        else:
            print("# skip: the raw seccomp probes (keyctl, unshare, clone, clone3, ptrace, mount, "
                  "io_uring, userfaultfd) use x86_64 system call numbers; this is %s"
                  % platform.machine(), flush=True)
        show = 'cat "$SSL_CERT_FILE"; echo "LS $(ls "${SSL_CERT_FILE%/*}") ${SSL_CERT_FILE##*/}"'
        r = vrun(["-k", "deploy"], ["sh", "-c", show])
        last = r.stdout.rstrip().rsplit(b"\n", 1)[-1].split()
        check(r.returncode == 0 and r.stdout.startswith(b"-----BEGIN CERTIFICATE-----") and
              len(last) == 3 and last[1] == last[2],
              "the CA bundle is readable and alone in the hidden runtime directory", last)
        check(not os.path.exists(ca), "the CA bundle is deleted when the session ends")
        r = vrun(["-k", "deploy"], ["sh", "-c", "pwd; ls -A; cat id_ed25519"], cwd=home + "/.ssh")
        check(r.returncode != 0 and r.stdout.strip() == (home + "/.ssh").encode() and
              b"PRIVATE" not in r.stdout,
              "started inside a hidden directory, the command sees the mask there", r)

        # -v counts the paths the sandbox masks, not the ones listed.
        counted = tmp + "/counted"
        with open(counted, "w") as f:
            f.write("hide ~/.ssh\nhide ~/no-such-dir\nhide /no-such-path-%d\n" % os.getpid())
        os.chmod(counted, 0o644)
        exist = [p for p in (vh, os.path.dirname(control), xdg + "/vrun", pass_file,
                             home + "/.ssh", "/run/user/%d/vrun" % os.getuid())
                 if os.path.exists(p)]
        r = vrun(["-v", "-k", "deploy", "--profile", counted], ["true"])
        want = b"%d path%s hidden (profile counted)" % (len(exist),
                                                         b"" if len(exist) == 1 else b"s")
        check(r.returncode == 0 and want in r.stderr,
              "-v counts only the paths actually masked (%d)" % len(exist), r.stderr)

        # ---- the terminal ----
        tiocsti = ("import fcntl, termios, errno, os, ctypes\n"
                   "def t(req, arg):\n"
                   "    try:\n"
                   "        fcntl.ioctl(0, req, arg); return 'ok'\n"
                   "    except OSError as e: return errno.errorcode[e.errno]\n"
                   "libc = ctypes.CDLL(None, use_errno=True)\n"
                   "c = ctypes.c_char(b'y')\n"
                   "r = libc.syscall(16, 0, ctypes.c_ulong(termios.TIOCSTI | (1 << 32)),"
                   " ctypes.byref(c)) if os.uname().machine == 'x86_64' else -2\n"
                   "hi = 'ok' if r == 0 else ('n/a' if r == -2 else "
                   "errno.errorcode[ctypes.get_errno()])\n"
                   "print('RESULT', t(termios.TIOCSTI, b'x'), hi, t(0x541C, b'\\x06'),"
                   " os.tcgetpgrp(0) == os.getpgrp(), flush=True)\n")
        legacy = read_int("/proc/sys/dev/tty/legacy_tiocsti", 1)
        t = Pty([sys.executable, "-c", tiocsti], env)
        t.read_until(b"RESULT")
        t.finish()
        control_res = t.out.split(b"RESULT", 1)[-1].split()
        if legacy == 1:
            check(control_res[:1] == [b"ok"], "control: TIOCSTI works outside the sandbox",
                  t.out)
        t = Pty([vrun_bin, "-k", "deploy", "--", sys.executable, "-c", tiocsti], env)
        t.read_until(b"RESULT")
        rc = t.finish()
        res = t.out.split(b"RESULT", 1)[-1].split()
        check(rc == 0 and res[:3] == [b"EPERM", b"EPERM", b"EPERM"],
              "TIOCSTI (also with high bits set) and TIOCLINUX are denied", t.out)
        check(res[3:4] == [b"True"], "the command is the terminal's foreground job", t.out)
        t = Pty(["sh", "-c", '"$0" -k deploy -- true; python3 -c "import os; print(\'FG\', '
                 'os.tcgetpgrp(0) == os.getpgrp())"', vrun_bin], env)
        t.read_until(b"FG ")
        t.finish()
        check(b"FG True" in t.out, "vrun gives the terminal back afterwards", t.out)
        t = Pty([vrun_bin, "-k", "deploy", "--", "sh", "-c", "echo READY; exec sleep 20"], env)
        ready = t.read_until(b"READY")
        os.write(t.master, b"\x03")
        rc = t.finish()
        check(ready and rc == 130, "Ctrl-C interrupts the command: exit 130", (rc, t.out))
        # One process: a shell could be caught in vfork() by the stop, which no
        # job control can see (the same without vrun).
        t = Pty([vrun_bin, "-k", "deploy", "--", sys.executable, "-c",
                 "import sys, time\nprint('READY', flush=True)\ntime.sleep(1)\n"
                 "print('DONE', flush=True)\nsys.exit(4)"], env)
        ready = t.read_until(b"READY")
        os.write(t.master, b"\x1a")
        stopped = wait_until(lambda: proc_state(t.p.pid) == "T", 5)
        time.sleep(1.2)  # the command is stopped: no DONE meanwhile
        t.read_until(b"DONE", timeout=0.1)
        early = b"DONE" in t.out
        os.kill(t.p.pid, signal.SIGCONT)
        done = t.read_until(b"DONE")
        rc = t.finish()
        check(ready and stopped and not early and done and rc == 4,
              "Ctrl-Z stops the command and vrun; SIGCONT resumes both",
              (ready, stopped, early, done, rc, t.out))

        # Started in the background of an interactive shell: a read from the
        # terminal stops it (and vrun, so the shell reports the job stopped);
        # fg gives it the terminal.
        if shutil.which("bash"):
            t = Pty(["bash", "--norc", "--noprofile", "-i"],
                    dict(env, PS1="$ ", HISTFILE="/dev/null"))
            os.write(t.master,
                     b"%s -k deploy -- sh -c 'read x; echo GOT-$x' &\n" % vrun_bin.encode())
            stopped = False
            for _ in range(50):
                os.write(t.master, b"jobs\n")
                if t.read_until(b"Stopped", timeout=0.2):
                    stopped = True
                    break
            os.write(t.master, b"fg\n")
            time.sleep(0.5)
            os.write(t.master, b"hello\n")
            got = t.read_until(b"GOT-hello")
            os.write(t.master, b"echo RC=$?\n")
            rc_ok = t.read_until(b"RC=0")
            os.write(t.master, b"exit\n")
            t.finish()
            check(stopped and got and rc_ok,
                  "job control: stopped on a background read, resumed in the foreground by fg",
                  t.out[-600:])

            # A pipeline is one job: the terminal stays with it, since its other
            # commands may read it. python3 reads /dev/tty once the command runs.
            reader = ("import sys; sys.stdin.readline(); print('READ' + 'ING', flush=True); "
                      "print('TTY-' + open('/dev/tty').readline().strip(), flush=True)")
            def type_hello(line, ready, answer):
                """In an interactive bash: run line, wait for ready, type hello, wait for
                answer, then the line's status. True when all came and nothing stopped."""
                t = Pty(["bash", "--norc", "--noprofile", "-i"],
                        dict(env, PS1="$ ", HISTFILE="/dev/null"))
                os.write(t.master, line + b"\n")
                seen = t.read_until(ready)
                time.sleep(0.3)
                os.write(t.master, b"hello\n")
                got = t.read_until(answer)
                os.write(t.master, b"echo RC=$?\n")
                rc_ok = t.read_until(b"RC=0")
                os.write(t.master, b"exit\n")
                t.finish()
                return bool(seen and got and rc_ok and b"Stopped" not in t.out), t.out[-600:]

            ok_, out = type_hello(b"%s -k deploy -- sh -c 'echo READY; sleep 1' | %s -c \"%s\""
                                  % (vrun_bin.encode(), sys.executable.encode(),
                                     reader.encode()), b"READING", b"TTY-hello")
            check(ok_, "in a pipeline, another command of the job keeps reading the terminal",
                  out)

            # A script without job control that starts vrun with '&' goes on and
            # reads the terminal: vrun must not take it (its stdin is /dev/null).
            script, started = tmp + "/bg.sh", tmp + "/bg-started"
            with open(script, "w") as f:
                f.write('"$1" -k deploy -- sh -c \'touch "$0"; sleep 2\' "$2" &\n'
                        'while [ ! -e "$2" ]; do sleep 0.05; done\n'
                        'echo "WAIT""ING"\nread x\necho "GOT-$x"\nwait\n')
            ok_, out = type_hello(b"sh %s %s %s" % (script.encode(), vrun_bin.encode(),
                                                    started.encode()), b"WAITING", b"GOT-hello")
            check(ok_, "started with & in a script, vrun leaves the terminal to the script", out)
        else:
            print("# skip: no bash: the job control, pipeline and script terminal checks",
                  flush=True)

        # Run from a script in the foreground, the command still gets the terminal.
        fg = "import os; print('FG', os.tcgetpgrp(0) == os.getpgrp(), flush=True)"
        t = Pty(["sh", "-c", '"$0" -k deploy -- "$1" -c "$2"; echo "R""C=$?"', vrun_bin,
                 sys.executable, fg], env)
        t.read_until(b"RC=")
        t.finish()
        check(b"FG True" in t.out and b"RC=0" in t.out,
              "run by a script in the foreground, the command gets the terminal", t.out)

        # ---- exit statuses ----
        r = vrun(["-k", "deploy"], ["sh", "-c", "exit 3"])
        check(r.returncode == 3, "exit 3 -> 3", r.returncode)
        r = vrun(["-k", "deploy"], ["sh", "-c", "kill -TERM $$"])
        check(r.returncode == 143, "killed by SIGTERM -> 143", r.returncode)
        r = vrun(["-k", "deploy"], ["sh", "-c", "kill -KILL $$"])
        check(r.returncode == 137, "killed by SIGKILL -> 137", r.returncode)
        r = vrun(["-k", "deploy"], ["no-such-command-%d" % os.getpid()])
        check(r.returncode == 127 and b"command not found" in r.stderr, "not found -> 127",
              r.stderr)
        noexec = tmp + "/noexec.sh"
        with open(noexec, "w") as f:
            f.write("#!/bin/sh\necho never\n")
        os.chmod(noexec, 0o644)
        r = vrun(["-k", "deploy"], [noexec])
        check(r.returncode == 126 and b"cannot be executed" in r.stderr and b"never" not in
              r.stdout, "not executable -> 126", r)
        r = vrun(["-k", "deploy"], [tmp])
        check(r.returncode == 126, "a directory -> 126", r.returncode)

        # ---- fail closed: nothing runs ----
        marker = tmp + "/marker"
        touch = ["touch", marker]
        r = vrun(["-k", "nope"], touch)
        check(r.returncode == 125 and b"no such key" in r.stderr and not os.path.exists(marker),
              "unknown key -> 125, the command did not run", r.stderr)
        r = vrun(["-k", "amb"], touch)
        check(r.returncode == 125 and b"ambiguous" in r.stderr and not os.path.exists(marker),
              "ambiguous key -> 125, the command did not run", r.stderr)
        r = vrun(["-k", "deploy", "--profile", tmp + "/no-such-profile"], touch)
        check(r.returncode == 125 and not os.path.exists(marker),
              "unusable profile -> 125, the command did not run", r.stderr)
        r = vrun([], touch)
        check(r.returncode == 125 and b"--key" in r.stderr and not os.path.exists(marker),
              "no --key -> usage error 125")
        r = subprocess.run([vrun_bin, "help"], env=env, capture_output=True, timeout=30)
        h = subprocess.run([vrun_bin, "--help"], env=env, capture_output=True, timeout=30)
        check(r.returncode == 0 and r.stdout.startswith(b"usage: vrun --key NAME") and
              r.stdout == h.stdout and r.stderr == b"",
              "`vrun help` is `vrun --help`, as for vault and vproxy", r)
        e2 = dict(env, VAULT_HOME=tmp + "/elsewhere")
        r = vrun(["-k", "deploy"], touch, e=e2)
        check(r.returncode == 125 and b"vproxy is not running: start it with `vproxy start`" in
              r.stderr and not os.path.exists(marker),
              "vproxy down -> 125, the command did not run", r.stderr)
        # A user namespace whose limit for nested ones is 0: the host's sysctl is untouched.
        r = subprocess.run(["unshare", "-Ur", "sh", "-c",
                            'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', "sh",
                            vrun_bin, "-k", "deploy", "--"] + touch, env=env,
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        check(r.returncode == 125 and b"user namespaces are not available" in r.stderr and
              b"sysctl" in r.stderr and not os.path.exists(marker),
              "no user namespaces -> 125 with how to enable them, the command did not run",
              r.stderr)
        # Part of /proc covered by another mount, as container runtimes do (Docker
        # masks /proc/kcore, /proc/sys...): the kernel refuses the sandbox a /proc of
        # its own. In a namespace of the test's own; the host's /proc is untouched.
        r = subprocess.run(["unshare", "-Urm", "sh", "-c",
                            'mount -t tmpfs tmpfs /proc/sys && exec "$@"', "sh",
                            vrun_bin, "-k", "deploy", "--"] + touch, env=env,
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        check(r.returncode == 125 and b"mount /proc: Operation not permitted" in r.stderr and
              b"systempaths=unconfined" in r.stderr and b"unmask=ALL" in r.stderr and
              not os.path.exists(marker),
              "no /proc of its own (as in a container) -> 125 with what to do, the command did "
              "not run", r.stderr)
        os.makedirs(home + "/.ssh/sub", exist_ok=True)
        r = vrun(["-k", "deploy"], touch, cwd=home + "/.ssh/sub")
        check(r.returncode == 125 and b"is hidden in the sandbox" in r.stderr and
              b"cd to a directory the profile does not hide" in r.stderr and
              not os.path.exists(marker),
              "a working directory under a mask -> 125 with what to do, the command did not run",
              r.stderr)
        check(sessions() == 0, "no session left open by the failures")

        # ---- signals and lifetime ----
        p = subprocess.Popen([vrun_bin, "-k", "deploy", "--", "sh", "-c",
                              'trap "exit 7" TERM; echo READY; while :; do sleep 0.05; done'],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        ready = p.stdout.readline() == b"READY\n"
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=20)
        check(ready and rc == 7, "SIGTERM to vrun reaches the command (its trap exits 7)", rc)
        p = subprocess.Popen([vrun_bin, "-k", "deploy", "--", sys.executable, "-c",
                              "import signal, sys, time\n"
                              "signal.signal(signal.SIGINT, lambda *a: sys.exit(9))\n"
                              "print('READY', flush=True)\n"
                              "for _ in range(400): time.sleep(0.05)"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        ready = p.stdout.readline() == b"READY\n"
        # Python runs its handler between bytecodes: a signal that lands just
        # before a long sleep() starts would wait for the sleep to end, hence
        # short sleeps.
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=20)
        check(ready and rc == 9, "SIGINT to vrun reaches the command (its handler exits 9)", rc)
        for sig, code in ((signal.SIGHUP, 11), (signal.SIGQUIT, 12), (signal.SIGWINCH, 13)):
            p = subprocess.Popen([vrun_bin, "-k", "deploy", "--", sys.executable, "-c",
                                  "import signal, sys, time\n"
                                  "signal.signal(%d, lambda *a: sys.exit(%d))\n"
                                  "print('READY', flush=True)\n"
                                  "for _ in range(400): time.sleep(0.05)" % (sig, code)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL)
            ready = p.stdout.readline() == b"READY\n"
            p.send_signal(sig)
            rc = p.wait(timeout=20)
            check(ready and rc == code, "%s to vrun reaches the command (its handler exits %d)"
                  % (signal.Signals(sig).name, code), rc)
        sleeper = ["sleep", "987.%d" % (os.getpid() % 1000)]
        p = subprocess.Popen([vrun_bin, "-k", "deploy", "--", "sh", "-c",
                              'echo "$SSL_CERT_FILE"; echo READY; exec "$@"', "sh"] + sleeper,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        bundle = p.stdout.readline().decode().strip()
        ready = p.stdout.readline() == b"READY\n"
        running = wait_until(lambda: bool(proc_with_cmdline(sleeper)))
        bundle_there = bundle.startswith(xdg) and os.path.isfile(bundle)
        p.kill()
        p.wait()
        check(ready and running and wait_until(lambda: not proc_with_cmdline(sleeper)),
              "killing vrun (SIGKILL) kills the command")
        check(wait_until(lambda: sessions() == 0), "and vproxy ends the session")
        check(bundle_there and wait_until(lambda: not os.path.exists(bundle)),
              "and deletes the session's CA bundle", (bundle, bundle_there))
        bg = ["sleep", "555.%d" % (os.getpid() % 1000)]
        r = vrun(["-k", "deploy"], ["sh", "-c", '"$@" & exit 0', "sh"] + bg)
        check(r.returncode == 0 and wait_until(lambda: not proc_with_cmdline(bg), 3),
              "background processes die with the command")

        if not root:
            # Invariant 5 from outside: same uid, yet vproxy's memory is closed.
            res = []
            for f in ("mem", "environ"):
                try:
                    with open("/proc/%d/%s" % (vproxy_pid, f), "rb") as fh:
                        fh.read(1)
                    res.append("ok")
                except OSError as ex:
                    res.append(errno.errorcode[ex.errno])
            check(res == ["EACCES", "EACCES"],
                  "outside the sandbox too, vproxy's /proc mem and environ are unreadable", res)
    finally:
        for s in listeners:
            s.close()
        remove_made(run_made)
        subprocess.run([vproxy_bin, "stop"], env=env, capture_output=True, timeout=30)
        if up is not None:
            up.kill()
            up.wait()
        try:
            os.unlink(shm)
        except OSError:
            pass
        shutil.rmtree(tmp, ignore_errors=True)
    print("# %s: %d failure(s)" % ("runner", len(failures)))
    return 1 if failures else 0


def read_int(path, default):
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return default


def landlock_abi():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    return max(r, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
