#!/usr/bin/env python3
"""A plain Python HTTPS client, as a user's script would be: no knowledge of
vrun; proxy and CA come from the environment (urllib: https_proxy and
SSL_CERT_FILE through OpenSSL's defaults; requests: the same proxies and
REQUESTS_CA_BUNDLE). $VAR in the URL is expanded from the environment.

usage: py_client.py urllib|requests URL [--header NAME=ENVVAR]... [--basic USER=ENVVAR]
                    [--data TEXT]
       py_client.py stream URL FLAGFILE
prints "STATUS n" then the body, or "ERROR type: message" and exits 1.
stream: reads an event stream with requests (stream=True), as clients of
streaming APIs do, and creates FLAGFILE once the first event has arrived.
"""
import base64
import os
import string
import sys


def main(argv):
    mode, url = argv[0], string.Template(argv[1]).substitute(os.environ)
    if mode == "stream":
        return stream(url, argv[2])
    headers, basic, data = {}, None, None
    rest = argv[2:]
    while rest:
        opt, val = rest[0], rest[1]
        rest = rest[2:]
        if opt == "--header":
            name, var = val.split("=", 1)
            headers[name] = os.environ[var]
        elif opt == "--basic":
            user, var = val.split("=", 1)
            basic = (user, os.environ[var])
        elif opt == "--data":
            data = val.encode()
    try:
        if mode == "urllib":
            import urllib.request
            if basic:
                token = base64.b64encode(("%s:%s" % basic).encode()).decode()
                headers["Authorization"] = "Basic " + token
            req = urllib.request.Request(url, data=data, headers=headers)
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, body = resp.status, resp.read()
        elif mode == "requests":
            import requests
            resp = requests.request("POST" if data else "GET", url, data=data,
                                    headers=headers, auth=basic, timeout=30)
            status, body = resp.status_code, resp.content
        else:
            print("unknown mode " + mode, file=sys.stderr)
            return 2
    except Exception as e:  # noqa: BLE001 -- the test reads the error
        print("ERROR %s: %s" % (type(e).__name__, e), flush=True)
        return 1
    sys.stdout.write("STATUS %d\n" % status)
    sys.stdout.flush()
    sys.stdout.buffer.write(body)
    return 0 if status < 400 else 1


def stream(url, flag):
    import requests
    try:
        resp = requests.get(url, stream=True, timeout=60)
        got = b""
        for chunk in resp.iter_content(chunk_size=None):
            got += chunk
            if b"data: first" in got and not os.path.exists(flag):
                open(flag, "w").close()
    except Exception as e:  # noqa: BLE001 -- the test reads the error
        print("ERROR %s: %s" % (type(e).__name__, e), flush=True)
        return 1
    events = [ln for ln in got.decode(errors="replace").splitlines() if ln.startswith("data:")]
    print("STATUS %d" % resp.status_code)
    print("\n".join(events))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
