#!/usr/bin/env python3
"""Runs inside `vrun` (and, as a control, outside it): tries every escape
the runner test cares about and prints one JSON object saying what each
attempt got -- "ok" or the errno name. It never decides pass or fail; the
driver (runner_test.py) does.

usage: probe.py JSON-ARGS
"""
import ctypes
import errno
import json
import os
import socket
import subprocess
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# x86_64 numbers; the driver skips the syscall probes on other machines.
SYS = {"ioctl": 16, "ptrace": 101, "clone": 56, "mount": 165, "umount2": 166, "add_key": 248,
       "request_key": 249, "keyctl": 250, "unshare": 272, "io_uring_setup": 425,
       "clone3": 435, "userfaultfd": 323, "bpf": 321}
CLONE_NEWUSER = 0x10000000
SIGCHLD = 17


def ename(e):
    return errno.errorcode.get(e, str(e))


def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return ename(e.errno) if e.errno else str(e)
    except Exception as e:  # noqa: BLE001 -- report, never crash the probe
        return "error: %s" % e


def syscall(name, *args):
    """The raw syscall; "ok" when it returned >= 0, else the errno name."""
    def fn():
        ctypes.set_errno(0)
        r = libc.syscall(SYS[name], *args)
        if r == 0 and name == "clone":
            os._exit(0)  # the child of a clone that should not have happened
        if r < 0:
            raise OSError(ctypes.get_errno(), name)
        if name == "clone":
            os.waitpid(r, 0)
        elif name in ("io_uring_setup", "userfaultfd"):
            os.close(r)
    return attempt(fn)


def connect(family, addr, kind=socket.SOCK_STREAM):
    def fn():
        s = socket.socket(family, kind)
        s.settimeout(2)
        try:
            s.connect(addr)
        finally:
            s.close()
    return attempt(fn)


def udp_send(port):
    def fn():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for _ in range(3):
                try:
                    s.sendto(b"vrun-udp-escape", ("127.0.0.1", port))
                except ConnectionRefusedError:
                    pass
        finally:
            s.close()
    return attempt(fn)


def read(path):
    def fn():
        with open(path, "rb") as f:
            data = f.read(4096)
        result["content"][path] = data.decode("latin-1")
    return attempt(fn)


def write(path):
    def fn():
        with open(path, "wb") as f:
            f.write(b"x")
    return attempt(fn)


def listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        return ename(e.errno)


def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
                out[k] = v.strip()
    return out


a = json.loads(sys.argv[1])
result = {"content": {}}
# First, before anything opens a descriptor: what was inherited. listdir's own
# descriptor is the lowest free one, 3.
result["fds"] = sorted(os.listdir("/proc/self/fd"), key=int)
result["env"] = dict(os.environ)
result["status"] = status()
result["uid"], result["gid"] = os.getuid(), os.getgid()
with open("/proc/net/dev") as f:
    result["ifaces"] = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
result["tcp4"] = connect(socket.AF_INET, ("127.0.0.1", a["tcp4"]))
result["upstream"] = connect(socket.AF_INET, ("127.0.0.1", a["upstream"]))
if a.get("tcp6"):
    result["tcp6"] = connect(socket.AF_INET6, ("::1", a["tcp6"]))
result["udp"] = udp_send(a["udp"])
result["abstract"] = connect(socket.AF_UNIX, "\0" + a["abstract"])
result["control"] = connect(socket.AF_UNIX, a["control"])
result["ssh_agent"] = connect(socket.AF_UNIX, a["ssh_agent"])
result["dbus"] = connect(socket.AF_UNIX, a["dbus"])
result["unix"] = {p: connect(socket.AF_UNIX, p) for p in a.get("unix", [])}
result["read"] = {p: read(p) for p in a["read"]}
result["write"] = {p: write(p) for p in a["write"]}
result["listdir"] = {p: listdir(p) for p in a["listdir"]}
result["proc_pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
for pid in a["pids"]:
    result["pid_%d_mem" % pid] = read("/proc/%d/mem" % pid)
    result["pid_%d_environ" % pid] = read("/proc/%d/environ" % pid)
    result["pid_%d_kill0" % pid] = attempt(lambda: os.kill(pid, 0))  # noqa: B023
result["kill0_init"] = attempt(lambda: os.kill(1, 0))
# init keeps capabilities in the sandbox's user namespace: its descriptors and memory are closed.
result["init_fd"] = attempt(lambda: os.readlink("/proc/1/fd/0"))
result["init_fd_open"] = attempt(lambda: os.close(os.open("/proc/1/fd/0", os.O_RDONLY)))
result["init_mem"] = read("/proc/1/mem")
result["fork"] = attempt(lambda: subprocess.run(["true"], check=True))
result["unshare_cmd"] = attempt(lambda: subprocess.run(["unshare", "-U", "true"], check=True,
                                                       stderr=subprocess.DEVNULL))
if a.get("syscalls"):
    result["keyctl"] = syscall("keyctl", 0, -4, 0)  # KEYCTL_GET_KEYRING_ID, user keyring
    result["add_key"] = syscall("add_key", b"user", b"vrun-test", b"x", 1, -4)
    result["request_key"] = syscall("request_key", b"user", b"vrun-test", None, -4)
    result["unshare_newuser"] = syscall("unshare", CLONE_NEWUSER)
    result["clone_newuser"] = syscall("clone", CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
    result["clone3"] = syscall("clone3", None, 0)
    result["ptrace_traceme"] = syscall("ptrace", 0, 0, 0, 0)
    result["mount_tmpfs"] = syscall("mount", b"none", b"/tmp", b"tmpfs", 0, None)
    result["umount_mask"] = syscall("umount2", a["mask"].encode(), 2)  # MNT_DETACH
    result["io_uring_setup"] = syscall("io_uring_setup", 1, ctypes.create_string_buffer(120))
    result["userfaultfd"] = syscall("userfaultfd", 0)
json.dump(result, sys.stdout)
