"""API key on every route of vLLM's server but health, metrics and version.

vLLM's own key check guards only the paths under /v1, /v2, /inference and /cohere: /invocations (a completion
endpoint), /tokenize, /detokenize, /scale_elastic_ep and others answer anyone. The serve container's
entrypoint loads this module with `vllm serve ... --middleware vllm_cluster_guard.RequireKey`; it reads the key
from the file that VLLM_CLUSTER_API_KEY_FILE names (the read-only mounted key file: the key itself is in no
process's environment) and refuses every request without it, except OPEN. Without a readable, non-empty key file it
refuses everything but OPEN (fails closed). A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method,
which a browser sends without credentials by design) is answered here, as vLLM's CORS layer answers it with its
defaults: no route of the app ever sees a request without the key. Any other OPTIONS needs the key like any request.
"""

import hashlib
import os
import secrets

# Read-only, and nothing about the model or its inputs: what load balancers and Prometheus need without a key.
OPEN = frozenset(["/health", "/ping", "/metrics", "/version"])
UNAUTHORIZED = b'{"error":"Unauthorized"}'


def read_key(path):
    """The key in `path` without the trailing newlines a shell's $(cat) drops too; "" when there is none."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().rstrip("\n")
    except (OSError, UnicodeDecodeError):
        return ""


def _digest(value):
    return hashlib.sha256(value.encode("utf-8")).digest()


def authorized(headers, key):
    """True when the headers carry `Authorization: Bearer <key>` (and key is not empty)."""
    if not key:
        return False
    value = dict(headers).get(b"authorization", b"").decode("latin-1")
    scheme, _, token = value.partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(_digest(token), _digest(key))


# vLLM's defaults (--allowed-origins, --allowed-methods, --allowed-headers all "*", no credentials), as Starlette's
# CORSMiddleware answers a preflight with them; the response to the real request still carries vLLM's own headers.
PREFLIGHT_METHODS = b"DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"


def cors_preflight(scope):
    """An OPTIONS request that a browser sends before a cross-origin call: it names its Origin and the method it wants."""
    headers = dict(scope.get("headers") or [])
    return scope.get("method") == "OPTIONS" and b"origin" in headers and b"access-control-request-method" in headers


async def answer_preflight(scope, send):
    headers = dict(scope.get("headers") or [])
    out = [
        (b"access-control-allow-origin", b"*"),
        (b"access-control-allow-methods", PREFLIGHT_METHODS),
        (b"access-control-max-age", b"600"),
        (b"content-length", b"0"),
    ]
    if b"access-control-request-headers" in headers:
        out.append((b"access-control-allow-headers", headers[b"access-control-request-headers"]))
    await send({"type": "http.response.start", "status": 204, "headers": out})
    await send({"type": "http.response.body", "body": b""})


def route(scope):
    root = scope.get("root_path", "")
    path = scope.get("path", "")
    return path[len(root):] if root and path.startswith(root) else path


class RequireKey:
    """Pure ASGI middleware (vLLM adds a class given to --middleware with app.add_middleware)."""

    def __init__(self, app):
        self.app = app
        self.key = read_key(os.environ.get("VLLM_CLUSTER_API_KEY_FILE", ""))

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if scope["type"] == "http" and cors_preflight(scope):
            return await answer_preflight(scope, send)
        if route(scope) in OPEN or authorized(scope.get("headers") or [], self.key):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(UNAUTHORIZED)).encode())]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": UNAUTHORIZED})
