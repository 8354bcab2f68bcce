"""Layer-aware image stream, run on the source host between `docker save` and the chain (image_ends.bash):

    docker save REF | python3 image_layers.py SKIP [SPOOL_DIR]

SKIP is a comma-separated list of layer DiffIDs (sha256:<hex>) that every host receiving the stream already holds
at the same place in its layer chain; the program computes it from the hosts' own `docker image inspect`. The
archive goes out as it came in, minus the data of those layers. `docker load` only opens a layer's file when the
host lacks that layer (its chain ID), and verifies every layer it does load against the image config's DiffID,
so a host ends with the image, under the source's image ID, having received only what it lacked.

A layer is recognised by its content, never by its name: its file in the archive is hashed (sha256 of the
uncompressed layer tar, which is its DiffID) while it is spooled to SPOOL_DIR (default: TMPDIR), and it is
forwarded only when its digest is not in SKIP. Archives that name layers by digest (`blobs/sha256/<hex>`, the OCI
layout that Docker 25 and later save) are decided by name where the blob is the uncompressed layer (its name is its
DiffID, as the classic store saves every layer); a gzip-compressed blob (the containerd image store keeps and saves
layers as they were pulled or built) is named by its compressed digest, so it is spooled and its decompressed
content hashed. Everything else in the archive (manifest, config, symlinks of a layer shared by two places) passes
unchanged. A summary goes to stderr.
"""

import hashlib
import os
import re
import sys
import tarfile
import tempfile
import zlib

CHUNK = 1 << 20
BLOB = re.compile(r"^blobs/sha256/([0-9a-f]{64})$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
GZIP = b"\x1f\x8b"


class Prefixed:
    """A file object that reads `head` (already read from `rest`) and then the rest of `rest`."""

    def __init__(self, head, rest):
        self.head, self.rest = head, rest

    def read(self, n=-1):
        if not self.head:
            return self.rest.read(n)
        if n is None or n < 0 or n >= len(self.head):
            out, self.head = self.head, b""
            return out + self.rest.read(-1 if n is None or n < 0 else n - len(out))
        out, self.head = self.head[:n], self.head[n:]
        return out


class GunzipHash:
    """The sha256 of a gzip stream's decompressed bytes (every member of it), fed in chunks, in bounded memory. A
    stream that does not decompress has no digest (""): such a blob is never held back."""

    def __init__(self):
        self.hash = hashlib.sha256()
        self.z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self.members = 0
        self.done = self.bad = False

    def update(self, chunk):
        try:
            while chunk and not self.done:
                self.hash.update(self.z.decompress(chunk, CHUNK))
                if not self.z.eof:
                    chunk = self.z.unconsumed_tail
                    continue
                self.members += 1
                chunk = self.z.unused_data
                self.z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        except zlib.error:
            # bytes after a complete member that are not another one are no part of the layer; before one, no gzip
            self.done = True
            self.bad = self.members == 0

    def hexdigest(self):
        if self.bad or (self.members == 0 and not self.z.eof):
            return ""
        return self.hash.hexdigest()


def spool(m, data, first, h, spool_dir):
    """Copies the member's data (after `first`, already read) to a temp file while `h` hashes it; returns the file."""
    t = tempfile.TemporaryFile(dir=spool_dir)
    n = 0
    chunk = first
    while chunk:
        h.update(chunk)
        t.write(chunk)
        n += len(chunk)
        chunk = data.read(CHUNK)
    if n != m.size:
        t.close()
        raise EOFError(f"{m.name}: read {n} of {m.size} bytes (the save stream ended early)")
    t.seek(0)
    return t


def main(argv):
    if len(argv) not in (2, 3):
        print("image_layers: usage: image_layers.py SKIP [SPOOL_DIR]", file=sys.stderr)
        return 2
    skip = {d for d in argv[1].split(",") if d}
    bad = [d for d in skip if not DIGEST.match(d)]
    if bad:
        print(f"image_layers: not a layer digest: {bad[0]!r}", file=sys.stderr)
        return 2
    spool_dir = argv[2] if len(argv) == 3 else None
    src = tarfile.open(fileobj=sys.stdin.buffer, mode="r|")
    dst = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT)
    sent = held = 0
    sent_bytes = held_bytes = 0
    for m in src:
        if not m.isfile():
            dst.addfile(m)
            continue
        data = src.extractfile(m)
        by_name = BLOB.match(m.name[2:] if m.name.startswith("./") else m.name)
        if by_name:
            if "sha256:" + by_name.group(1) in skip:
                held, held_bytes = held + 1, held_bytes + m.size
                continue  # the stream reader skips the unread data
            first = data.read(CHUNK) if skip else b""
            if not first.startswith(GZIP):
                # an uncompressed layer not in SKIP (its name is its DiffID), or a manifest, index or config
                if first[:1] not in (b"{", b""):
                    sent, sent_bytes = sent + 1, sent_bytes + m.size
                dst.addfile(m, Prefixed(first, data))
                continue
            h = GunzipHash()
        elif m.name.endswith("/layer.tar") and skip:
            first = data.read(CHUNK)
            h = hashlib.sha256()
        else:
            dst.addfile(m, data)
            continue
        try:
            t = spool(m, data, first, h, spool_dir)
        except EOFError as e:
            print(f"image_layers: {e}", file=sys.stderr)
            return 1
        with t:
            if "sha256:" + h.hexdigest() in skip:
                held, held_bytes = held + 1, held_bytes + m.size
                continue
            dst.addfile(m, t)
            sent, sent_bytes = sent + 1, sent_bytes + m.size
    dst.close()
    sys.stdout.buffer.flush()
    print(
        f"image_layers: sent {sent} layer(s), {sent_bytes} bytes; held back {held} the receiving hosts have, {held_bytes} bytes",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv)
    except BrokenPipeError:
        # the next host's connection was cut: say so once, without a traceback or a failed flush at exit
        print("image_layers: the stream to the next host was cut (broken pipe)", file=sys.stderr)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        os._exit(1)
    sys.exit(code)
