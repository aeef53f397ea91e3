#!/usr/bin/env python3
"""A TLS (or plain, with --plain) HTTP/1.1 test upstream on loopback. It answers
every request with a JSON echo of what it received (method, path, headers,
body) and appends the same record to a log file, so a test can prove what
reached the upstream. Prints the port it listens on, then serves forever.

Also /big/N (N bytes, for slow readers), /sink (a body read and dropped,
for endless uploads), /close (the answer, then the connection closed) and
/close-delimited (a body ended by the close alone); /head-first... is
logged as soon as its head is in, and again when complete.

usage: upstream.py --cert CERT --key KEY --log FILE [--plain]
"""
import argparse
import base64
import gzip
import http.server
import json
import socketserver
import ssl
import sys
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _sink(self):
        # Read the body without keeping it (large and endless uploads).
        n = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                while size > 0:
                    got = len(self.rfile.read(min(size, 1 << 16)))
                    if got == 0:
                        return
                    n += got
                    size -= got
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left > 0:
                got = len(self.rfile.read(min(left, 1 << 16)))
                if got == 0:
                    return
                n += got
                left -= got
        out = json.dumps({"received": n}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def _big(self, n):
        # n bytes, written as fast as the reader takes them.
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        block = b"0123456789abcdef" * 4096
        try:
            while n > 0:
                k = min(n, len(block))
                self.wfile.write(block[:k])
                n -= k
        except OSError:
            pass

    def _serve(self):
        if self.path.startswith("/head-first"):
            # Logged as soon as the head is in, before any of the body is read:
            # shows whether a head reached the upstream at all.
            with open(self.server.log, "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path,
                                    "headers": [[k, v] for k, v in self.headers.items()],
                                    "head_only": True}) + "\n")
        if self.path.startswith("/sink"):
            return self._sink()
        if self.path.startswith("/big/"):
            return self._big(int(self.path[5:]))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        record = {"method": self.command, "path": self.path,
                  "headers": [[k, v] for k, v in self.headers.items()],
                  "body": body.decode("latin-1"),
                  "tls_resumed": bool(getattr(self.connection, "session_reused", False))}
        with open(self.server.log, "a") as f:
            f.write(json.dumps(record) + "\n")
        out = json.dumps(record).encode()
        if self.path.startswith("/reflect"):
            # Echo the bearer token back in every form a careless server might.
            token = self.headers.get("Authorization", "").split(" ", 1)[-1].encode()
            parts = [b"raw:" + token, b"url:" + urllib.parse.quote(token, safe="").encode()]
            for k in range(3):
                enc = base64.b64encode(b"u" * k + b":" + token + b"!")
                parts.append(b"b64:" + enc)
                # as JSON encoders (PHP, .NET) and URLs write '/' and '+'
                parts.append(b"b64php:" + enc.replace(b"/", b"\\/"))
                parts.append(b"b64net:" + enc.replace(b"+", b"\\u002B").replace(b"/", b"\\u002F"))
                parts.append(b"b64url:" + enc.replace(b"+", b"%2B").replace(b"/", b"%2F"))
            body = b"\n".join(parts) + b"\n"
            self.send_response(200)
            self.send_header("X-Echo", token.decode("latin-1"))
            self.send_header("Set-Cookie", "t=" + token.decode("latin-1"))
            self.send_header("Location", "https://elsewhere.test/?t=" + token.decode("latin-1"))
            if "chunk1" in self.path:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(len(body)):
                    self.wfile.write(b"1\r\n%s\r\n" % body[i:i + 1])
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            return
        if self.path.startswith("/close"):
            # The answer, then the connection closed (without TLS close_notify, as
            # Python's server does): framed by length, or by the close itself.
            self.send_response(200)
            self.send_header("Connection", "close")
            if not self.path.startswith("/close-delimited"):
                self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            self.wfile.flush()
            return
        if self.path.startswith("/gzip"):
            # Compressed whatever the client asked for, as some servers do.
            body = gzip.compress(out)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.startswith("/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(out), 7):
                part = out[i:i + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _serve

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--log", required=True)
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--tls1-only", action="store_true",
                    help="speak nothing newer than TLS 1.0 (a legacy server)")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    srv.log = a.log
    if not a.plain:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if a.tls1_only:
            import warnings
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = ssl.TLSVersion.TLSv1
            ctx.maximum_version = ssl.TLSVersion.TLSv1
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        ctx.load_cert_chain(a.cert, a.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
