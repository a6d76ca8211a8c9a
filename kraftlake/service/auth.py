"""Who may do what (``kraftlake serve --tokens FILE``): bearer tokens, each naming a producer and its
roles: ``append`` (POST /v1/records, only under its own producer name, and where that producer
resumes: ``GET /v1/producers/{its name}``), ``read`` (records, views, producers, the OpenAPI schema), ``admin`` (audits, metrics, a bookie's lifecycle state). ``/healthz`` and ``/readyz`` take any valid token.

The file is JSON: ``{"tokens": [{"token": "...", "producer": "controller-1", "roles": ["append"]}]}``
(``"sha256": "<hex>"`` in place of ``"token"`` keeps the secret out of the file). Tokens are
compared as sha256 digests with ``hmac.compare_digest`` against every entry (no early exit), and
never logged. A refused request has no side effect: 401 (no or unknown token) or 403 (role).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .producers import PREFIX, BadName, producer_of

ROLES = ("append", "read", "admin")


@dataclass(frozen=True)
class Identity:
    producer: str
    roles: frozenset[str]


class TokenFileError(ValueError):
    pass


def load_tokens(path: str | Path) -> list[tuple[bytes, Identity]]:
    """(sha256 digest, identity) per entry of the file; ``TokenFileError`` names what is wrong."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TokenFileError(f"{path}: {exc}") from None
    entries = doc.get("tokens") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise TokenFileError(f'{path}: expected {{"tokens": [{{"token", "producer", "roles"}}, ...]}}')
    out = []
    for i, e in enumerate(entries):
        where = f"{path}: tokens[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("producer"), str) or not e["producer"]:
            raise TokenFileError(f"{where}: `producer` must be a non-empty string")
        roles = e.get("roles")
        if not isinstance(roles, list) or not roles or any(r not in ROLES for r in roles):
            raise TokenFileError(f"{where}: `roles` must list some of {', '.join(ROLES)}")
        if isinstance(e.get("token"), str) and e["token"]:
            digest = hashlib.sha256(e["token"].encode()).digest()
        elif isinstance(e.get("sha256"), str):
            try:
                digest = bytes.fromhex(e["sha256"])
            except ValueError:
                raise TokenFileError(f"{where}: `sha256` is not hex") from None
            if len(digest) != 32:
                raise TokenFileError(f"{where}: `sha256` must be 64 hex digits")
        else:
            raise TokenFileError(f"{where}: give `token` or `sha256`")
        out.append((digest, Identity(e["producer"], frozenset(roles))))
    return out


def identify(tokens: list[tuple[bytes, Identity]], header: str | None) -> Identity | None:
    if not header or not header.startswith("Bearer "):
        return None
    digest = hashlib.sha256(header[7:].strip().encode()).digest()
    found = None
    for known, identity in tokens:  # every entry, matched or not: no timing difference
        if hmac.compare_digest(known, digest):
            found = identity
    return found


def required_role(method: str, path: str) -> str | None:
    """The role a request needs; None: any valid token."""
    if path in ("/healthz", "/readyz"):
        return None
    if method == "POST" and path == "/v1/records":
        return "append"
    if path in ("/v1/audits", "/metrics"):
        return "admin"
    if method == "PUT" and path.startswith("/v1/bookies/"):
        return "admin"  # a bookie's lifecycle: an operator's change, appended as records
    return "read"


def auth_middleware(tokens: list[tuple[bytes, Identity]]):
    """ASGI middleware: 401 or 403 before any handler runs; the identity in ``scope["state"]``."""

    def wrap(app: Any) -> Any:
        async def middleware(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            identity = identify(tokens, headers.get("authorization"))
            if identity is None:
                await _refuse(send, 401, "a valid bearer token is needed", {"www-authenticate": "Bearer"})
                return
            role = required_role(scope["method"], scope["path"])
            if role == "read" and "append" in identity.roles and _own_producer(scope, identity):
                role = "append"  # where it resumes is part of appending (``service.producers``)
            if role is not None and role not in identity.roles:
                await _refuse(send, 403, f"this token lacks the {role!r} role")
                return
            scope.setdefault("state", {})["identity"] = identity
            await app(scope, receive, send)

        return middleware

    return wrap


def _own_producer(scope: Any, identity: Identity) -> bool:
    """Whether the request asks where the token's own producer resumes."""
    if scope["method"] != "GET" or not scope["path"].startswith(PREFIX):
        return False
    try:
        return producer_of(scope) == identity.producer
    except BadName:
        return False


async def _refuse(send: Any, status: int, message: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
