"""Results as trees: nested dicts, lists and tuples of plain tensors, numbers, bools and strings.

The judge compares what a rank produced with what the single-process reference
says, leaf by leaf, and names the first difference by its path
(``params["0.weight"][3, 1]``) with the values to a few significant digits.
Pure functions; torch is imported inside them, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Tolerance = tuple[float, float]  # (rtol, atol)
DEFAULT_TOLERANCE = {
    "torch.float64": (1e-10, 1e-12),
    "torch.float32": (1e-5, 1e-6),
    "torch.bfloat16": (1e-2, 1e-3),
    "torch.float16": (1e-2, 1e-3),
}
SCALARS = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class Mismatch:
    path: str
    reason: str

    def __str__(self) -> str:
        if not self.path:
            return self.reason
        return f"element {self.path} {self.reason}" if self.path.startswith("[") else f"{self.path} {self.reason}"


def fmt(value: Any) -> str:
    """A number as a student reads it: 6 significant digits, ints and bools as they are."""
    if hasattr(value, "numel") and value.numel() != 1:
        return f"a tensor of shape {tuple(value.shape)}"
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool | int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def fmt_apart(got: float, want: float) -> tuple[str, str]:
    """``got`` and ``want`` with as many significant digits as it takes to tell them apart (6 at least).

    Six digits alone printed -0.019998 for both a value and its float32-rounded twin, which reads as
    "right, yet marked wrong".
    """
    for digits in range(6, 18):
        a, b = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if a != b:
            return a, b
    return repr(got), repr(want)


def off_by(got: float, want: float, tolerance: Tolerance | None = None, extra: str = "") -> str:
    """ "is X, expected Y (off by A, relative R)", the two told apart; a lost-precision note when R is tiny.

    ``extra`` goes inside the parentheses. ``tolerance`` is the (rtol, atol) the value was held to:
    given, and the error so small beside a float64 value that a float32 step (an intermediate, a
    scalar) explains it, the message says so and names the tolerance.
    """
    a, b = fmt_apart(got, want)
    error = abs(got - want)
    if error != error or error == float("inf"):  # NaN or infinity: no error to speak of
        return f"is {a}, expected {b}" + (f" ({extra})" if extra else "")
    relative = error / abs(want) if want else float("inf")
    details = [f"off by {error:.2g}" + (f", relative {relative:.2g}" if want else "")] + ([extra] if extra else [])
    text = f"is {a}, expected {b} ({'; '.join(details)})"
    return text + precision_note(tolerance) if tolerance is not None and relative < LOST_PRECISION else text


LOST_PRECISION = 1e-6  # relative error under which a float64 value was most likely computed through float32


def precision_note(tolerance: Tolerance) -> str:
    """What to say when every error is tiny beside float64 values, naming the tolerance they missed."""
    rtol, atol = tolerance
    return (
        ": an error this small beside float64 values looks like lost precision (a float32 intermediate or a"
        f" float32 scalar somewhere in the computation) rather than a wrong formula; the tolerance here is"
        f" rtol={rtol:g}, atol={atol:g}"
    )


def key_path(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}[{str(key)!r}]".replace("'", '"') if path else str(key)


def leaves(tree: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of ``tree`` with its path, in a stable order."""
    if isinstance(tree, Mapping):
        for key in tree:
            yield from leaves(tree[key], key_path(path, key))
    elif isinstance(tree, list | tuple):
        for i, item in enumerate(tree):
            yield from leaves(item, key_path(path, i))
    else:
        yield path, tree


def select(tree: Any, keys: list[str] | None) -> Any:
    """The part of ``tree`` under the top-level ``keys`` (the whole tree for None)."""
    if keys is None:
        return tree
    if not isinstance(tree, Mapping):
        return {k: _Missing(k) for k in keys}
    return {k: tree[k] if k in tree else _Missing(k) for k in keys}


class _Missing:
    def __init__(self, key: str):
        self.key = key


@dataclass(frozen=True)
class Absent:
    """The placeholder a lab's driver returns where the state it reads has no value, and when that was.

    A driver that reports, say, an optimizer's moments puts ``placeholder`` where there is none; the
    judge then says the value is missing (``when``: " after the load phase") instead of showing the
    placeholder as if the student had computed it.
    """

    placeholder: str | None = None
    when: str = ""

    def matches(self, got: Any) -> bool:
        return self.placeholder is not None and isinstance(got, str) and got == self.placeholder

    def reason(self) -> str:
        return f"is missing{self.when}: the lab's driver found no such value in the state your code left"


def tolerance_for(path: str, dtype: str, tolerances: Mapping[str, Tolerance] | None) -> Tolerance:
    """The longest ``tolerances`` key that is a prefix of ``path`` wins; else the dtype's default."""
    best: tuple[int, Tolerance] | None = None
    for prefix, tol in (tolerances or {}).items():
        if (path == prefix or path.startswith((prefix + "[", prefix + "."))) and (
            best is None or len(prefix) > best[0]
        ):
            best = (len(prefix), tol)
    return best[1] if best else DEFAULT_TOLERANCE.get(dtype, (1e-5, 1e-6))


def compare(
    expected: Any,
    got: Any,
    tolerances: Mapping[str, Tolerance] | None = None,
    path: str = "",
    *,
    absent: Absent | None = None,
) -> Mismatch | None:
    """None if ``got`` matches ``expected`` everywhere ``expected`` has a value, else the first difference.

    ``absent``: the driver's placeholder for a value that does not exist, reported as missing.
    """
    import torch

    if isinstance(got, _Missing):
        return Mismatch(path, "missing from the result")
    if absent is not None and absent.matches(got) and not (isinstance(expected, str) and expected == got):
        return Mismatch(path, absent.reason())
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return Mismatch(path, f"expected a dict, got {type(got).__name__}")
        for key in expected:
            if key not in got:
                return Mismatch(key_path(path, key), "missing from the result")
            found = compare(expected[key], got[key], tolerances, key_path(path, key), absent=absent)
            if found:
                return found
        return None
    if isinstance(expected, list | tuple):
        if not isinstance(got, list | tuple):
            return Mismatch(path, f"expected a list of {len(expected)}, got {type(got).__name__}")
        if len(got) != len(expected):
            return Mismatch(path, f"has {len(got)} items, expected {len(expected)}")
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            found = compare(e, g, tolerances, key_path(path, i), absent=absent)
            if found:
                return found
        return None
    if isinstance(expected, torch.Tensor):
        return _compare_tensor(expected, got, tolerances, path)
    if isinstance(expected, float) and isinstance(got, int | float) and not isinstance(got, bool):
        tol = tolerance_for(path, "torch.float64", tolerances)
        if abs(got - expected) <= tol[1] + tol[0] * abs(expected):
            return None
        return Mismatch(path, off_by(float(got), expected, tol))
    if type(got) is not type(expected):
        return Mismatch(path, f"is {fmt(got)}, expected {fmt(expected)}")
    return None if got == expected else Mismatch(path, f"is {fmt(got)}, expected {fmt(expected)}")


def _compare_tensor(expected: Any, got: Any, tolerances: Mapping[str, Tolerance] | None, path: str) -> Mismatch | None:
    import torch

    if type(got) is not torch.Tensor:
        return Mismatch(path, f"expected a torch.Tensor, got {type(got).__name__}")
    if got.dtype != expected.dtype:
        return Mismatch(path, f"dtype is {got.dtype}, expected {expected.dtype}")
    if tuple(got.shape) != tuple(expected.shape):
        return Mismatch(path, f"shape is {tuple(got.shape)}, expected {tuple(expected.shape)}")
    tol = tolerance_for(path, str(expected.dtype), tolerances) if expected.is_floating_point() else None
    return tensor_difference(expected, got, tol, path)


def tensor_difference(expected: Any, got: Any, tol: Tolerance | None, path: str = "") -> Mismatch | None:
    """Where two tensors of one shape differ beyond ``tol`` (None: exactly), shown at the largest error.

    The wrong value is printed with as many digits as it takes to differ from the expected one, with
    its absolute and relative error; when every wrong element of a float64 tensor is off by less than
    ``LOST_PRECISION`` relative, the message says that this looks like lost precision.
    """
    import torch

    if tol is not None:
        bad = ~torch.isclose(got, expected, rtol=tol[0], atol=tol[1], equal_nan=True)
    else:
        bad = got != expected
    if not bool(bad.any()):
        return None
    flat = _worst(expected, got, bad)
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), expected.shape)] if expected.dim() else []
    where = f"{path}[{', '.join(map(str, index))}]" if index else path
    wrong = int(bad.sum())
    count = f"{wrong} of {expected.numel()} elements differ" + (", the largest error shown" if wrong > 1 else "")
    want, have = expected.flatten()[flat].item(), got.flatten()[flat].item()
    if tol is None or not expected.is_floating_point():
        return Mismatch(where, f"is {fmt(have)}, expected {fmt(want)} ({count})")
    # The lost-precision note only when every wrong element is that close, in a float64 tensor.
    tiny = expected.dtype == torch.float64 and _largest_relative(expected, got, bad) < LOST_PRECISION
    return Mismatch(where, off_by(have, want, tol if tiny else None, count))


def _worst(expected: Any, got: Any, bad: Any) -> int:
    """The flat index of the wrong element with the largest error (a NaN or infinity first)."""
    import torch

    if not expected.is_floating_point():
        return int(bad.flatten().nonzero()[0])
    error = (got.double() - expected.double()).abs().flatten()
    error = torch.where(torch.isfinite(error), error, torch.full_like(error, float("inf")))
    error = torch.where(bad.flatten(), error, torch.full_like(error, -1.0))
    return int(error.argmax())


def _largest_relative(expected: Any, got: Any, bad: Any) -> float:
    """The largest relative error among the wrong elements (infinity where one is expected to be 0)."""
    e, g = expected.double()[bad], got.double()[bad]
    if not bool((e != 0).all()):
        return float("inf")
    return float(((g - e).abs() / e.abs()).max())


def plain(tree: Any, path: str = "") -> Any:
    """``tree`` with only plain data, or TypeError naming the first leaf that is not (in a rank)."""
    import torch

    if isinstance(tree, Mapping):
        return {_plain_key(k, path): plain(v, key_path(path, k)) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        items = [plain(v, key_path(path, i)) for i, v in enumerate(tree)]
        return items if isinstance(tree, list) else tuple(items)
    if isinstance(tree, torch.Tensor):
        if type(tree) not in (torch.Tensor, torch.nn.Parameter):
            name = type(tree).__name__
            hint = ".full_tensor()" if name == "DTensor" else ".wait()" if "Async" in name else "a plain tensor"
            raise TypeError(f"{path or 'the result'} is a {name}; turn it into a plain tensor first ({hint})")
        return tree.detach().cpu().as_subclass(torch.Tensor).contiguous().clone()
    if isinstance(tree, SCALARS):
        return tree
    raise TypeError(f"{path or 'the result'} is a {type(tree).__name__}; results hold tensors, numbers and strings")


def _plain_key(key: Any, path: str) -> Any:
    if isinstance(key, str | int):
        return key
    raise TypeError(f"{path or 'the result'} has a key of type {type(key).__name__}; use strings")
