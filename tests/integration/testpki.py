"""Shared by the Python test suites: a CA and a leaf for test host names,
made with the openssl CLI at test time, and the records the test upstream
(upstream.py) logs."""
import json
import os
import subprocess


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_certs(d, names, ca_name="vrun test CA"):
    """d/ca.pem + ca.key, and d/up.pem + up.key valid for every name in names."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d + "/ca.key", "-out", d + "/ca.pem", "-days", "1",
            "-subj", "/CN=" + ca_name)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", d + "/up.key", "-out", d + "/up.csr", "-subj", "/CN=" + names[0])
    with open(d + "/ext", "w") as f:
        f.write("subjectAltName=" + ",".join("DNS:" + n for n in names) + "\n")
    openssl("x509", "-req", "-in", d + "/up.csr", "-CA", d + "/ca.pem", "-CAkey", d + "/ca.key",
            "-CAcreateserial", "-out", d + "/up.pem", "-days", "1", "-extfile", d + "/ext")


def upstream_records(log):
    """What upstream.py received, one dict per request."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]
