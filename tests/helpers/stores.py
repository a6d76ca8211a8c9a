"""Doing away with a log's files under its writers: on disk, or on S3 the whole bucket."""

from __future__ import annotations

import os

import pytest


def wipe(uri: str, request: pytest.FixtureRequest) -> None:
    """Delete every file of the log at ``uri``: on disk its commits and data files (the
    directories stay), on S3 the whole bucket, made again empty."""
    if "://" not in uri:
        for name in os.listdir(os.path.join(uri, "_delta_log")):
            os.remove(os.path.join(uri, "_delta_log", name))
        for name in os.listdir(uri):
            if name.endswith(".parquet"):
                os.remove(os.path.join(uri, name))
        return
    bucket = request.getfixturevalue("s3_bucket")
    client = bucket.server.client()
    for key in bucket.keys():
        client.delete_object(Bucket=bucket.name, Key=key)
    client.delete_bucket(Bucket=bucket.name)
    client.create_bucket(Bucket=bucket.name)


def files(uri: str, request: pytest.FixtureRequest) -> list[str]:
    """Every file of the log at ``uri`` (relative paths on disk, keys on S3)."""
    if "://" not in uri:
        return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs)
    return sorted(request.getfixturevalue("s3_bucket").keys())
