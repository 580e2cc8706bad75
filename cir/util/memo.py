"""Results of pure computations, kept for the life of the process by a digest of their inputs.

A study's analysis fits, walks and bootstraps the same tables in several places: every router
fits the same error model on the same cells, the router over several operations fits the models
the single-operation routers already fitted, the pooled report walks and summarises each
replicate's routers on the replicate's held-out cohort as the replicate's own report did. A
function wrapped by :func:`memoized` computes each distinct input once per process: the key is
a digest of the arguments' *content* (the bytes of arrays, the values, index and dtypes of
tables), never of their identity, so a copy of a table finds the result of the original and a
table changed in place does not. Results are handed out as copies (tables, arrays), so a caller
that changes what it got cannot change what the next caller gets.

Only for deterministic functions of their arguments (the seeds are arguments). Each function
keeps its last :data:`KEPT` results; :func:`forget` empties every memo (tests).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import json
from collections import OrderedDict
from collections.abc import Callable
from pathlib import PurePath
from typing import Any, TypeVar

import numpy as np

#: Results kept per memoized function (the oldest used goes first).
KEPT = 256

F = TypeVar("F", bound=Callable[..., Any])
_MEMOS: list[OrderedDict[str, Any]] = []
_CONTENT: dict[type, Callable[[Any], Any]] = {}


class Undigestible(TypeError):
    """An argument whose content this module does not know how to digest."""


def _feed(h: Any, value: Any) -> None:
    """Feed ``value``'s type and content into the hash ``h``."""
    import pandas as pd

    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        h.update(f"{type(value).__name__}:{value!r};".encode())
    elif isinstance(value, np.ndarray):
        if value.dtype == object:  # strings (task ids): pandas hashes them by value, all at once
            flat = value.ravel()
            h.update(f"object{value.shape}{sorted({type(v).__name__ for v in flat})};".encode())
            h.update(pd.util.hash_array(flat, categorize=False).tobytes())
        else:
            h.update(f"array{value.dtype.str}{value.shape};".encode())
            h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, np.generic):
        _feed(h, value.item())
    elif isinstance(value, pd.DataFrame):  # column by column: names, dtypes, values, then the index
        h.update(f"frame{value.shape};".encode())
        _feed(h, [str(c) for c in value.columns])
        for _, column in value.items():
            _feed_values(h, column)
        _feed_values(h, value.index)
        _feed(h, dict(value.attrs))
    elif isinstance(value, pd.Series):
        h.update(f"series{len(value)};".encode())
        _feed(h, str(value.name))
        _feed_values(h, value)
        _feed_values(h, value.index)
    elif isinstance(value, list | tuple | dict) and _plain(value):  # plain data (a router's file): as JSON
        h.update(f"json:{json.dumps(value, sort_keys=True, allow_nan=True)};".encode())
    elif isinstance(value, list | tuple):
        h.update(f"{type(value).__name__}{len(value)}[".encode())
        for v in value:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(value, dict):
        h.update(f"dict{len(value)}{{".encode())
        for k in sorted(value, key=repr):
            _feed(h, k)
            _feed(h, value[k])
        h.update(b"}")
    elif isinstance(value, PurePath):
        _feed(h, str(value))
    elif type(value) in _CONTENT:  # a type that says what its content is (register)
        h.update(f"{type(value).__module__}.{type(value).__qualname__};".encode())
        _feed(h, _CONTENT[type(value)](value))
    else:
        raise Undigestible(f"no content digest for a {type(value).__qualname__}")


def _feed_values(h: Any, values: Any) -> None:
    """A column's or an index's dtype and values: numbers by their bytes, text by pandas' hashes."""
    import pandas as pd

    h.update(f"{values.dtype};".encode())
    arrow = getattr(getattr(values, "array", None), "__arrow_array__", None)
    try:  # pandas' text held by Arrow: its buffers as they are (no Python strings)
        chunks = arrow() if arrow is not None else None
    except ImportError:  # pandas' own text without pyarrow installed: its values below
        chunks = None
    if chunks is not None:
        for chunk in getattr(chunks, "chunks", [chunks]):
            h.update(f"arrow{chunk.type}{len(chunk)}+{chunk.offset};".encode())
            for buffer in chunk.buffers():
                h.update(b"-" if buffer is None else memoryview(buffer))
        return
    array = values.to_numpy() if hasattr(values, "to_numpy") else np.asarray(values)
    if array.dtype.kind in "biufcmM":
        h.update(np.ascontiguousarray(array).tobytes())
    else:
        h.update(f"{sorted({type(v).__name__ for v in array})};".encode())
        h.update(pd.util.hash_array(np.asarray(array, dtype=object), categorize=False).tobytes())


def register(cls: type, content: Callable[[Any], Any]) -> None:
    """Digest the instances of ``cls`` by ``content(instance)`` (plain data: a router's JSON)."""
    _CONTENT[cls] = content


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON's own data (str keys; str, bool, int, float, None; lists and
    dicts of them), which JSON writes exactly (every float as it is)."""
    if value is None or isinstance(value, bool | int | float | str):
        return type(value) in (type(None), bool, int, float, str)
    if depth > 20:
        return False
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False


def digest(*values: Any) -> str:
    """A digest of the content of ``values`` (arrays, tables, plain values, their lists and dicts)."""
    h = hashlib.blake2b(digest_size=20)
    for v in values:
        _feed(h, v)
    return h.hexdigest()


def _handed_out(value: Any) -> Any:
    """What a caller gets: a copy of anything it could change in place."""
    import pandas as pd

    if isinstance(value, pd.DataFrame | pd.Series):
        out = value.copy()
        out.attrs = copy.deepcopy(value.attrs)
        return out
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, tuple):
        return tuple(_handed_out(v) for v in value)
    if isinstance(value, list | dict):
        return copy.deepcopy(value)
    if callable(getattr(value, "copy", None)):  # an object that copies itself (the walk's cells)
        return value.copy()
    return value


def memoized(fn: F | None = None, *, ignore: tuple[str, ...] = ()) -> Any:
    """``fn`` computing each distinct input once per process (module docstring). ``ignore``: the
    parameters left out of the key, those that only name things in error messages (an error is
    never kept: the next call raises it again, in its own words). An argument without a content
    digest makes the call compute as if not memoized."""
    if fn is None:
        return functools.partial(memoized, ignore=ignore)
    kept: OrderedDict[str, Any] = OrderedDict()
    _MEMOS.append(kept)
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # by parameter, defaults filled in: a call that spells an argument out or leaves it
        # to its default is the same call
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        key_args = {k: v for k, v in bound.arguments.items() if k not in ignore}
        try:
            key = digest(fn.__module__, fn.__qualname__, key_args)
        except Undigestible:
            return fn(*args, **kwargs)
        if key in kept:
            kept.move_to_end(key)
            return _handed_out(kept[key])
        result = fn(*args, **kwargs)
        kept[key] = _handed_out(result)
        while len(kept) > KEPT:
            kept.popitem(last=False)
        return result

    wrapper.uncached = fn  # type: ignore[attr-defined]
    return wrapper


def forget() -> None:
    """Empty every memo of this process."""
    for kept in _MEMOS:
        kept.clear()
