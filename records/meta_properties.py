"""``meta.properties``: the file at the root of every Kafka log directory that says whose it is.

Versions 0 (ZooKeeper brokers: ``broker.id``), 1 (KRaft: ``cluster.id``, ``node.id``) and the
KIP-858 fields ``directory.id`` (this directory's uuid) and ``directory.ids`` (every configured
directory's uuid, comma-separated, order irrelevant). Kafka kept the version at 1 when it added the
directory fields (for downgrades); the KIP's first drafts called that version 2, which is read too.

The text is Java's ``Properties`` format (``key=value``, ``#``/``!`` comments, backslash escapes,
ISO-8859-1). Writing is atomic, as Kafka's ``PropertiesUtils.writePropertiesFile``: a temporary
file, fsync, rename, fsync of the directory. Which ids a directory should get is decided
elsewhere (``statemachine.kraft.startup``): this module only reads and writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import msgspec

from .types import check_uuid, uuid_to_ints

FILE_NAME = "meta.properties"
VERSIONS = (0, 1, 2)

_KNOWN = ("version", "cluster.id", "node.id", "broker.id", "directory.id", "directory.ids")


class MetaPropertiesError(ValueError):
    """A ``meta.properties`` file that cannot be used; the message names the file and the key."""


class MetaProperties(msgspec.Struct, frozen=True, kw_only=True):
    version: int = 1
    cluster_id: str | None = None
    node_id: int | None = None
    """``node.id`` (v1+), or ``broker.id`` of a v0 file."""
    directory_id: str | None = None
    directory_ids: tuple[str, ...] | None = None
    """None: the file has no ``directory.ids`` (every file Kafka itself writes)."""
    other: tuple[tuple[str, str], ...] = ()
    """Keys kraftlake does not know, kept as they were (sorted) so a rewrite loses nothing."""

    def properties(self) -> dict[str, str]:
        """The key/value pairs of the file, in the order they are written."""
        out = {"version": str(self.version)}
        if self.cluster_id is not None:
            out["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            out["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            out["directory.id"] = self.directory_id
        if self.directory_ids is not None:
            out["directory.ids"] = ",".join(sorted(self.directory_ids, key=uuid_to_ints))
        out.update(self.other)
        return out


# -- Java's Properties text ------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterator[str]:
    """Lines with continuations joined (a line ending in an odd number of backslashes goes on)."""
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f") if pending else raw
        if not pending and (not line.strip() or line.lstrip(" \t\f")[:1] in ("#", "!")):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and i + 6 <= len(s):
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    text = "".join(out)
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):  # \u surrogate pairs -> one character
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def parse_properties(text: str) -> dict[str, str]:
    """Java's ``Properties.load``: keys end at the first unescaped ``=``, ``:`` or blank."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        line = line.lstrip(" \t\f")
        i, n = 0, len(line)
        while i < n and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        out[_unescape(key)] = _unescape(line[i:])
    return out


def _escape(s: str, *, key: bool) -> str:
    out = []
    for j, ch in enumerate(s):
        if ch == " " and (key or j == 0):
            out.append("\\ ")
        elif ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ord(ch) > 0xFFFF:  # Java's chars are UTF-16: a surrogate pair
            hi, lo = divmod(ord(ch) - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + hi:04X}\\u{0xDC00 + lo:04X}")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def render_properties(props: dict[str, str], comment: str = "") -> str:
    head = f"#{comment}\n" if comment else ""
    return head + "".join(f"{_escape(k, key=True)}={_escape(v, key=False)}\n" for k, v in props.items())


# -- meta.properties -------------------------------------------------------------------------------


def _uuid(where: str, key: str, value: str) -> str:
    value = value.strip()
    try:
        check_uuid(key, value)
    except ValueError as exc:
        raise MetaPropertiesError(f"{where}: `{key}` {value!r} is not a Kafka uuid ({exc})") from None
    return value


def parse(text: str, where: str = FILE_NAME) -> MetaProperties:
    """The file's meaning, checked as Kafka's ``MetaProperties.Builder`` does (v1+ needs
    ``cluster.id`` and ``node.id``; ``directory.id`` must be a uuid); ``where`` names the file
    in errors."""
    props = parse_properties(text)
    raw_version = props.get("version", "0").strip()
    try:
        version = int(raw_version)
    except ValueError:
        raise MetaPropertiesError(f"{where}: `version` {raw_version!r} is not a number") from None
    if version not in VERSIONS:
        raise MetaPropertiesError(f"{where}: `version` {version} is not one of {', '.join(map(str, VERSIONS))}")
    id_key = "broker.id" if version == 0 else "node.id"
    node_id = None
    if id_key in props:
        try:
            node_id = int(props[id_key].strip())
        except ValueError:
            raise MetaPropertiesError(f"{where}: `{id_key}` {props[id_key]!r} is not a number") from None
        if node_id < 0:
            raise MetaPropertiesError(f"{where}: `{id_key}` {node_id} is negative")
    elif version >= 1:
        raise MetaPropertiesError(f"{where}: `node.id` was not found (version {version} needs it)")
    cluster_id = props.get("cluster.id")
    if cluster_id is None and version >= 1:
        raise MetaPropertiesError(f"{where}: `cluster.id` was not found (version {version} needs it)")
    directory_id = _uuid(where, "directory.id", props["directory.id"]) if "directory.id" in props else None
    directory_ids = None
    if "directory.ids" in props:
        items = [s for s in props["directory.ids"].split(",") if s.strip()]
        directory_ids = tuple(_uuid(where, "directory.ids", s) for s in items)
        if len(set(directory_ids)) != len(directory_ids):
            raise MetaPropertiesError(f"{where}: `directory.ids` lists an id twice")
    other = tuple(sorted((k, v) for k, v in props.items() if k not in _KNOWN))
    return MetaProperties(
        version=version,
        cluster_id=cluster_id,
        node_id=node_id,
        directory_id=directory_id,
        directory_ids=directory_ids,
        other=other,
    )


def render(meta: MetaProperties) -> str:
    return render_properties(meta.properties(), comment="written by kraftlake")


def read(directory: str | os.PathLike) -> MetaProperties | None:
    """The ``meta.properties`` of a log directory; None when the directory has none (an empty,
    unformatted directory). Raises ``MetaPropertiesError`` for a bad file, ``OSError`` when the
    directory cannot be read."""
    path = Path(directory) / FILE_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return parse(raw.decode("latin-1"), str(path))


def write(directory: str | os.PathLike, meta: MetaProperties) -> Path:
    """Write ``meta`` atomically into ``directory`` (created if missing)."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    tmp = folder / (FILE_NAME + ".tmp")
    with open(tmp, "wb") as f:
        f.write(render(meta).encode("latin-1"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path
