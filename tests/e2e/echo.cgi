#!/usr/bin/python3
"""CGI behind nginx + fcgiwrap (tests/e2e). /echo...: a JSON echo of what
arrived (method, URI, query string, request headers, the body's length and
SHA-256, and the body itself up to 64 KiB). /chunked: a
stream of numbered lines with no Content-Length, so nginx sends it chunked;
?lines=N sets how many. /chunked?wait=NAME: an event stream (see below)."""
import hashlib
import json
import os
import sys
import time
import urllib.parse

env = os.environ
uri = env.get("REQUEST_URI", "")
if env.get("DOCUMENT_URI", "").startswith("/chunked"):
    q = urllib.parse.parse_qs(env.get("QUERY_STRING", ""))
    if "wait" in q:
        # A stream whose second event waits for the client to have seen the
        # first (it creates STREAM_DIR/<wait>): it only ends if the first
        # event was delivered while the response was still open.
        out = sys.stdout.buffer
        out.write(b"Content-Type: text/event-stream\r\n\r\n")
        # fcgiwrap (libfcgi) passes output on in 8 KiB records: pad past one.
        out.write(b"data: first\n: " + b"." * 9000 + b"\n\n")
        out.flush()
        flag = os.path.join(env["STREAM_DIR"], os.path.basename(q["wait"][0]))
        for _ in range(300):
            if os.path.exists(flag):
                out.write(b"data: released\n\n")
                break
            time.sleep(0.1)
        else:
            out.write(b"data: timeout\n\n")
        out.flush()
        sys.exit(0)
    n = int(q.get("lines", ["2000"])[0])
    out = sys.stdout.buffer
    out.write(b"Content-Type: text/plain\r\n\r\n")
    for i in range(n):
        out.write(b"chunk line %06d ..............................................\n" % i)
        if i % 100 == 99:
            out.flush()
    out.flush()
    sys.exit(0)

length = int(env.get("CONTENT_LENGTH") or 0)
body = sys.stdin.buffer.read(length) if length else b""
headers = {k[5:].lower().replace("_", "-"): v for k, v in env.items() if k.startswith("HTTP_")}
record = {"method": env.get("REQUEST_METHOD"), "uri": uri, "query": env.get("QUERY_STRING", ""),
          "headers": headers, "body_length": len(body),
          "body_sha256": hashlib.sha256(body).hexdigest()}
if len(body) <= 65536:
    record["body"] = body.decode("latin-1")
sys.stdout.write("Content-Type: application/json\r\n\r\n")
sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
