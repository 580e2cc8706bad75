"""A memoized function computes each distinct content once and hands out copies (cir.util.memo)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cir.util.memo import digest, forget, memoized


@pytest.fixture(autouse=True)
def _empty() -> None:
    forget()


def test_the_same_content_is_computed_once_whatever_object_holds_it() -> None:
    calls = []

    @memoized
    def total(df: pd.DataFrame, scale: float) -> pd.DataFrame:
        calls.append(1)
        return df * scale

    df = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]}).assign(b=[3, 4])
    first = total(df, 2.0)
    again = total(df.copy(), 2.0)
    assert len(calls) == 1 and again.equals(first)
    total(df, 3.0)  # another argument
    changed = df.copy()
    changed.loc[0, "a"] = 9.0  # the same object type, other content
    total(changed, 2.0)
    assert len(calls) == 3


def test_what_a_caller_changes_is_not_what_the_next_caller_gets() -> None:
    @memoized
    def table(n: int) -> pd.DataFrame:
        return pd.DataFrame({"v": np.arange(n)})

    got = table(3)
    got.loc[0, "v"] = 99
    assert table(3)["v"].tolist() == [0, 1, 2]


def test_ignored_arguments_only_name_things() -> None:
    calls = []

    @memoized(ignore=("source",))
    def check(values: np.ndarray, source: str = "table") -> int:
        calls.append(source)
        if (values < 0).any():
            raise ValueError(f"{source}: negative")
        return int(values.sum())

    assert check(np.arange(4), source="a") == check(np.arange(4), source="b") == 6
    assert calls == ["a"]
    for source in ("c", "d"):  # an error is never kept: each call raises it in its own words
        with pytest.raises(ValueError, match=f"{source}: negative"):
            check(np.array([-1]), source=source)


def test_an_argument_without_a_digest_computes_every_time() -> None:
    calls = []

    @memoized
    def name(thing: object) -> str:
        calls.append(1)
        return type(thing).__name__

    thing = object()
    name(thing)
    name(thing)
    assert len(calls) == 2


def test_digests_see_dtype_shape_and_order() -> None:
    a = np.arange(6)
    assert digest(a) != digest(a.astype(float))
    assert digest(a) != digest(a.reshape(2, 3))
    assert digest({"x": 1, "y": 2}) == digest({"y": 2, "x": 1})
    assert digest([1, 2]) != digest((1, 2))


def test_text_columns_digest_without_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """pandas' string dtype offers ``__arrow_array__`` even when pyarrow is not installed (``pip
    install cir`` does not bring it): the digest reads the values instead, and still tells two
    tables apart (a fresh install's `cir reproduce` stopped at its analysis with ModuleNotFoundError)."""
    import builtins

    real = builtins.__import__

    def no_pyarrow(name: str, *args: object, **kwargs: object) -> object:
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ModuleNotFoundError("No module named 'pyarrow'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    text = pd.Series(["clean", "stale1", None], dtype=pd.StringDtype(storage="python"))
    one, same, other = (pd.DataFrame({"condition": s}) for s in (text, text.copy(), text.replace("clean", "lag1")))
    assert digest(one) == digest(same) != digest(other)
