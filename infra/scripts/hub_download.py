"""model.hub's download (infra/providers/hubModel.ts): runs once, on the source node, inside the cluster's own image
(huggingface_hub is a dependency of vLLM), as the login user, with the model directory mounted at the same path.

    python3 hub_download.py REPO COMMIT DEST      (the token, possibly empty, on stdin; never argv or environment)

The client finds the files (model_info), their headers and HTTP session (build_hf_headers, get_session) and the
endpoint's URL template; each file is fetched into DEST/.cache/vllm-cluster/NAME.partial and a cut transfer
continues there with a Range request on the next run (huggingface_hub itself starts a download over in every new
process). Every
file is checked against the Hub's own checksum (the LFS sha256 for LFS files, the git blob id for the others)
before it is moved into DEST as a regular file; any symlink in DEST (a cache layout) is replaced by its file. A file
already in place with the Hub's checksum is not fetched again. Prints one JSON line: what was done.
Exits 3 naming the cause when the Hub refuses (no such repo or revision, a bad token), 4 on a checksum mismatch.

The Hub's listing is not trusted: before anything is fetched, every file name must be a plain relative path (no
empty, `.` or `..` part, no backslash or control character), outside this script's own `.cache/vllm-cluster` and
marker file, and land under DEST once links already there are followed; otherwise it exits 5 naming the file and
fetches nothing. Each URL is built from the name, every part quoted, so no request leaves /resolve/<commit>/.
Works with huggingface_hub 0.x (a requests session) and 1.x and later (httpx).
"""

import hashlib
import json
import os
import posixpath
import shutil
import sys
import unicodedata
from urllib.parse import quote, urlsplit

MARKER = ".vllm-cluster-hub.json"
# where cut transfers wait to be continued, under DEST
WORK = (".cache", "vllm-cluster")


def fail(code, message):
    print(f"hub download: {message}", file=sys.stderr)
    sys.exit(code)


def file_sum(path, algo, prefix=b""):
    h = hashlib.new(algo)
    h.update(prefix)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def matches(path, sibling):
    """Whether the file at path is the Hub's file: its LFS sha256, or its git blob id (sha1 of 'blob <size>\\0' + bytes)."""
    if not os.path.isfile(path) or os.path.islink(path):
        return False
    size = os.path.getsize(path)
    if sibling.lfs is not None:
        return size == sibling.lfs.size and file_sum(path, "sha256") == sibling.lfs.sha256
    if sibling.blob_id is None:
        fail(4, f"{sibling.rfilename}: the Hub gave no checksum for it")
    return file_sum(path, "sha1", b"blob %d\0" % size) == sibling.blob_id


def resolve_links(dest):
    """The served directory holds files only: a link (the Hub's cache layout) becomes a copy of what it points to."""
    for root, _dirs, files in os.walk(dest):
        for name in files:
            p = os.path.join(root, name)
            if os.path.islink(p):
                target = os.path.realpath(p)
                os.unlink(p)
                shutil.copyfile(target, p)


def name_problem(name):
    """Why a file name from the Hub's listing cannot be a file under DEST, or None."""
    if not isinstance(name, str) or name == "":
        return "an empty name"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        return "a control character in it"
    if "\\" in name:
        return "a backslash in it"
    if name.startswith("/"):
        return "an absolute name"
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "an empty, '.' or '..' part"
    if name in (MARKER, MARKER + ".tmp") or tuple(parts[: len(WORK)]) == WORK:
        return "a name this download keeps for its own files"
    return None


def under(root, path):
    """Whether path, links followed, is inside root, links followed."""
    top = os.path.realpath(root)
    return os.path.realpath(path).startswith(top + os.sep)


def check_listing(repo, commit, siblings, dest):
    """Refuses the whole listing (exit 5, nothing fetched) when one name could land anywhere but a file under DEST."""
    for s in siblings:
        why = name_problem(s.rfilename)
        if why is None and not under(dest, os.path.join(dest, s.rfilename)):
            why = "it would land outside the model directory (a link on its way there)"
        if why is None and not under(dest, partial_path(dest, s.rfilename)):
            why = f"its partial download would land outside the model directory (a link on {os.path.join(*WORK)})"
        if why is not None:
            fail(5, f"{repo}@{commit} lists a file named {s.rfilename!r}: {why}; nothing was downloaded")


def partial_path(dest, name):
    return os.path.join(dest, *WORK, name + ".partial")


def file_url(repo, commit, name):
    """The file's URL on the endpoint, every part of its name quoted: the path stays under /resolve/<commit>/."""
    from huggingface_hub import constants

    quoted = "/".join(quote(p, safe="") for p in name.split("/"))
    url = constants.HUGGINGFACE_CO_URL_TEMPLATE.format(repo_id=repo, revision=commit, filename=quoted)
    base = urlsplit(constants.HUGGINGFACE_CO_URL_TEMPLATE.format(repo_id=repo, revision=commit, filename="")).path
    path = urlsplit(url).path
    if not path.startswith(base) or posixpath.normpath(path) != path:
        fail(5, f"{repo}@{commit}: the URL of {name!r} would leave {base}; nothing more was downloaded")
    return url


def open_session_get(session, url, headers):
    """A streamed GET and how to read it: httpx (huggingface_hub 1.x and later) or requests (0.x)."""
    if callable(getattr(session, "stream", None)):
        return session.stream("GET", url, headers=headers, follow_redirects=True, timeout=60), lambda r: r.iter_bytes(1 << 20)
    # a requests.Session has a `stream` attribute too: the default of its `stream` argument, a bool
    return session.get(url, headers=headers, stream=True, timeout=60), lambda r: r.iter_content(1 << 20)


def model_info(api, repo, commit):
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        return api.model_info(repo, revision=commit, files_metadata=True)
    except RevisionNotFoundError:
        fail(3, f"revision {commit} is not in {repo}")
    except GatedRepoError:
        fail(3, f"{repo} is gated: the token (hfToken) must belong to an account that accepted its terms")
    except RepositoryNotFoundError as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status == 401:
            fail(3, f"{repo}: the Hub refused the token (hfToken): 401 invalid credentials, or no such repo")
        fail(3, f"no repo {repo} on the Hub (or it is private and needs hfToken)")
    except HfHubHTTPError as e:
        fail(3, f"{repo}@{commit}: the Hub answered {e}")
    except OSError as e:
        fail(3, f"cannot reach the Hub for {repo}: {e}")


def fetch(repo, commit, sibling, dest, token):
    """Fetches one file into its .partial, continuing one a cut run left, then verifies and moves it into place."""
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    name = sibling.rfilename
    size = sibling.lfs.size if sibling.lfs is not None else sibling.size
    partial = partial_path(dest, name)
    os.makedirs(os.path.dirname(partial), exist_ok=True)
    have = os.path.getsize(partial) if os.path.isfile(partial) and not os.path.islink(partial) else 0
    if size is not None and have > size:
        have = 0
    headers = build_hf_headers(token=token)
    headers["Accept-Encoding"] = "identity"
    if have:
        headers["Range"] = f"bytes={have}-"
    url = file_url(repo, commit, name)
    # never through a link planted where the partial file goes
    fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | (0 if have else os.O_TRUNC), 0o644)
    with os.fdopen(fd, "r+b") as out:
        out.seek(have)
        response, chunks = open_session_get(get_session(), url, headers)
        with response as r:
            hf_raise_for_status(r)
            if have and r.status_code != 206:  # the server sent it all again: start over
                out.seek(0)
                out.truncate()
            for chunk in chunks(r):
                out.write(chunk)
                out.flush()
        out.truncate()
    if not matches(partial, sibling):
        want = sibling.lfs.sha256 if sibling.lfs is not None else sibling.blob_id
        os.replace(partial, partial + ".rejected")
        fail(4, f"{name}: downloaded, but its checksum is not the Hub's ({want}); kept aside as {partial}.rejected")
    final = os.path.join(dest, name)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    if not under(dest, final):
        fail(5, f"{name}: the way to it left the model directory while it downloaded (a link appeared); not moved into place")
    if os.path.islink(final):
        os.unlink(final)
    os.replace(partial, final)


def main():
    repo, commit, dest = sys.argv[1:4]
    token = sys.stdin.read().strip() or None
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    info = model_info(api, repo, commit)
    if info.sha != commit:
        fail(3, f"{repo}: revision {commit} resolves to commit {info.sha}; give the full commit hash")
    siblings = sorted(info.siblings or [], key=lambda s: s.rfilename)
    if not siblings:
        fail(3, f"{repo}@{commit} has no files")
    os.makedirs(dest, exist_ok=True)
    check_listing(repo, commit, siblings, dest)
    resolve_links(dest)
    fetched = []
    for s in siblings:
        if matches(os.path.join(dest, s.rfilename), s):
            continue
        fetch(repo, commit, s, dest, token)
        fetched.append(s.rfilename)
    shutil.rmtree(os.path.join(dest, *WORK), ignore_errors=True)
    try:
        os.rmdir(os.path.join(dest, ".cache"))
    except OSError:
        pass
    total = sum(os.path.getsize(os.path.join(dest, s.rfilename)) for s in siblings)
    marker = os.path.join(dest, MARKER)
    with open(marker + ".tmp", "w") as f:
        json.dump({"repo": repo, "commit": commit, "files": [s.rfilename for s in siblings]}, f)
    os.replace(marker + ".tmp", marker)
    print(json.dumps({"commit": commit, "files": len(siblings), "bytes": total, "fetched": fetched}))


if __name__ == "__main__":
    main()
