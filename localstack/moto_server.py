"""moto's server (``moto_server``) with one repair to its S3 backend.

moto 5.2.5's ``list_object_versions`` deep-copies every version of every
key in the bucket before it filters them by prefix. ctx lists the versions
of one key before deleting it (a versioned bucket: see
shared/src/store/aws/s3.rs), so each delete copied the whole bucket: large
objects into temporary files, which piled up to tens of GB in one
tests/run, and a key deleted during the copy made the call fail with a 500
(``'NoneType' object is not iterable``).

The repair hands moto's own ``list_object_versions`` a view of the bucket
holding only the keys under the prefix, skipping keys deleted meanwhile.
Its answer is the same: every key it leaves out is one the original skips
by prefix.

    python moto_server.py -H 127.0.0.1 -p PORT    # as moto_server
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from moto.s3.models import S3Backend
from moto.server import main

_list_object_versions = S3Backend.list_object_versions


class _KeysUnder:
    """A bucket's key store, holding only the keys under ``prefix``."""

    def __init__(self, keys: Any, prefix: str) -> None:
        self._keys = keys
        self._prefix = prefix

    def iterlists(self) -> Iterator[tuple[str, list[Any]]]:
        for key in list(dict.keys(self._keys)):
            if not key.startswith(self._prefix):
                continue
            versions = self._keys.getlist(key)
            if versions is not None:
                yield key, versions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._keys, name)


class _BucketUnder:
    """A bucket whose ``keys`` are :class:`_KeysUnder` a prefix."""

    def __init__(self, bucket: Any, prefix: str) -> None:
        self._bucket = bucket
        self.keys = _KeysUnder(bucket.keys, prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bucket, name)


class _BackendUnder:
    """The S3 backend as ``list_object_versions`` sees it: ``get_bucket``
    answers the bucket under a prefix."""

    def __init__(self, backend: S3Backend, prefix: str) -> None:
        self._backend = backend
        self._prefix = prefix

    def get_bucket(self, bucket_name: str) -> _BucketUnder:
        return _BucketUnder(self._backend.get_bucket(bucket_name), self._prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def list_object_versions(self: S3Backend, bucket_name: str, **kwargs: Any) -> Any:
    prefix = kwargs.get("prefix") or ""
    return _list_object_versions(_BackendUnder(self, prefix), bucket_name, **kwargs)  # type: ignore[arg-type]


S3Backend.list_object_versions = list_object_versions  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
