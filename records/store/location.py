"""Where a log lives: a local path (a plain path or a ``file://`` URI) or an object-store URI
(``s3://``, ``gs://``, ``az://``, ``abfss://``… whatever delta-rs opens), with its storage options.

``Location`` is the one place that knows the difference. The table itself is always opened by
delta-rs with ``storage_options`` (delta-rs's option names; without them delta-rs reads the
standard environment variables, ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``…). The files kraftlake
reads and writes beside delta-rs (data files, commit files read while following other writers,
the snapshots' Parquet files) go through a ``pyarrow.fs`` file system built from the same options:
pyarrow's native S3 client for ``s3://``, delta-rs's own object store (``DeltaStorageHandler``) for
the others. On S3 the table's own files (data and commit files) go through obstore instead
(object_store, as in delta-rs): one request each, and the conditional put that creates a
commit file only if absent. An unknown scheme is refused before anything is created, instead
of becoming a local folder named after it (``Path("s3://b/x")`` is ``s3:/b/x``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import unquote, urlsplit

from ..errors import UnsupportedLocationError

if TYPE_CHECKING:  # pyarrow loads on first use: the CLI parses its options without it
    import pyarrow.fs as pafs
    from obstore.store import ClientConfig, S3Config

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

OBJECT_STORES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "azure", "lakefs")
"""Schemes delta-rs opens (its object stores); kraftlake adds no code of its own for any of them."""

_S3_KEYS = {
    # delta-rs / object_store option names (case-insensitive, with or without ``aws_``) -> ours
    "access_key_id": "access_key",
    "secret_access_key": "secret_key",
    "session_token": "session_token",
    "token": "session_token",
    "region": "region",
    "default_region": "region",
    "endpoint": "endpoint",
    "endpoint_url": "endpoint",
    "endpoint_url_s3": "endpoint",
    "allow_http": "allow_http",
    # what decides the commit path and the client (``Location.commits_by_put``, ``_on_s3``)
    "s3_locking_provider": "locking_provider",
    "s3_allow_unsafe_rename": "unsafe_rename",
    "profile": "profile",
}


def _s3_option(key: str) -> str | None:
    k = key.lower()
    return _S3_KEYS.get(k.removeprefix("aws_"))


@dataclass(frozen=True)
class Location:
    """A table's place: ``uri`` (what delta-rs opens: an absolute local path, or the URI without
    a trailing slash), ``local`` (the same path when on this machine's disk, else None) and the
    ``storage_options`` delta-rs and the file system get."""

    uri: str
    local: str | None
    storage_options: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.local is not None

    @property
    def options(self) -> dict[str, str] | None:
        """``storage_options`` for delta-rs: None when there are none (delta-rs reads the
        environment then)."""
        return dict(self.storage_options) or None

    def child(self, name: str) -> Location:
        """The location of ``name`` inside this one (``_kraftlake_snapshots``)."""
        if self.local is not None:
            return Location(os.path.join(self.local, name), os.path.join(self.local, name), self.storage_options)
        return Location(f"{self.uri}/{name}", None, self.storage_options)

    def join(self, rel: str) -> str:
        """``rel`` (a path relative to the table, as in an ``add`` action) as a path of
        ``filesystem``."""
        if self.local is not None:
            return os.path.join(self.local, rel)
        return f"{self._fs_root}/{unquote(rel)}" if self._fs_root else unquote(rel)

    # -- the file system beside delta-rs ------------------------------------------------------

    @cached_property
    def _fs_and_root(self) -> tuple[pafs.FileSystem, str]:
        import pyarrow.fs as pafs

        if self.local is not None:
            return pafs.LocalFileSystem(), self.local
        scheme, rest = self.uri.split("://", 1)
        if scheme.lower() in ("s3", "s3a"):
            return s3_filesystem(self.storage_options), rest
        from deltalake.fs import DeltaStorageHandler

        handler = DeltaStorageHandler(self.uri, dict(self.storage_options))
        return pafs.PyFileSystem(handler), ""

    @cached_property
    def commits_by_put(self) -> bool:
        """Whether the log writes its commit files itself, each created only if absent: on
        local disk (``link(2)``), and on S3 (a conditional put, ``If-None-Match: *``), unless
        the options or the environment ask for delta-rs's commit (``S3_COMMIT_VARIABLE``, or a
        locking provider or unsafe renames: what a store without conditional puts needs, which
        delta-rs then does) or the credentials are a profile's (``_on_s3``). Elsewhere, and then,
        delta-rs commits (``store_commit``)."""
        if self.local is not None:
            return True
        if not self._on_s3:
            return False
        choice = os.environ.get(S3_COMMIT_VARIABLE, "put").strip().lower()
        if choice not in ("put", "delta-rs"):
            raise UnsupportedLocationError(f"{S3_COMMIT_VARIABLE}={choice!r}: expected put or delta-rs")
        if choice == "delta-rs":
            return False
        settings = _s3_settings(self.storage_options)
        return not settings.get("locking_provider") and not _true(settings.get("unsafe_rename"))

    def put_new(self, rel: str, body: bytes) -> object | None:
        """Create the table's file ``rel`` holding ``body`` unless it exists, on an object store
        where ``commits_by_put``: the file's ``identity`` when this call created it; None when it
        was there before. A put whose answer was lost and that object_store retried finds its own
        bytes there: that is this call's file."""
        import obstore
        from obstore.exceptions import AlreadyExistsError

        try:
            with storage_errors(self):
                put = obstore.put(self._object_store, unquote(rel), body, mode="create")
        except AlreadyExistsError:
            return self.identity(rel) if self.read(rel) == body else None
        return ("etag", put["e_tag"]) if put.get("e_tag") else self.identity(rel)

    def identity(self, rel: str) -> object | None:
        """What tells the table's file ``rel`` from another file of that name, or None when
        there is none: its inode, size and time on disk (``delta_commit.file_identity``); its
        ETag on S3, else its size and time. One ``stat`` or ``HEAD``."""
        if self.local is not None:
            from .delta_commit import file_identity

            try:
                return file_identity(os.stat(os.path.join(self.local, rel)))
            except FileNotFoundError:
                return None
        if self._on_s3:
            import obstore
            from obstore.exceptions import NotFoundError

            try:
                with storage_errors(self):
                    meta = obstore.head(self._object_store, unquote(rel))
            except (NotFoundError, FileNotFoundError):
                return None
            return ("etag", meta["e_tag"]) if meta.get("e_tag") else (meta["size"], meta["last_modified"])
        import pyarrow.fs as pafs

        info = self.filesystem.get_file_info(self.join(rel))
        return None if info.type == pafs.FileType.NotFound else (info.size, info.mtime_ns)

    @cached_property
    def _on_s3(self) -> bool:
        """Whether the table's own files (data and commit files) go through obstore's S3 client:
        one request each, where pyarrow's reads with two and re-creates a directory marker
        after a delete (bench/RESULTS.md). Not where the credentials would come from a shared
        profile (``~/.aws``, ``AWS_PROFILE``), which obstore does not read and delta-rs and
        pyarrow do: such a log keeps pyarrow's client and delta-rs's commit."""
        if self.local is not None or self.uri.split("://", 1)[0].lower() not in ("s3", "s3a"):
            return False
        return not _profile_credentials(self.storage_options)

    @cached_property
    def _object_store(self) -> Any:
        return s3_object_store(self.uri, self.storage_options)

    @property
    def filesystem(self) -> pafs.FileSystem:
        """A ``pyarrow.fs`` file system holding the table (paths from ``join``)."""
        return self._fs_and_root[0]

    @property
    def _fs_root(self) -> str:
        return self._fs_and_root[1]

    def read(self, rel: str) -> bytes | None:
        """The bytes of the table's file ``rel``, or None if it does not exist."""
        if self.local is not None:
            try:
                with open(os.path.join(self.local, rel), "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return None
        if self._on_s3:
            import obstore
            from obstore.exceptions import NotFoundError

            try:
                with storage_errors(self):
                    return obstore.get(self._object_store, unquote(rel)).bytes().to_bytes()
            except (NotFoundError, FileNotFoundError):  # obstore raises the latter for a 404
                return None
        try:
            with self.filesystem.open_input_stream(self.join(rel)) as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:  # pyarrow's S3 client says "does not exist"/NoSuchKey in an OSError
            if "NoSuchKey" in str(exc) or "does not exist" in str(exc) or "not found" in str(exc).lower():
                return None
            raise

    def write(self, rel: str, body: Any) -> None:
        """Write the table's file ``rel`` (an object store's put is atomic: whole or absent)."""
        if self._on_s3:
            import obstore

            with storage_errors(self):
                obstore.put(
                    self._object_store, unquote(rel), body if isinstance(body, bytes) else memoryview(body).tobytes()
                )
            return
        with self.filesystem.open_output_stream(self.join(rel)) as f:
            f.write(body)

    def delete(self, rel: str) -> None:
        """Delete the table's file ``rel`` if it exists."""
        try:
            if self.local is not None:
                os.remove(os.path.join(self.local, rel))
            elif self._on_s3:
                import obstore

                with storage_errors(self):
                    obstore.delete(self._object_store, unquote(rel))  # one DELETE; 204 for a missing key too
            else:
                self.filesystem.delete_file(self.join(rel))
        except FileNotFoundError:
            pass

    def listing(self, rel: str) -> list[str]:
        """The names of the table's files in its directory ``rel`` (``_delta_log``), sorted; one
        listing (a few requests on an object store)."""
        if self.local is not None:
            try:
                return sorted(os.listdir(os.path.join(self.local, rel)))
            except FileNotFoundError:
                return []
        prefix = rel.rstrip("/") + "/"
        if self._on_s3:
            import obstore

            with storage_errors(self):
                return sorted(
                    str(meta["path"]).rsplit("/", 1)[-1]
                    for batch in obstore.list(self._object_store, prefix)
                    for meta in batch
                )
        import pyarrow.fs as pafs

        infos = self.filesystem.get_file_info(pafs.FileSelector(self.join(rel), allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.File)

    def data_file_names(self) -> list[str]:
        """The names of the Parquet files at the table's root (data files, referenced or not)."""
        if self.local is not None:
            try:
                return sorted(n for n in os.listdir(self.local) if n.endswith(".parquet"))
            except FileNotFoundError:
                return []
        import pyarrow.fs as pafs

        root = self.join("").rstrip("/")
        infos = self.filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".parquet"))

    def missing(self, rels: list[str]) -> list[str]:
        """Those of the table's files ``rels`` that do not exist (one listing per call)."""
        if not rels:
            return []
        if self.local is not None:
            return [r for r in rels if not os.path.exists(os.path.join(self.local, r))]
        import pyarrow.fs as pafs

        infos = self.filesystem.get_file_info([self.join(r) for r in rels])
        return [r for r, i in zip(rels, infos) if i.type == pafs.FileType.NotFound]

    def delete_tree(self) -> None:
        """Remove everything under this location."""
        if self.local is not None:
            import shutil

            shutil.rmtree(self.local, ignore_errors=True)
            return
        fs, root = self._fs_and_root
        try:
            if root:
                fs.delete_dir(root)  # the prefix's objects, and the directory marker pyarrow may leave
            else:
                fs.delete_dir_contents("/", missing_dir_ok=True)
        except (FileNotFoundError, OSError):
            pass


def _s3_settings(storage_options: Mapping[str, str]) -> dict[str, str]:
    """The S3 settings (``_S3_KEYS``' values) the AWS environment variables and
    ``storage_options`` give, the options winning."""
    found: dict[str, str] = {}
    for source in (os.environ, storage_options):
        for key, value in source.items():
            ours = _s3_option(key)
            if ours is not None and (source is storage_options or key.upper().startswith("AWS_")):
                found[ours] = value
    return found


def _profile_credentials(storage_options: Mapping[str, str]) -> bool:
    """Whether S3 credentials would come from a shared profile (the AWS config and credentials
    files, ``AWS_PROFILE``): none are given as keys, by a web identity or by a container, and a
    profile is named or its files exist."""
    settings = _s3_settings(storage_options)
    if "access_key" in settings:
        return False
    env = os.environ
    if any(env.get(k) for k in _ROLE_VARIABLES):
        return False
    if settings.get("profile"):
        return True
    files = (
        env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.expanduser("~/.aws/credentials"),
        env.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config"),
    )
    return any(os.path.exists(f) for f in files)


_ROLE_VARIABLES = (
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
"""Credentials object_store fetches itself (a web identity, a container's), as from an
instance's metadata when nothing is set."""


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


def s3_filesystem(storage_options: Mapping[str, str]) -> pafs.S3FileSystem:
    """pyarrow's S3 client configured as delta-rs would be by the same ``storage_options`` and
    the AWS environment variables (the options win). Path-style addressing, as delta-rs's
    default."""
    import pyarrow.fs as pafs

    found = _s3_settings(storage_options)
    kwargs: dict[str, object] = {}
    if "access_key" in found and "secret_key" in found:
        kwargs |= {"access_key": found["access_key"], "secret_key": found["secret_key"]}
        if "session_token" in found:
            kwargs["session_token"] = found["session_token"]
    if "region" in found:
        kwargs["region"] = found["region"]
    endpoint = found.get("endpoint")
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme:
            kwargs["scheme"] = parts.scheme
            endpoint = parts.netloc + parts.path.rstrip("/")
        kwargs["endpoint_override"] = endpoint
    if _true(found.get("allow_http")) and "scheme" not in kwargs:
        kwargs["scheme"] = "http"
    # Fail fast instead of retrying for minutes: kraftlake says what is wrong and changes nothing.
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=3)
    kwargs["connect_timeout"] = 5
    kwargs["request_timeout"] = 30
    # A file written in one piece goes up in one PutObject, not a multipart upload of three
    # requests (pyarrow opens the upload on the first write instead of at open); a missing
    # bucket is then reported by the write, still as an error of the put.
    kwargs["allow_delayed_open"] = True
    return pafs.S3FileSystem(**kwargs)


def s3_object_store(uri: str, storage_options: Mapping[str, str]) -> Any:
    """obstore's S3 client (object_store, the crate under delta-rs) for the table at ``uri``,
    configured from the same settings as ``s3_filesystem``; its conditional put is what
    pyarrow's S3 client does not offer."""
    from obstore.store import S3Store

    found = _s3_settings(storage_options)
    names = {
        "access_key": "access_key_id",
        "secret_key": "secret_access_key",
        "session_token": "session_token",
        "region": "region",
        "endpoint": "endpoint",
    }
    config = cast("S3Config", {names[k]: v for k, v in found.items() if k in names})
    # Fail fast, as s3_filesystem does: kraftlake says what is wrong and changes nothing.
    client: ClientConfig = {"allow_http": _true(found.get("allow_http")), "connect_timeout": "5s", "timeout": "30s"}
    return S3Store.from_url(uri, config=config, client_options=client, retry_config={"max_retries": 2})


S3_COMMIT_VARIABLE = "KRAFTLAKE_S3_COMMIT"
"""``put`` (the default): an S3 log's commit files are conditional puts kraftlake makes (two
requests an append); ``delta-rs``: delta-rs's commit makes them (nine; bench/RESULTS.md)."""


def resolve(location: str | os.PathLike[str] | Location, storage_options: Mapping[str, str] | None = None) -> Location:
    """The ``Location`` of a path or URI; ``UnsupportedLocationError`` for a scheme delta-rs
    does not open (or a ``file://`` URI naming another host)."""
    if isinstance(location, Location):
        if storage_options:
            return Location(location.uri, location.local, {**location.storage_options, **storage_options})
        return location
    options = {str(k): str(v) for k, v in (storage_options or {}).items()}
    path = local_path(location)
    if path is not None:
        return Location(path, path, options)
    uri = str(location).rstrip("/")
    scheme, rest = uri.split("://", 1)
    if not rest.split("/", 1)[0]:
        raise UnsupportedLocationError(f"{location}: the URI names no bucket or container")
    return Location(uri, None, options)


def local_path(location: str | os.PathLike[str]) -> str | None:
    """The absolute local path of ``location``, or None for an object-store URI;
    ``UnsupportedLocationError`` for any other scheme (or a ``file://`` URI naming another
    host)."""
    if not isinstance(location, str):
        return os.path.abspath(os.fspath(location))
    match = _URI.match(location)
    if match is None:
        return os.path.abspath(location)
    scheme = match.group(1).lower()
    if scheme == "file":
        parts = urlsplit(location)
        if parts.netloc not in ("", "localhost"):
            raise UnsupportedLocationError(
                f"{location}: a file:// URI must name a local path on this machine (file:///path)"
            )
        return os.path.abspath(unquote(parts.path))
    if scheme in OBJECT_STORES:
        return None
    raise UnsupportedLocationError(
        f"{location}: kraftlake keeps logs on a local path, a file:// URI or an object store"
        f" ({', '.join(s + '://' for s in OBJECT_STORES)}); {scheme}:// is not one of them"
    )


def parse_storage_options(pairs: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--storage-option``, repeatable) as a dict; ValueError names a
    malformed one."""
    out: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--storage-option {pair!r}: expected KEY=VALUE (a delta-rs storage option)")
        out[key.strip()] = value
    return out


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CAUSES = (
    (("NoSuchBucket", "bucket does not exist", "ContainerNotFound"), "the bucket does not exist"),
    (("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"), "the credentials were rejected"),
    (
        ("169.254.169.254", "credential", "No AWS credentials", "MissingAuthenticationToken"),
        "no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or --storage-option)",
    ),
    (("AccessDenied", "Access Denied", "403 Forbidden", "AuthorizationFailure"), "access denied"),
    (
        ("error sending request", "Connect", "dns error", "timed out", "Couldn't connect", "Could not connect"),
        "the endpoint is unreachable",
    ),
)


def storage_cause(exc: BaseException) -> str:
    """What went wrong talking to an object store, in a few words, from delta-rs's or pyarrow's
    error (their messages hold the HTTP status and the service's error code)."""
    text = _ANSI.sub("", str(exc))
    for needles, cause in _CAUSES:
        if any(n.lower() in text.lower() for n in needles):
            return cause
    first = " ".join(text.split())[:200]
    return f"{UNKNOWN_CAUSE}: {first}"


UNKNOWN_CAUSE = "the object store failed"
"""How ``storage_cause`` begins when it recognises none of the store's failures."""


class storage_errors:  # noqa: N801 - used as ``with storage_errors(location):``
    """Turns an object store's errors (delta-rs's and pyarrow's ``OSError``s, delta-rs's
    ``DeltaError``s other than "not a table", obstore's but "not found" and "already exists")
    into a ``StorageError`` naming the URI and the cause. Local paths keep their own errors."""

    def __init__(self, location: Location) -> None:
        self.location = location

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> Literal[False]:
        if exc is None or self.location.is_local:
            return False
        from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

        from ..errors import KraftlakeError, StorageError

        if isinstance(exc, KraftlakeError):
            return False
        obstore_error = type(exc).__module__.startswith("obstore")
        if (obstore_error or isinstance(exc, FileNotFoundError)) and "NoSuchBucket" in str(exc):
            raise StorageError(f"{self.location.uri}: {storage_cause(exc)}") from exc  # obstore's 404s
        if obstore_error and type(exc).__name__ in ("NotFoundError", "AlreadyExistsError"):
            return False  # a missing or an existing object: the caller's to judge
        if obstore_error:
            raise StorageError(f"{self.location.uri}: {storage_cause(exc)}") from exc
        if isinstance(exc, (TableNotFoundError, CommitFailedError, FileNotFoundError)):
            return False
        if isinstance(exc, (OSError, DeltaError)):
            raise StorageError(f"{self.location.uri}: {storage_cause(exc)}") from exc
        return False
