#!/usr/bin/env python3
"""A fake OCI registry that misbehaves on purpose: one fault per repository name.

  hostile_registry.py --image OCI_DIR --log FILE [--plain | --cert PEM --key PEM | --tls-dir DIR]
                      [--auth none|basic|bearer|badchallenge] [--token-lifetime SECONDS]
                      [--user NAME --password SECRET] [--ready-file FILE]
  hostile_registry.py --list-modes          prints the repositories and their faults

It serves the image of the OCI layout OCI_DIR (its first manifest, or --ref TAG), e.g. the busybox
test image (tests/images/make-images busybox, then its oci/), as `good/img:latest` (and by digest),
and as `<mode>/img` for every mode in MODES below, each answering the normal flow except for its
one fault. Any other repository is a 404 with distribution's error JSON (NAME_UNKNOWN).

Once listening it prints one JSON line on stdout (and to --ready-file):
  {"port": P, "storage_port": S, "plain_storage_port": H, "url": "https://127.0.0.1:P",
   "ca": "DIR/ca.pem" or null, "user": ..., "password": ..., "log": FILE}
  port                the registry: /v2/, /v2/NAME/manifests/REF, /v2/NAME/blobs/DIGEST,
                      /v2/NAME/tags/list, and the token endpoint /token
  storage_port        "blob storage" (same TLS): /blobs/DIGEST?repo=..&expires=..&sig=.. , where
                      `redirectok` sends blob GETs
  plain_storage_port  the same storage on plain HTTP: where `redirecthttp` points
TLS by default, with --cert/--key or a CA and certificate made by make-certs in --tls-dir (default:
the log's directory); --plain serves HTTP.

--auth sets the scheme /v2/ and every repository require (default none: /v2/ answers 200). The
auth modes below require theirs whatever --auth says, so with --auth none their challenge comes
on the manifest request; a client that learns the challenge from /v2/ only (as skopeo does)
needs the server started with --auth bearer for the token and bearer modes, --auth basic for
`basic`, --auth badchallenge for a malformed challenge on /v2/ itself.
Tokens are opaque, scoped to the repositories asked for, and expire after --token-lifetime
seconds (default 60) with no leeway: a use after that is a 401 with error="invalid_token". The
token endpoint (GET /token?service=hostile-registry&scope=repository:NAME:pull) gives anonymous
tokens, except for `bearerauth`; wrong Basic credentials are a 401 there. It picks its fault
(tokengarbage, token500, tokenhang) by the repository named in the scope.

Log: every request is one JSON line in --log, written when its status is sent (hang: when it
arrives, status null):
  {"t": UNIX_TIME, "server": "registry"|"storage"|"storage-plain", "client": "127.0.0.1:PORT",
   "method": "GET", "path": "/v2/...?...", "mode": MODE or null, "status": 200,
   "headers": {NAME: VALUE, ..., "Authorization": true}, "authorization": BOOL, "note": "..."}
The Authorization header's value never reaches the log: it is replaced by true.

Counters (ratelimit, flaky500, dropmid) are per server and per blob, or method and path: start
another server to see a fault again.
"""
import argparse
import base64
import copy
import hashlib
import hmac
import http.server
import json
import os
import pathlib
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import namedtuple

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
SERVICE = "hostile-registry"
HOLD_LIMIT = 600  # seconds a hang or a slow drip lasts at most (then the connection is closed)
DRIP_INTERVAL = 2.0  # seconds between two bytes of a slow drip


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


# --- what a repository serves ----------------------------------------------------------------

class Content:
    """A repository's answers, keyed by the digest the registry *claims* (the client asked for
    it or reads it in Docker-Content-Digest): a fault is bytes that differ from their key."""

    def __init__(self, manifest: bytes, media_type: str, blobs: dict):
        self.tags = {"latest": sha256(manifest)}
        self.manifests = {sha256(manifest): (manifest, media_type)}
        self.blobs = dict(blobs)
        doc = json.loads(manifest)
        self.layers = [layer["digest"] for layer in doc["layers"]]
        self.doc = doc

    def copy(self) -> "Content":
        """Another repository's answers: the bytes are shared, the tables are its own."""
        other = copy.copy(self)
        other.tags, other.manifests, other.blobs = (dict(self.tags), dict(self.manifests),
                                                    dict(self.blobs))
        other.doc = copy.deepcopy(self.doc)
        return other

    def set_latest(self, body: bytes, media_type: str, digest: str = None):
        digest = digest or sha256(body)
        self.manifests[digest] = (body, media_type)
        self.tags["latest"] = digest


def load_image(layout: pathlib.Path, ref: str) -> Content:
    index = json.loads((layout / "index.json").read_text())
    entries = index["manifests"]
    if ref:
        entries = [e for e in entries
                   if e.get("annotations", {}).get("org.opencontainers.image.ref.name") == ref]
    if not entries:
        sys.exit(f"hostile_registry.py: no manifest tagged {ref!r} in {layout}")

    def blob(digest):
        return (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()

    manifest = blob(entries[0]["digest"])
    if entries[0].get("mediaType") == OCI_INDEX:  # an index: take its first image
        manifest = blob(json.loads(manifest)["manifests"][0]["digest"])
    doc = json.loads(manifest)
    digests = [doc["config"]["digest"]] + [layer["digest"] for layer in doc["layers"]]
    return Content(manifest, doc.get("mediaType", OCI_MANIFEST), {d: blob(d) for d in digests})


# Content builders: the good image in, what the mode's repository serves out.

def same(good: Content) -> Content:
    return good.copy()


def not_json(good):
    c = same(good)
    c.set_latest(b"this is not JSON {\"schemaVersion\": 2", OCI_MANIFEST)
    return c


def huge_manifest(good):  # valid JSON, 20 MiB: only a size cap stops it
    c = same(good)
    doc = dict(c.doc, annotations={"padding": "x" * (20 << 20)})
    c.set_latest(canonical(doc), OCI_MANIFEST)
    return c


def no_media_type(good):
    c = same(good)
    doc = {k: v for k, v in c.doc.items() if k != "mediaType"}
    c.set_latest(canonical(doc), "text/plain")
    return c


def bad_media_type(good):
    c = same(good)
    kind = "application/vnd.evalbox.unknown.v1+json"
    c.set_latest(canonical(dict(c.doc, mediaType=kind)), kind)
    return c


def manifest_digest(good):  # other bytes under the good digest (by tag and by digest)
    c = same(good)
    digest = c.tags["latest"]
    tampered = dict(c.doc, annotations={"tampered": "these bytes are not the digest's"})
    c.manifests[digest] = (canonical(tampered), OCI_MANIFEST)
    return c


def blob_digest(good):  # the first layer with one byte flipped: same size, another digest
    c = same(good)
    data = bytearray(c.blobs[c.layers[0]])
    data[len(data) // 2] ^= 0xFF
    c.blobs[c.layers[0]] = bytes(data)
    return c


def diff_id(good):  # a config that names another diff_id; config and manifest re-digested
    c = same(good)
    config = json.loads(c.blobs[c.doc["config"]["digest"]])
    config["rootfs"]["diff_ids"][0] = sha256(b"not the layer's uncompressed bytes")
    config_bytes = canonical(config)
    c.blobs[sha256(config_bytes)] = config_bytes
    doc = dict(c.doc, config=dict(c.doc["config"], digest=sha256(config_bytes),
                                  size=len(config_bytes)))
    c.set_latest(canonical(doc), OCI_MANIFEST)
    return c


def big_blob(good):  # the first layer and then 1 MiB more than the manifest declares
    c = same(good)
    c.blobs[c.layers[0]] += b"\0" * (1 << 20)
    return c


def no_platform(good):  # an index with no linux/amd64 (nor any host's) entry
    c = same(good)
    digest = c.tags["latest"]
    size = len(c.manifests[digest][0])
    entry = {"mediaType": OCI_MANIFEST, "digest": digest, "size": size}
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        dict(entry, platform={"os": "linux", "architecture": "s390x"}),
        dict(entry, platform={"os": "windows", "architecture": "amd64",
                              "os.version": "10.0.17763.1234"})]}
    c.set_latest(canonical(index), OCI_INDEX)
    return c


# --- the table: mode -> behaviour -----------------------------------------------------------
# content: what the repository serves; fault: what its request handling does differently
# (a Handler.fault_* method); auth: the scheme it requires (None: whatever --auth says).

Mode = namedtuple("Mode", "content fault auth about")
MODES = {
    "good": Mode(same, None, None, "the valid image"),
    "notjson": Mode(not_json, None, None, "manifest that is not JSON"),
    "hugemanifest": Mode(huge_manifest, None, None, "a 20 MiB manifest (valid JSON)"),
    "nomediatype": Mode(no_media_type, None, None,
                        "manifest without mediaType, Content-Type text/plain"),
    "badmediatype": Mode(bad_media_type, None, None, "an unknown manifest media type"),
    "manifestdigest": Mode(manifest_digest, None, None, "manifest bytes that match neither "
                           "the digest asked for nor Docker-Content-Digest"),
    "blobdigest": Mode(blob_digest, None, None,
                       "first layer: bytes that do not match its digest (same size)"),
    "diffid": Mode(diff_id, None, None, "config rootfs.diff_ids[0] does not match the layer"),
    "bigblob": Mode(big_blob, None, None, "first layer: 1 MiB longer than the manifest says"),
    "noplatform": Mode(no_platform, None, None, "index with only linux/s390x and windows/amd64"),
    "redirectloop": Mode(same, "redirect_loop", None, "blob GET: 307 to itself, forever"),
    "redirecthttp": Mode(same, "redirect_http", None,
                         "blob GET: 307 to http:// (plain_storage_port)"),
    "redirectok": Mode(same, "redirect_ok", None,
                       "blob GET: 307 to storage_port with a signed query string"),
    "tokengarbage": Mode(same, None, "bearer", "token endpoint: 200 with garbage"),
    "token500": Mode(same, None, "bearer", "token endpoint: 500"),
    "tokenhang": Mode(same, None, "bearer", "token endpoint: never answers"),
    "badchallenge": Mode(same, None, "badchallenge",
                         "401 with a malformed WWW-Authenticate, whatever is sent"),
    "bearer": Mode(same, None, "bearer", "Bearer flow required (anonymous tokens allowed)"),
    "bearerauth": Mode(same, None, "bearerauth",
                       "Bearer flow required; the token endpoint requires Basic credentials"),
    "basic": Mode(same, None, "basic", "Basic auth required"),
    "slowdripmanifest": Mode(same, "slow_drip_manifest", None,
                             "manifest GET: headers, then one byte every 2 s"),
    "slowdripblob": Mode(same, "slow_drip_blob", None,
                         "layer GET: headers, then one byte every 2 s"),
    "hang": Mode(same, "hang", None, "every request: accepted, never answered"),
    "ratelimit": Mode(same, "rate_limit", None,
                      "each blob's first GET: 429 with Retry-After: 1"),
    "flaky500": Mode(same, "flaky", None,
                     "the first two requests of each method and path (manifest, blob): 503"),
    "dropmid": Mode(same, "drop_mid", None,
                    "each layer's first GET without Range: connection closed halfway; "
                    "Range: bytes=N- honoured (206)"),
}
TOKEN_FAULTS = {"tokengarbage", "token500", "tokenhang"}

ROUTE = re.compile(r"^/v2/(?P<name>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)$")
TAGS = re.compile(r"^/v2/(?P<name>.+)/tags/list$")


# --- HTTP ------------------------------------------------------------------------------------

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "evalbox-hostile-registry"
    timeout = 60  # seconds an idle connection is kept

    def log_message(self, *args):  # the JSON log replaces stderr's access log
        pass

    # -- logging and answering

    def setup(self):
        super().setup()
        self.mode = None
        self.note = None

    def send_response(self, code, message=None):
        self.log_request_line(code)
        super().send_response(code, message)

    def log_request_line(self, status):
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        authorization = "Authorization" in self.headers
        if authorization:
            headers["Authorization"] = True
        self.server.app.log({
            "t": round(time.time(), 3), "server": self.server.role,
            "client": "%s:%d" % self.client_address[:2], "method": self.command,
            "path": self.path, "mode": self.mode, "status": status, "headers": headers,
            "authorization": authorization, "note": self.note})

    def answer(self, status, body=b"", content_type="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code, message, headers=()):
        body = canonical({"errors": [{"code": code, "message": message, "detail": None}]})
        self.answer(status, body, headers=headers)

    def send_blob(self, data: bytes, digest: str):
        """200, or 206 for `Range: bytes=N-[M]`; 416 for a range it cannot satisfy."""
        start, end = 0, len(data) - 1
        status, headers = 200, [("Docker-Content-Digest", digest), ("Accept-Ranges", "bytes")]
        wanted = self.headers.get("Range")
        if wanted:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
            if not m or int(m[1]) >= len(data):
                return self.answer(416, b"", "application/octet-stream",
                                   [("Content-Range", f"bytes */{len(data)}")])
            start = int(m[1])
            end = min(int(m[2]), end) if m[2] else end
            status = 206
            headers.append(("Content-Range", f"bytes {start}-{end}/{len(data)}"))
        self.answer(status, data[start:end + 1], "application/octet-stream", headers)

    # -- holding a connection open (hang, slow drip)

    def hold(self, drip: bytes = None):
        """Sends one byte of `drip` every DRIP_INTERVAL (or nothing) until the client closes,
        the bytes run out or HOLD_LIMIT passes."""
        self.close_connection = True
        sock = self.connection
        deadline = time.monotonic() + HOLD_LIMIT
        sent = 0
        try:
            sock.settimeout(DRIP_INTERVAL)
            while time.monotonic() < deadline and not self.server.app.stopping.is_set():
                if drip is not None:
                    if sent >= len(drip):
                        return
                    sock.sendall(drip[sent:sent + 1])
                    sent += 1
                try:
                    if sock.recv(1) == b"":
                        return  # the client gave up
                except (socket.timeout, ssl.SSLWantReadError):
                    pass
        except OSError:
            return

    # -- registry

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        app = self.server.app
        if self.server.role != "registry":
            return self.storage_get(url)
        if url.path in ("/v2", "/v2/"):
            return self.ping()
        if url.path == "/token":
            return self.token(urllib.parse.parse_qs(url.query))
        m = ROUTE.match(url.path) or TAGS.match(url.path)
        name = m["name"] if m else None
        mode_name = name[:-len("/img")] if name and name.endswith("/img") else None
        if mode_name not in MODES:
            if m:
                return self.error(404, "NAME_UNKNOWN", f"repository name not known: {name}")
            return self.error(404, "NOT_FOUND", f"no such endpoint: {url.path}")
        self.mode = mode_name
        mode = MODES[mode_name]
        if mode.fault == "hang":
            return self.fault_hang()
        if not self.authorized(name, mode):
            return
        if mode.fault == "flaky" and app.count(("flaky", self.command, url.path)) <= 2:
            return self.error(503, "UNAVAILABLE", "flaky on purpose: try again")
        content = app.content[mode_name]
        if "kind" not in m.groupdict():
            return self.answer(200, canonical({"name": name, "tags": sorted(content.tags)}))
        if m["kind"] == "manifests":
            return self.manifest(mode, content, m["ref"])
        return self.blob(mode, content, name, m["ref"])

    def manifest(self, mode, content, ref):
        digest = content.tags.get(ref, ref)
        if digest not in content.manifests:
            return self.error(404, "MANIFEST_UNKNOWN", f"manifest unknown: {ref}")
        body, media_type = content.manifests[digest]
        if mode.fault == "slow_drip_manifest" and self.command == "GET":
            return self.fault_slow_drip(body, media_type, digest)
        self.answer(200, body, media_type, [("Docker-Content-Digest", digest)])

    def blob(self, mode, content, name, digest):
        if digest not in content.blobs:
            return self.error(404, "BLOB_UNKNOWN", f"blob unknown: {digest}")
        data = content.blobs[digest]
        layer = digest in content.layers
        app = self.server.app
        if self.command == "GET":
            if mode.fault == "redirect_loop":
                return self.answer(307, headers=[("Location", self.path)])
            if mode.fault in ("redirect_http", "redirect_ok"):
                plain = mode.fault == "redirect_http"
                return self.answer(307, headers=[("Location", app.storage_url(name, digest,
                                                                              plain))])
            if mode.fault == "slow_drip_blob" and layer:
                return self.fault_slow_drip(data, "application/octet-stream", digest)
            if mode.fault == "rate_limit" and app.count(("ratelimit", digest)) == 1:
                return self.error(429, "TOOMANYREQUESTS", "rate limited on purpose",
                                  [("Retry-After", "1")])
            if (mode.fault == "drop_mid" and layer and "Range" not in self.headers
                    and app.count(("dropmid", digest)) == 1):
                return self.fault_drop_mid(data, digest)
        self.send_blob(data, digest)

    # -- faults that are not just other bytes

    def fault_hang(self):
        self.note = "hang: never answered"
        self.log_request_line(None)
        self.hold()

    def fault_slow_drip(self, body, content_type, digest):
        self.note = f"slow drip: 1 byte every {DRIP_INTERVAL:g} s"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Content-Digest", digest)
        self.end_headers()
        self.wfile.flush()
        self.hold(body)

    def fault_drop_mid(self, data, digest):
        half = len(data) // 2
        self.note = f"dropped after {half} of {len(data)} bytes"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Docker-Content-Digest", digest)
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(data[:half])
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- auth

    def challenge(self, name, error=None):
        value = f'Bearer realm="{self.server.app.url}/token",service="{SERVICE}"'
        if name:
            value += f',scope="repository:{name}:pull"'
        if error:
            value += f',error="{error}"'
        return value

    def authorized(self, name, mode) -> bool:
        """Answers the 401 itself and returns False when the request lacks what `mode` needs."""
        app = self.server.app
        scheme = mode.auth or app.opts.auth
        header = self.headers.get("Authorization", "")
        if scheme == "none":
            return True
        if scheme == "badchallenge":
            bad = f'Bearer realm="{app.url}/token,service={SERVICE},scope='  # unterminated
            self.error(401, "UNAUTHORIZED", "authentication required",
                       [("WWW-Authenticate", bad)])
            return False
        if scheme == "basic":
            if app.basic_user(header):
                return True
            self.error(401, "UNAUTHORIZED", "authentication required",
                       [("WWW-Authenticate", f'Basic realm="{SERVICE}"')])
            return False
        # bearer, bearerauth
        verdict = app.check_token(header, name)
        if verdict == "ok":
            return True
        self.error(401, "UNAUTHORIZED", "authentication required",
                   [("WWW-Authenticate", self.challenge(name, verdict))])
        return False

    def ping(self):
        self.mode = None
        if self.authorized(None, Mode(same, None, None, "/v2/")):
            self.answer(200, b"{}")

    def token(self, query):
        app = self.server.app
        repos = []
        for scope in query.get("scope", []):
            for item in scope.split(" "):
                kind, _, rest = item.partition(":")
                if kind == "repository":
                    repos.append(rest.rpartition(":")[0])
        modes = {r[:-len("/img")] for r in repos if r.endswith("/img")}
        fault = next((m for m in sorted(modes) if m in TOKEN_FAULTS), None)
        self.mode = fault
        if fault == "tokenhang":
            return self.fault_hang()
        if fault == "token500":
            return self.answer(500, b"internal error (on purpose)", "text/plain")
        if fault == "tokengarbage":
            return self.answer(200, b"\x00\xffnot a token <html>{\"token\":", "application/json")
        header = self.headers.get("Authorization")
        if header is not None and not app.basic_user(header):
            self.note = "wrong credentials"
            return self.error(401, "UNAUTHORIZED", "wrong credentials",
                              [("WWW-Authenticate", f'Basic realm="{SERVICE}"')])
        if header is None and "bearerauth" in modes:
            self.note = "credentials required"
            return self.error(401, "UNAUTHORIZED", "credentials required",
                              [("WWW-Authenticate", f'Basic realm="{SERVICE}"')])
        token, lifetime = app.new_token(repos)
        self.note = f"token for {sorted(set(repos))}, {lifetime} s"
        self.answer(200, canonical({
            "token": token, "access_token": token, "expires_in": lifetime,
            "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))

    # -- blob storage (the second and third ports)

    def storage_get(self, url):
        query = urllib.parse.parse_qs(url.query)
        m = re.fullmatch(r"/blobs/(sha256:[0-9a-f]{64})", url.path)
        repo = query.get("repo", [""])[0]
        self.mode = repo[:-len("/img")] if repo.endswith("/img") else None
        if not m or not self.server.app.check_signature(repo, m[1], query):
            return self.answer(403, b"<Error><Code>AccessDenied</Code></Error>",
                               "application/xml")
        content = self.server.app.content.get(self.mode)
        if content is None or m[1] not in content.blobs:
            return self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>", "application/xml")
        self.send_blob(content.blobs[m[1]], m[1])

    def do_POST(self):
        self.do_other()

    def do_PUT(self):
        self.do_other()

    def do_PATCH(self):
        self.do_other()

    def do_DELETE(self):
        self.do_other()

    def do_other(self):
        self.error(405, "UNSUPPORTED", "this registry is read-only")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, app, role, tls):
        super().__init__(("127.0.0.1", 0), Handler)
        self.app, self.role, self.tls = app, role, tls

    def get_request(self):
        # TLS handshakes happen on the handler's thread (first read): a client that connects
        # and says nothing cannot stall the accept loop.
        sock, addr = self.socket.accept()
        if self.tls is None:
            return sock, addr
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):  # (a client hanging up is expected)
            super().handle_error(request, client_address)


class App:
    """State shared by the three servers: the contents, the tokens, the counters, the log."""

    def __init__(self, opts, good: Content):
        self.opts = opts
        self.content = {name: mode.content(good) for name, mode in MODES.items()}
        self.lock = threading.Lock()
        self.counts = {}
        self.tokens = {}  # token -> (repositories, expiry)
        self.secret = secrets.token_bytes(32)
        self.stopping = threading.Event()
        self.url = self.storage = self.plain_storage = None

    def log(self, entry):
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self.lock, open(self.opts.log, "a") as f:
            f.write(line)

    def count(self, key) -> int:
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            return self.counts[key]

    def basic_user(self, header: str):
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(value).decode().partition(":")
        except ValueError:
            return None
        ok = (hmac.compare_digest(user, self.opts.user)
              and hmac.compare_digest(password, self.opts.password))
        return user if ok else None

    def new_token(self, repos):
        token = "hostile-" + secrets.token_urlsafe(24)
        lifetime = self.opts.token_lifetime
        with self.lock:
            self.tokens[token] = (frozenset(repos), time.time() + lifetime)
        return token, lifetime

    def check_token(self, header: str, name) -> str:
        """'ok', None (no token: a plain challenge) or 'invalid_token' / 'insufficient_scope'."""
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        with self.lock:
            repos, expiry = self.tokens.get(token, (None, 0))
        if repos is None or time.time() >= expiry:
            return "invalid_token"
        if name is not None and name not in repos:
            return "insufficient_scope"
        return "ok"

    def storage_url(self, repo, digest, plain) -> str:
        expires = str(int(time.time()) + 300)
        sig = hmac.new(self.secret, f"{repo}|{digest}|{expires}".encode(), "sha256").hexdigest()
        query = urllib.parse.urlencode({"repo": repo, "expires": expires, "sig": sig})
        return f"{self.plain_storage if plain else self.storage}/blobs/{digest}?{query}"

    def check_signature(self, repo, digest, query) -> bool:
        expires, sig = query.get("expires", ["0"])[0], query.get("sig", [""])[0]
        want = hmac.new(self.secret, f"{repo}|{digest}|{expires}".encode(), "sha256").hexdigest()
        return hmac.compare_digest(sig, want) and expires.isdigit() and \
            int(expires) >= time.time()


def tls_context(opts):
    if opts.plain:
        return None, None
    ca = None
    if not opts.cert:
        tls_dir = pathlib.Path(opts.tls_dir or os.path.dirname(os.path.abspath(opts.log)))
        subprocess.run([str(pathlib.Path(__file__).with_name("make-certs")), str(tls_dir)],
                       check=True)
        opts.cert, opts.key, ca = (str(tls_dir / "server.pem"), str(tls_dir / "server.key"),
                                   str(tls_dir / "ca.pem"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(opts.cert, opts.key)
    return context, ca


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", required=True, help="an OCI layout directory")
    p.add_argument("--ref", help="its tag to serve (default: its first manifest)")
    p.add_argument("--log", required=True, help="one JSON line per request")
    p.add_argument("--plain", action="store_true", help="HTTP instead of TLS")
    p.add_argument("--cert", help="TLS certificate (PEM) for 127.0.0.1")
    p.add_argument("--key", help="its key")
    p.add_argument("--tls-dir", help="where make-certs writes the CA (default: the log's dir)")
    p.add_argument("--auth", choices=["none", "basic", "bearer", "badchallenge"], default="none",
                   help="what /v2/ and every repository require")
    p.add_argument("--user", default="evalbox")
    p.add_argument("--password", default="hostile-secret")
    p.add_argument("--token-lifetime", type=int, default=60, help="seconds")
    p.add_argument("--ready-file", help="also write the ports' JSON here (atomically)")
    if "--list-modes" in sys.argv[1:]:  # (needs no other option)
        for name, mode in MODES.items():
            print(f"{name + '/img':20} {mode.about}")
        return 0
    opts = p.parse_args()
    if bool(opts.cert) != bool(opts.key):
        p.error("--cert and --key go together")

    app = App(opts, load_image(pathlib.Path(opts.image), opts.ref))
    tls, ca = tls_context(opts)
    servers = [Server(app, "registry", tls), Server(app, "storage", tls),
               Server(app, "storage-plain", None)]
    scheme = "http" if tls is None else "https"
    ports = [s.server_address[1] for s in servers]
    app.url = f"{scheme}://127.0.0.1:{ports[0]}"
    app.storage = f"{scheme}://127.0.0.1:{ports[1]}"
    app.plain_storage = f"http://127.0.0.1:{ports[2]}"
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()

    ready = json.dumps({"port": ports[0], "storage_port": ports[1],
                        "plain_storage_port": ports[2], "url": app.url, "ca": ca,
                        "user": opts.user, "password": opts.password, "log": opts.log})
    if opts.ready_file:
        with open(opts.ready_file + ".tmp", "w") as f:
            f.write(ready + "\n")
        os.rename(opts.ready_file + ".tmp", opts.ready_file)
    print(ready, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1):
            pass
    except KeyboardInterrupt:
        pass
    app.stopping.set()
    for server in servers:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
