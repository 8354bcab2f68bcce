#!/usr/bin/env python3
"""A STAND-IN for the Hugging Face Hub's file API, for tests on the simulated hosts (no hub is reachable here).

It serves model repos made from local directories with the parts of the Hub's HTTP API that huggingface_hub's
model_info and hf_hub_download use, and nothing else:

  GET  /api/models/OWNER/NAME/revision/REV      {"id", "sha", "siblings": [{"rfilename", "size", "blobId", "lfs"}]}
  HEAD /OWNER/NAME/resolve/REV/PATH             X-Repo-Commit, ETag / X-Linked-Etag, Content-Length / X-Linked-Size
  GET  /OWNER/NAME/resolve/REV/PATH             the bytes; Range: bytes=N- answers 206 from N (resume)

A repo's commit is the sha1 of its files' names and checksums; REV is that commit or the branch `main`. Files of
1 KiB or more are LFS files (their ETag is the sha256, as on the Hub), the others plain git blobs (ETag: blob id).
Errors are the Hub's: 404 with X-Error-Code RepoNotFound / RevisionNotFound, 401 for a wrong token. Every request
is logged as a JSON line (method, path, range, status, bytes sent, whether it carried the right token).

  hub_standin.py --bind ADDR --port N --repo OWNER/NAME=DIR [--token T] [--log FILE] [--rate-file FILE]
                 [--corrupt OWNER/NAME:FILE] [--extra OWNER/NAME=LISTING]

--rate-file: a file holding a byte rate per second that file bodies are sent at (read per chunk; absent: full
speed), so a test can slow a download down and cut it mid-file. --corrupt: that file's bytes are sent with the
first one flipped while its metadata keeps the true checksum (a transfer gone wrong). --extra: LISTING is a JSON
object {rfilename: local file}: the repo lists those files too, under names no directory could hold (a hostile
listing: `../x`, an absolute path, a line break), served from the local files. Paths in URLs are unquoted, as the
Hub does.
"""

import argparse
import hashlib
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse

LFS_MIN = 1024


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, name, directory, extra=None):
        self.name = name
        self.files = {}
        # where each listed file's bytes are: the directory's files, then the extra listing's
        self.paths = {f: os.path.join(directory, f) for f in sorted(os.listdir(directory))}
        self.paths = {f: p for f, p in self.paths.items() if os.path.isfile(p)}
        self.paths.update(extra or {})
        for f, p in self.paths.items():
            data = open(p, "rb").read()
            entry = {"rfilename": f, "size": len(data), "blobId": git_blob_id(data)}
            if len(data) >= LFS_MIN:
                entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                entry["blobId"] = git_blob_id(b"version https://git-lfs.github.com/spec/v1\n")
            self.files[f] = entry
        listing = json.dumps(sorted((f, e.get("lfs", {}).get("sha256", e["blobId"])) for f, e in self.files.items()))
        self.commit = hashlib.sha1(listing.encode()).hexdigest()

    def resolve(self, rev):
        return self.commit if rev in (self.commit, "main") else None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hub-standin"

    def log_message(self, *_):
        pass

    def record(self, status, sent=0):
        if self.server.log_file:
            line = {"method": self.command, "path": self.path, "range": self.headers.get("Range"), "status": status,
                    "bytes": sent, "token": self.headers.get("Authorization") == f"Bearer {self.server.token}",
                    "at": time.time()}
            with self.server.lock, open(self.server.log_file, "a") as f:
                f.write(json.dumps(line) + "\n")

    def answer(self, status, body=b"", headers=None, error_code=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if error_code:
            self.send_header("X-Error-Code", error_code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.record(status, len(body) if self.command != "HEAD" else 0)

    def error(self, status, code, message):
        self.answer(status, json.dumps({"error": message}).encode(), {"Content-Type": "application/json"}, code)

    def authorized(self):
        got = self.headers.get("Authorization")
        if self.server.token is None:
            return True
        if got is None:
            self.error(401, "RepoNotFound", "Repository not found (this repo needs a token)")
            return False
        if got != f"Bearer {self.server.token}":
            self.error(401, None, "Invalid credentials in Authorization header")
            return False
        return True

    def repo_and_rev(self, owner, name, rev):
        repo = self.server.repos.get(f"{owner}/{name}")
        if repo is None:
            self.error(404, "RepoNotFound", "Repository not found")
            return None, None
        commit = repo.resolve(rev)
        if commit is None:
            self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None, None
        return repo, commit

    def do_GET(self):
        self.route()

    def do_HEAD(self):
        self.route()

    def route(self):
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/api/models/([^/]+)/([^/]+)/revision/([^/]+)", path)
        if m:
            return self.info(*m.groups())
        m = re.fullmatch(r"/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            return self.file(*m.groups()[:3], urllib.parse.unquote(m.group(4)))
        self.error(404, None, "Not found")

    def info(self, owner, name, rev):
        if not self.authorized():
            return
        repo, commit = self.repo_and_rev(owner, name, rev)
        if repo is None:
            return
        body = {"_id": commit[:24], "id": repo.name, "modelId": repo.name, "sha": commit, "private": False,
                "siblings": list(repo.files.values()), "tags": [], "downloads": 0, "likes": 0}
        self.answer(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def file(self, owner, name, rev, fname):
        if not self.authorized():
            return
        repo, commit = self.repo_and_rev(owner, name, rev)
        if repo is None:
            return
        entry = repo.files.get(fname)
        if entry is None:
            return self.error(404, "EntryNotFound", f"{fname} is not in {repo.name}@{commit}")
        size = entry["size"]
        etag = entry["lfs"]["sha256"] if "lfs" in entry else entry["blobId"]
        headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"', "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        if "lfs" in entry:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(size)})
        start = 0
        rng = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if rng and self.command == "GET":
            start = int(rng.group(1))
        status = 206 if start else 200
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        sent = 0
        if self.command == "GET":
            try:
                flip = start == 0 and f"{repo.name}:{fname}" in self.server.corrupt
                sent = self.send_body(repo.paths[fname], start, flip)
            except (BrokenPipeError, ConnectionResetError):
                pass
        self.record(status, sent)

    def send_body(self, path, start, flip=False):
        sent = 0
        with open(path, "rb") as f:
            f.seek(start)
            while True:
                rate = self.server.rate()
                chunk = f.read(min(16384, rate) if rate else 1 << 20)
                if not chunk:
                    return sent
                if flip and sent == 0:
                    chunk = bytes([chunk[0] ^ 0xFF]) + chunk[1:]
                self.wfile.write(chunk)
                self.wfile.flush()
                sent += len(chunk)
                if rate:
                    time.sleep(len(chunk) / rate)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def rate(self):
        try:
            return int(open(self.rate_file).read().strip() or 0) if self.rate_file else 0
        except (OSError, ValueError):
            return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--repo", action="append", default=[], help="OWNER/NAME=DIR")
    ap.add_argument("--token")
    ap.add_argument("--log")
    ap.add_argument("--rate-file")
    ap.add_argument("--corrupt", action="append", default=[], help="OWNER/NAME:FILE")
    ap.add_argument("--extra", action="append", default=[], help="OWNER/NAME=LISTING (JSON: {rfilename: local file})")
    a = ap.parse_args()
    server = Server((a.bind, a.port), Handler)
    server.repos = {}
    extra = {}
    for spec in a.extra:
        name, listing = spec.split("=", 1)
        extra[name] = json.load(open(listing))
    for spec in a.repo:
        name, directory = spec.split("=", 1)
        server.repos[name] = Repo(name, directory, extra.get(name))
    server.token, server.log_file, server.rate_file, server.corrupt = a.token, a.log, a.rate_file, set(a.corrupt)
    server.lock = threading.Lock()
    ready = {"url": f"http://{a.bind}:{server.server_address[1]}", "commits": {n: r.commit for n, r in server.repos.items()}}
    print(json.dumps(ready), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
