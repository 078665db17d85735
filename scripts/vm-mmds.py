#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for Firecracker's metadata service (MMDS), for scripts/vm-run.sh.

    vm-mmds.py STATE_DIR

Listens on 127.0.0.1 (an ephemeral port, written to STATE_DIR/port); QEMU's
guestfwd makes it 169.254.169.254:80 inside the guest. It answers what envd
asks (envd/mmds.c):

    PUT /latest/api/token   (X-metadata-token-ttl-seconds) -> session token
    GET /                   (X-metadata-token)              -> JSON with
        instanceID, envID, address (log collector), accessTokenHash

The values are read from STATE_DIR on every request, so a test can change
them while the guest runs: instance_id, env_id, token_hash (hex SHA-512 of
the access token; empty = none). POSTs to /logs (the log collector address
handed to the guest) are appended to STATE_DIR/logs.jsonl. Every request is
logged in STATE_DIR/requests.log.
"""
import http.server
import json
import os
import secrets
import sys
import time

state = sys.argv[1]
session = secrets.token_hex(16)


def value(name, default=""):
    try:
        with open(os.path.join(state, name)) as f:
            return f.read().strip()
    except OSError:
        return default


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        with open(os.path.join(state, "requests.log"), "a") as f:
            f.write("%.3f %s\n" % (time.time(), fmt % args))

    def reply(self, code, body=b"", ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def do_PUT(self):
        self.body()
        if self.path != "/latest/api/token" or not self.headers.get("X-metadata-token-ttl-seconds"):
            return self.reply(400)
        self.reply(200, session.encode())

    def do_GET(self):
        if self.headers.get("X-metadata-token") != session:
            return self.reply(401)
        doc = {
            "instanceID": value("instance_id", "vm-sandbox"),
            "envID": value("env_id", "vm-template"),
            "address": value("address", "http://169.254.169.254/logs"),
            "accessTokenHash": value("token_hash"),
        }
        self.reply(200, json.dumps(doc).encode(), "application/json")

    def do_POST(self):
        data = self.body()
        if not self.path.startswith("/logs"):
            return self.reply(404)
        with open(os.path.join(state, "logs.jsonl"), "ab") as f:
            f.write(data.rstrip(b"\n") + b"\n")
        self.reply(200)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


srv = Server(("127.0.0.1", 0), Handler)
tmp = os.path.join(state, "port.tmp")
with open(tmp, "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(tmp, os.path.join(state, "port"))
srv.serve_forever()
