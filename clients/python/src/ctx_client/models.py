"""The API's request and response bodies as typed dictionaries (JSON as
sent and returned), and its named values (ids, names, enumerations) as
aliases: every schema of the OpenAPI document, generated into
:mod:`ctx_client._generated`."""

from __future__ import annotations

from typing import Any

from . import _generated
from ._generated import *  # noqa: F403

__all__ = [*_generated.__all__, "JSON"]

JSON = Any
