"""A minimal client of vproxy's control protocol (include/ctlproto.h), used by
the integration tests in place of vrun: it opens a session for some keys and
passes its own listening socket, as vrun passes the sandbox's."""
import os
import socket
import struct

VERSION = 1
OPEN, OPENED, ERROR, CLOSE, STATUS, STATUS_REPLY, STOP, OK = range(1, 9)
T_KEY, T_ALLOW_HOST, T_ARG, T_CWD, T_PID, T_PROFILE = range(1, 7)
T_SESSION, T_CA_PATH, T_KEYINFO, T_CODE, T_MESSAGE = range(7, 12)
T_EXIT, T_UPTIME, T_SESSINFO, T_RESOLVED, T_PROXY_AUTH = range(12, 17)


def encode(mtype, fields):
    payload = b"".join(struct.pack(">HI", tag, len(v)) + v for tag, v in fields)
    return struct.pack(">HHI", VERSION, mtype, len(payload)) + payload


def decode(data):
    version, mtype, plen = struct.unpack(">HHI", data[:8])
    assert version == VERSION and len(data) == 8 + plen, "bad reply"
    fields, off = [], 8
    while off < len(data):
        tag, flen = struct.unpack(">HI", data[off:off + 6])
        fields.append((tag, data[off + 6:off + 6 + flen]))
        off += 6 + flen
    return mtype, fields


def recv_msg(sock):
    head = b""
    while len(head) < 8:
        chunk = sock.recv(8 - len(head))
        if not chunk:
            raise EOFError("control connection closed")
        head += chunk
    plen = struct.unpack(">I", head[4:8])[0]
    body = b""
    while len(body) < plen:
        chunk = sock.recv(plen - len(body))
        if not chunk:
            raise EOFError("control connection closed")
        body += chunk
    return decode(head + body)


def socket_path(runtime):
    return os.path.join(runtime, "control.sock")


def connect_tunnel(port, authority, timeout=10, sock=None):
    """CONNECT authority (bytes, HOST:PORT) through a session listener on
    127.0.0.1:port, on sock when given (e.g. with socket options already
    set). Returns (socket, status line). The response head is read byte by
    byte, so nothing after it (a TLS handshake) is consumed."""
    if sock is None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    else:
        sock.connect(("127.0.0.1", port))
    sock.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority))
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return sock, head.split(b"\r\n", 1)[0]


def read_all(sock):
    """Everything sock sends until it closes (or times out, or fails)."""
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:  # timeouts, resets and ssl.SSLError are all OSErrors
        pass
    return data


class Session:
    """An open session: .id, .ca_path, .keys {name: (env, placeholder)},
    .port (the listener's), .sock (closing it ends the session)."""

    def __init__(self, runtime, keys, allow=(), args=("test",), listener=None, proxy_auth=None):
        self.listener = listener or socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if listener is None:
            self.listener.bind(("127.0.0.1", 0))
            self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(socket_path(runtime))
        fields = [(T_KEY, k.encode()) for k in keys]
        fields += [(T_ALLOW_HOST, a.encode()) for a in allow]
        fields += [(T_ARG, a.encode()) for a in args]
        fields.append((T_PID, struct.pack(">Q", os.getpid())))
        if proxy_auth is not None:
            fields.append((T_PROXY_AUTH, proxy_auth.encode()))
        socket.send_fds(self.sock, [encode(OPEN, fields)], [self.listener.fileno()])
        # The daemon holds its own copy now; ours would only accept connections meant for it.
        self.listener.close()
        mtype, fields = recv_msg(self.sock)
        if mtype == ERROR:
            code = [struct.unpack(">q", v)[0] for t, v in fields if t == T_CODE]
            msg = [v.decode() for t, v in fields if t == T_MESSAGE]
            raise RuntimeError("vproxy refused: %s (%s)" % (msg[0] if msg else "?", code))
        assert mtype == OPENED
        self.id = [v.decode() for t, v in fields if t == T_SESSION][0]
        self.ca_path = [v.decode() for t, v in fields if t == T_CA_PATH][0]
        self.keys = {}
        for t, v in fields:
            if t == T_KEYINFO:
                name, env, ph = v.decode().split("\t")
                self.keys[name] = (env, ph)

    def close(self, status=0):
        socket_send = encode(CLOSE, [(T_EXIT, struct.pack(">q", status))])
        self.sock.sendall(socket_send)
        mtype, _ = recv_msg(self.sock)
        self.sock.close()
        return mtype == OK
