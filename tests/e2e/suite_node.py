"""Node.js inside `vrun`, every major version this machine has (one node per
major). Two suites, so that ctest shows what did not run:

- node: every major found. A node that ignores the proxy variables (before
  22.21 / 24.5) connects directly and fails closed, nothing sent; a client
  that tunnels through $HTTPS_PROXY by hand works on any node.
- node_env_proxy: the majors that honour NODE_USE_ENV_PROXY (set by vrun):
  https.get and fetch work unchanged, and fail closed with the variable
  removed. When no such node is found the suite exits 77 (ctest: Skipped).

Where nodes are looked for: $VRUN_E2E_NODE first (it wins its major), then
node and nodejs on PATH, /usr/bin/nodejs, /usr/local/bin/node,
/opt/node/bin/node, ~/.nvm/versions/node/*."""
import os
import re
import shutil
import select
import socket
import subprocess
import time

from harness import API, CLIENTS, GUARDED
from suite_clients import Run, client, last_auth


class Node:
    def __init__(self, path, version):
        self.path, self.version = path, version
        self.major = version[0]
        self.env_proxy = False
        self.name = "node %s (%s)" % (".".join(map(str, version)), path)


def node_version(node):
    try:
        r = subprocess.run([node, "--version"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(rb"v(\d+)\.(\d+)\.(\d+)", r.stdout)
    return tuple(int(x) for x in m.groups()) if m else None


def env_proxy_works(node):
    """Does this node send https.get through $HTTPS_PROXY when
    NODE_USE_ENV_PROXY=1? Asked of node itself, outside any sandbox, with a
    listener of ours as the proxy (nothing is sent anywhere else)."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    proxy = "http://127.0.0.1:%d" % lst.getsockname()[1]
    env = {"PATH": os.environ.get("PATH", ""), "NODE_USE_ENV_PROXY": "1",
           "HTTPS_PROXY": proxy, "https_proxy": proxy}
    # Exits on the first error: our listener closing the tunnel, or a direct
    # connection failing.
    # The name must never reach the system resolver: a direct attempt (the
    # usual case, a node that ignores the variable) fails in our own lookup;
    # the proxy is a numeric address, which needs none.
    js = ("const nodns = (h, o, cb) => cb(Object.assign(new Error('no dns'), "
          "{code: 'ENOTFOUND'}));"
          "const r = require('https').get('https://%s:443/', {lookup: nodns}, () => {});"
          "r.on('error', () => process.exit(0)); setTimeout(() => process.exit(0), 5000);" % API)
    got = b""
    try:
        p = subprocess.Popen([node, "-e", js], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        lst.close()
        return False
    end = time.monotonic() + 15
    while time.monotonic() < end:
        done = p.poll() is not None
        if select.select([lst], [], [], 0 if done else 0.1)[0]:
            c, _ = lst.accept()
            c.settimeout(5)
            try:
                got = c.recv(200)
            except OSError:
                pass
            c.close()
            break
        if done:
            break
    lst.close()
    if p.poll() is None:
        p.kill()
    p.wait()
    return got.startswith(b"CONNECT ")


def find_nodes():
    """(nodes, notes): one Node per major version, in major order, and what
    was passed over (printed, so that it is plain which node was tested)."""
    nvm = os.path.expanduser("~/.nvm/versions/node")
    cands = [os.environ.get("VRUN_E2E_NODE"), shutil.which("node"), shutil.which("nodejs"),
             "/usr/bin/nodejs", "/usr/local/bin/node", "/opt/node/bin/node"]
    if os.path.isdir(nvm):
        cands += [os.path.join(nvm, v, "bin", "node") for v in sorted(os.listdir(nvm))]
    notes, seen, by_major = [], set(), {}
    if os.environ.get("VRUN_E2E_NODE") and not os.access(os.environ["VRUN_E2E_NODE"], os.X_OK):
        notes.append("VRUN_E2E_NODE=%s is not executable here" % os.environ["VRUN_E2E_NODE"])
    for p in cands:
        if not p or not os.path.isfile(p) or not os.access(p, os.X_OK):
            continue
        rp = os.path.realpath(p)
        if rp in seen:
            continue
        seen.add(rp)
        ver = node_version(p)
        if ver is None:
            notes.append("%s: no version (not a node?)" % p)
            continue
        if ver[0] in by_major:
            notes.append("%s (v%s) passed over: major %d is tested with %s" % (
                p, ".".join(map(str, ver)), ver[0], by_major[ver[0]].path))
            continue
        by_major[ver[0]] = Node(p, ver)
    nodes = [by_major[m] for m in sorted(by_major)]
    for n in nodes:
        n.env_proxy = env_proxy_works(n.path)
    return nodes, notes


def describe(nodes):
    return ", ".join("%d (v%s %s, NODE_USE_ENV_PROXY %s)" % (
        n.major, ".".join(map(str, n.version)), n.path,
        "honoured" if n.env_proxy else "not supported") for n in nodes) or "none"


def fails_closed(h, argv, what):
    """ARGV (a node client) connects directly: after the guard, it fails
    and nothing reaches nginx (checked once nginx's log has settled)."""
    run = Run(h, ["api-bearer"], argv, shell=GUARDED)
    run.log = h.settled_log_since(run.mark)
    # node_client.js prints "ERROR code message", exit 1: the lookup failed
    # (no resolver is reachable), not a crash or a timeout.
    h.check(run.rc == 1 and not run.log and
            re.match(rb"ERROR (EAI_AGAIN|ENOTFOUND) ", run.stdout) is not None and
            run.ph.get("api-bearer", "").startswith("vrunph_"),
            what + ": fails closed, nothing reached the upstream (%s)"
            % run.stdout.decode(errors="replace").strip()[:80], run.detail())
    h.check(not run.leaks, what + ": its output never holds the key", run.leaks)


def run_plain(h, nodes, notes):
    """Every major: the proxy variables alone (fails closed where ignored),
    and the hand-made tunnel (works on any node)."""
    for text in notes:
        h.check.note("node: " + text)
    if not nodes:
        h.check(False, "node is installed (./setup installs Debian's nodejs)")
        return
    h.check.note("node majors tested: " + describe(nodes))
    api = "https://" + h.hp(API)
    js = os.path.join(CLIENTS, "node_client.js")
    for n in nodes:
        if not n.env_proxy:
            # No proxy support: node resolves and connects directly. There is
            # no DNS and no route in the sandbox, so it fails; nothing is sent.
            for mode in ("https", "fetch"):
                what = "%s %s ignores the proxy variables" % (
                    n.name, "https.get" if mode == "https" else "fetch")
                fails_closed(h, [n.path, js, mode, api + "/echo/node-" + mode], what)
        client(h, "%s, CONNECT through $HTTPS_PROXY by hand (works on any Node)" % n.name,
               ["api-bearer", "api-key"],
               [n.path, js, "tunnel", api + "/hdr", "X-Api-Key=API_KEY"],
               lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"] and
               log[-1].get("x_api_key") == s["api-key"],
               lambda run: run.stdout.startswith(b"STATUS 200") and
               ("x-api-key=" + run.ph["api-key"]).encode() in run.stdout)


def run_env_proxy(h, nodes, notes):
    """The majors that honour NODE_USE_ENV_PROXY: unchanged clients work, and
    fail closed once the variable is removed."""
    for text in notes:
        h.check.note("node: " + text)
    todo = [n for n in nodes if n.env_proxy]
    h.check.note("node majors tested with NODE_USE_ENV_PROXY: " + describe(todo))
    api = "https://" + h.hp(API)
    js = os.path.join(CLIENTS, "node_client.js")
    for n in todo:
        for mode in ("https", "fetch"):
            what = "%s %s" % (n.name, "https.get" if mode == "https" else "fetch")
            client(h, what + " with NODE_USE_ENV_PROXY=1 (set by vrun)", ["api-bearer"],
                   [n.path, js, mode, api + "/echo/node-" + mode],
                   lambda log, s: last_auth(log) == "Bearer " + s["api-bearer"],
                   lambda run: run.stdout.startswith(b"STATUS 200"))
            fails_closed(h, ["env", "-u", "NODE_USE_ENV_PROXY", n.path, js, mode, api + "/x"],
                         what + " without NODE_USE_ENV_PROXY")
