#!/usr/bin/env python3
"""The token server of the test registry's `token` auth (see registry-env beside this file).

It implements the token endpoint of the distribution token-auth specification, as Docker Hub's
auth.docker.io does, for one Debian `docker-registry` started by registry-env:

  GET /token?service=SERVICE&scope=repository:NAME:pull,push[&scope=...]
      Authorization: Basic ...   optional; a wrong user or password is a 401
  -> 200 {"token": JWT, "access_token": JWT, "expires_in": N, "issued_at": "..."}

The JWT is signed (ES256) with --signing-key; its certificate (--signing-cert) travels in the
`x5c` header and is the registry's `rootcertbundle`. A client with the right credentials is
granted every action it asks for; an anonymous client only `pull`, and only while anonymous pull
is allowed. The lifetime and the anonymous switch are read from --settings (JSON) at every
request, so a test can shorten the lifetime after pushing: `registry-env token-config`.

distribution 2.8 accepts a token until 60 s after its `exp` claim (its verification leeway). To
make a token really stop working after `expires_in` seconds, the `exp` claim is set 60 s early.

Every request is one JSON line in --log: time, path, whether Authorization was sent, the user
(never the password), the scopes asked for and granted, and the status.
When listening, the port is written to --port-file (atomically).
"""
import argparse
import base64
import datetime
import http.server
import json
import os
import secrets
import ssl
import sys
import threading
import time
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

REGISTRY_LEEWAY = 60  # seconds distribution 2.8 adds to `exp` (registry/auth/token/token.go)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Signer:
    def __init__(self, key_path: str, cert_path: str):
        self.key = serialization.load_pem_private_key(open(key_path, "rb").read(), None)
        cert = x509.load_pem_x509_certificate(open(cert_path, "rb").read())
        self.x5c = [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()]

    def sign(self, claims: dict) -> str:
        header = {"typ": "JWT", "alg": "ES256", "x5c": self.x5c}
        signing_input = (b64url(json.dumps(header).encode()) + "." +
                         b64url(json.dumps(claims).encode()))
        der = self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)  # JWS wants r || s, 32 bytes each
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def parse_scope(scope: str):
    """'repository:test/busybox:pull,push' -> ('repository', 'test/busybox', ['pull', 'push'])."""
    kind, _, rest = scope.partition(":")
    name, _, actions = rest.rpartition(":")
    return kind, name, [a for a in actions.split(",") if a]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "evalbox-test-token-server"
    timeout = 30  # seconds a connection may sit idle

    def log_message(self, *args):  # the JSON log below replaces stderr's access log
        pass

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        entry = {"t": round(time.time(), 3), "method": "GET", "path": url.path,
                 "authorization": "Authorization" in self.headers,
                 "scopes": query.get("scope", [])}
        status, body = self.answer(url.path, query, entry)
        entry["status"] = status
        self.server.log(entry)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="evalbox test token server"')
        self.end_headers()
        self.wfile.write(data)

    def answer(self, path, query, entry):
        opts = self.server.opts
        if path != "/token":
            return 404, {"errors": [{"code": "NOT_FOUND", "message": path}]}
        if query.get("service", [opts.service])[0] != opts.service:
            return 400, {"errors": [{"code": "UNSUPPORTED", "message": "unknown service"}]}
        user = self.authenticate()
        if user is False:
            return 401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]}
        entry["user"] = user
        settings = self.server.settings()
        access = []
        for scope in query.get("scope", []):
            kind, name, actions = parse_scope(scope)
            if user is None:
                actions = ["pull"] if "pull" in actions and settings["anonymous_pull"] else []
            if kind in ("repository", "registry") and actions:
                access.append({"type": kind, "name": name, "actions": actions})
        if user is None and query.get("scope") and not access:
            return 401, {"errors": [{"code": "UNAUTHORIZED", "message": "anonymous access denied"}]}
        entry["granted"] = access
        lifetime = int(settings["lifetime"])
        now = int(time.time())
        token = self.server.signer.sign({
            "iss": opts.issuer, "sub": user or "", "aud": opts.service,
            "exp": now + lifetime - REGISTRY_LEEWAY, "nbf": now - 5, "iat": now,
            "jti": secrets.token_hex(8), "access": access})
        issued = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
        return 200, {"token": token, "access_token": token, "expires_in": lifetime,
                     "issued_at": issued.strftime("%Y-%m-%dT%H:%M:%SZ")}

    def authenticate(self):
        """None: anonymous; the user's name: right credentials; False: wrong ones."""
        header = self.headers.get("Authorization")
        if header is None:
            return None
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(value).decode().partition(":")
        except ValueError:
            return False
        opts = self.server.opts
        if secrets.compare_digest(user, opts.user) and secrets.compare_digest(password,
                                                                                opts.password):
            return user
        return False


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, opts):
        super().__init__((opts.listen, opts.port), Handler)
        self.opts = opts
        self.signer = Signer(opts.signing_key, opts.signing_cert)
        self.log_lock = threading.Lock()
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(opts.cert, opts.key)

    def get_request(self):
        # The TLS handshake happens on the handler's thread (first read), so a client that
        # connects and says nothing cannot stall the accept loop.
        sock, addr = self.socket.accept()
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def settings(self) -> dict:
        settings = {"lifetime": 300, "anonymous_pull": False}
        try:
            with open(self.opts.settings) as f:
                settings.update(json.load(f))
        except FileNotFoundError:
            pass
        return settings

    def log(self, entry: dict):
        with self.log_lock, open(self.opts.log, "a") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listen", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: a free port (see --port-file)")
    p.add_argument("--cert", required=True, help="TLS certificate (PEM)")
    p.add_argument("--key", required=True, help="TLS key (PEM)")
    p.add_argument("--signing-key", required=True, help="EC P-256 key that signs the tokens")
    p.add_argument("--signing-cert", required=True, help="its certificate (rootcertbundle)")
    p.add_argument("--service", required=True, help="the registry's auth.token.service")
    p.add_argument("--issuer", required=True, help="the registry's auth.token.issuer")
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--settings", required=True,
                   help='JSON read per request: {"lifetime": SECONDS, "anonymous_pull": BOOL}')
    p.add_argument("--log", required=True, help="one JSON line per request")
    p.add_argument("--port-file", required=True)
    opts = p.parse_args()

    server = Server(opts)
    tmp = opts.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{server.server_address[1]}\n")
    os.rename(tmp, opts.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
