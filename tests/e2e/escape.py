#!/usr/bin/env python3
"""One escape attempt, run inside `vrun` (and outside it, as the control).
Prints "RESULT <what it got>": "ok ..." when the attempt worked, else the
errno name or what came back. It never decides pass or fail: the suite does.

usage: escape.py ATTEMPT ARGS...
  tcp HOST PORT SNI MARK    connect; if connected, TLS to SNI and GET /hdr?escape=MARK
  udp HOST PORT MARK        three datagrams holding MARK, then wait for any reply
  dns HOST PORT NAME        an A query for NAME; "answer ADDR" or "timeout"
  resolvconf                every nameserver of /etc/resolv.conf: loopback ones get
                            a real query; others only a UDP connect(), which sends
                            nothing but needs a route
  net                       interfaces, routes, TCP listeners, network namespace
  unix PATH | abstract NAME connect to a unix socket
  read PATH | ls PATH       read a file / list a directory
  ptrace PID | ptrace-child PTRACE_SEIZE of PID / of a child of our own
  vmread PID                process_vm_readv from PID
  kill PID SIGNAL           send a signal
  keyctl DESC               find the "user" key DESC in the keyrings and read it
  tiocsti TEXT              push TEXT into the terminal's input on fd 0
  connect-relay HOST:PORT   CONNECT through the session proxy ($HTTPS_PROXY)
  absolute-relay URL        GET URL in absolute form through the session proxy
  hold                      print the session's view, then wait for stdin to close
  peer PORT                 the session's view (net) plus "peer": a TCP connect to
                            127.0.0.1:PORT ("ok connected" or the errno)
  guard                     exit 3 unless the only interface is lo, there is no route
                            and no nameserver outside loopback is routable: run
                            before a client that would resolve names, so that no
                            packet can leave even when the sandbox is broken
"""
import ctypes
import errno
import fcntl
import json
import os
import platform
import socket
import ssl
import struct
import subprocess
import sys
import termios
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ptrace.restype = ctypes.c_long
SYSCALLS = {"x86_64": {"keyctl": 250, "request_key": 249},
            "aarch64": {"keyctl": 219, "request_key": 218}}
PTRACE_SEIZE = 0x4206
KEYCTL_SEARCH, KEYCTL_READ = 10, 11
KEY_SPEC_SESSION_KEYRING = -3


def result(value):
    print("RESULT " + str(value), flush=True)


def ename(e):
    return errno.errorcode.get(e, str(e))


def oserr(e):
    return ename(e.errno) if e.errno else "%s: %s" % (type(e).__name__, e)


def proxy_addr():
    p = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") or ""
    hostport = p.split("://", 1)[-1].rstrip("/")
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


def dns_query(name, qid=0x4242):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", 1, 1)


def dns(host, port, name, timeout=2.0):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(dns_query(name), (host, port))
        data = s.recv(2048)
        if len(data) >= 16:
            return "answer " + socket.inet_ntoa(data[-4:])
        return "short answer %r" % data
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return oserr(e)
    finally:
        s.close()


def tcp(host, port, sni, mark):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port))
    except OSError as e:
        s.close()
        return oserr(e)
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        t = ctx.wrap_socket(s, server_hostname=sni)
        t.sendall(b"GET /hdr?escape=%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                  % (mark.encode(), sni.encode()))
        line = t.recv(100).split(b"\r\n", 1)[0].decode(errors="replace")
        t.close()
        return "ok connected: " + line
    except OSError as e:
        return "ok connected, then " + oserr(e)


def udp(host, port, mark):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(1)
    sent, errs = 0, []
    for _ in range(3):
        try:
            s.sendto(b"vrun-e2e-udp " + mark.encode(), (host, port))
            sent += 1
        except OSError as e:
            errs.append(oserr(e))
        time.sleep(0.05)
    try:
        s.recv(100)
        reply = "reply"
    except socket.timeout:
        reply = "no reply"
    except OSError as e:
        reply = oserr(e)
    s.close()
    return "sent %d (%s), %s" % (sent, ",".join(errs) or "no error", reply)


def resolvconf():
    out = {}
    try:
        with open("/etc/resolv.conf") as f:
            servers = [ln.split()[1] for ln in f if ln.split()[:1] == ["nameserver"]
                       and len(ln.split()) > 1]
    except OSError as e:
        return {"error": oserr(e)}
    for ns in servers:
        addr = ns.split("%")[0]
        loopback = addr.startswith("127.") or addr == "::1"
        if loopback:
            out[ns] = "query: " + dns(addr, 53, "api.e2e.test")
            continue
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_DGRAM)
        try:
            s.connect((addr, 53))  # a route lookup only: no packet leaves
            out[ns] = "route: ok"
        except OSError as e:
            out[ns] = "route: " + oserr(e)
        finally:
            s.close()
    return out


def listeners():
    found = []
    for f, fam in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        try:
            with open(f) as fh:
                lines = fh.readlines()[1:]
        except OSError:
            continue
        for ln in lines:
            parts = ln.split()
            if parts[3] == "0A":  # TCP_LISTEN
                found.append("%d:%d" % (fam, int(parts[1].split(":")[1], 16)))
    return sorted(found)


def net():
    with open("/proc/net/dev") as f:
        ifaces = sorted(ln.split(":")[0].strip() for ln in f.readlines()[2:])
    with open("/proc/net/route") as f:
        routes = [ln.split()[:3] for ln in f.readlines()[1:]]
    try:
        with open("/proc/net/ipv6_route") as f:
            routes6 = [ln.split()[-1] + " " + ln.split()[0] for ln in f
                       if ln.split()[-1] != "lo"]
    except OSError:
        routes6 = []
    try:
        port = proxy_addr()[1]
    except ValueError:
        port = None
    return {"ifaces": ifaces, "routes": routes, "routes6": routes6, "proxy_port": port,
            "listeners": listeners(), "netns": os.readlink("/proc/self/ns/net")}


def unix(address):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    try:
        s.connect(address)
        return "ok connected"
    except OSError as e:
        return oserr(e)
    finally:
        s.close()


def read(path):
    try:
        f = open(path, "rb")
    except OSError as e:
        return oserr(e)
    # Opening /proc/PID/mem is the permission check; a read of an unmapped
    # address (offset 0) fails afterwards with EIO all the same.
    try:
        return "ok read %d bytes" % len(f.read(64))
    except OSError as e:
        return "ok opened, read " + oserr(e)
    finally:
        f.close()


def ptrace(pid):
    # SEIZE: the same permission checks as ATTACH, but the tracee is not
    # stopped, and our exit detaches it (harmless should it ever work).
    ctypes.set_errno(0)
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) < 0:
        return ename(ctypes.get_errno())
    return "ok attached"


def ptrace_child():
    child = subprocess.Popen(["sleep", "30"])
    try:
        return ptrace(child.pid)
    finally:
        child.kill()
        child.wait()


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def vmread(pid):
    buf = ctypes.create_string_buffer(8)
    local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8)
    remote = IoVec(0x10000, 8)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    ctypes.set_errno(0)
    r = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if r >= 0:
        return "ok read %d" % r
    e = ctypes.get_errno()
    # EFAULT: allowed to read, the address is just unmapped.
    return "ok permitted (EFAULT)" if e == errno.EFAULT else ename(e)


def keyctl(desc):
    nr = SYSCALLS.get(platform.machine())
    if nr is None:
        return "n/a on " + platform.machine()
    ctypes.set_errno(0)
    r = libc.syscall(nr["request_key"], b"user", desc.encode(), None, 0)
    if r < 0:
        rk = ename(ctypes.get_errno())
        ctypes.set_errno(0)
        r = libc.syscall(nr["keyctl"], KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, b"user",
                         desc.encode(), 0)
        if r < 0:
            return "request_key %s, keyctl(SEARCH) %s" % (rk, ename(ctypes.get_errno()))
    buf = ctypes.create_string_buffer(256)
    ctypes.set_errno(0)
    n = libc.syscall(nr["keyctl"], KEYCTL_READ, r, buf, 256)
    if n < 0:
        return "found, read " + ename(ctypes.get_errno())
    return "ok read " + buf.raw[:n].decode(errors="replace")


def tiocsti(text):
    got = []
    for ch in text.encode():
        try:
            fcntl.ioctl(0, termios.TIOCSTI, bytes([ch]))
            got.append("ok")
        except OSError as e:
            got.append(oserr(e))
    return "ok pushed" if set(got) == {"ok"} else ",".join(sorted(set(got)))


def proxy_request(raw):
    try:
        s = socket.create_connection(proxy_addr(), timeout=10)
    except (OSError, ValueError) as e:
        return "proxy unreachable: %s" % e
    try:
        s.sendall(raw)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(256)
            if not chunk:
                break
            data += chunk
        return data.split(b"\r\n", 1)[0].decode(errors="replace") or "closed"
    except OSError as e:
        return oserr(e)
    finally:
        s.close()


def hold():
    host, port = proxy_addr()
    try:
        socket.create_connection((host, port), timeout=5).close()
        own = "ok"
    except OSError as e:
        own = oserr(e)
    view = net()
    view.update(own_proxy=own)
    result(json.dumps(view))
    sys.stdin.read()
    return None


def main(argv):
    what, a = argv[0], argv[1:]
    if what == "tcp":
        return tcp(a[0], int(a[1]), a[2], a[3])
    if what == "udp":
        return udp(a[0], int(a[1]), a[2])
    if what == "dns":
        return dns(a[0], int(a[1]), a[2])
    if what == "resolvconf":
        return json.dumps(resolvconf())
    if what == "net":
        return json.dumps(net())
    if what == "unix":
        return unix(a[0])
    if what == "abstract":
        return unix("\0" + a[0])
    if what == "read":
        return read(a[0])
    if what == "ls":
        try:
            return "ok " + json.dumps(sorted(os.listdir(a[0])))
        except OSError as e:
            return oserr(e)
    if what == "ptrace":
        return ptrace(int(a[0]))
    if what == "ptrace-child":
        return ptrace_child()
    if what == "vmread":
        return vmread(int(a[0]))
    if what == "kill":
        try:
            os.kill(int(a[0]), int(a[1]))
            return "ok"
        except OSError as e:
            return oserr(e)
    if what == "keyctl":
        return keyctl(a[0])
    if what == "tiocsti":
        return tiocsti(a[0])
    if what == "connect-relay":
        return proxy_request(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                             % (a[0].encode(), a[0].encode()))
    if what == "absolute-relay":
        host = a[0].split("://", 1)[1].split("/", 1)[0]
        return proxy_request(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                             % (a[0].encode(), host.encode()))
    if what == "hold":
        return hold()
    if what == "peer":
        view = net()
        try:
            socket.create_connection(("127.0.0.1", int(a[0])), timeout=5).close()
            view.update(peer="ok connected")
        except OSError as e:
            view.update(peer=oserr(e))
        return json.dumps(view)
    if what == "guard":
        n, rc = net(), resolvconf()
        bad = (n["ifaces"] != ["lo"] or n["routes"] or n["routes6"] or
               any(v == "route: ok" for v in rc.values()))
        result(json.dumps({"net": n, "resolvconf": rc, "guard": "closed" if bad else "ok"}))
        sys.exit(3 if bad else 0)
    return "usage: unknown attempt " + what


if __name__ == "__main__":
    r = main(sys.argv[1:])
    if r is not None:
        result(r)
