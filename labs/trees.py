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
    expected: Any, got: Any, tolerances: Mapping[str, Tolerance] | None = None, path: str = ""
) -> Mismatch | None:
    """None if ``got`` matches ``expected`` everywhere ``expected`` has a value, else the first difference."""
    import torch

    if isinstance(got, _Missing):
        return Mismatch(path, "missing from the result")
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return Mismatch(path, f"expected a dict, got {type(got).__name__}")
        for key in expected:
            if key not in got:
                return Mismatch(key_path(path, key), "missing from the result")
            found = compare(expected[key], got[key], tolerances, key_path(path, key))
            if found:
                return found
        return None
    if isinstance(expected, list | tuple):
        if not isinstance(got, list | tuple):
            return Mismatch(path, f"expected a list of {len(expected)}, got {type(got).__name__}")
        if len(got) != len(expected):
            return Mismatch(path, f"has {len(got)} items, expected {len(expected)}")
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            found = compare(e, g, tolerances, key_path(path, i))
            if found:
                return found
        return None
    if isinstance(expected, torch.Tensor):
        return _compare_tensor(expected, got, tolerances, path)
    if isinstance(expected, float) and isinstance(got, int | float) and not isinstance(got, bool):
        rtol, atol = tolerance_for(path, "torch.float64", tolerances)
        if abs(got - expected) <= atol + rtol * abs(expected):
            return None
        return Mismatch(path, f"is {fmt(float(got))}, expected {fmt(expected)}")
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
    if expected.is_floating_point():
        rtol, atol = tolerance_for(path, str(expected.dtype), tolerances)
        bad = ~torch.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = got != expected
    if not bool(bad.any()):
        return None
    flat = int(bad.flatten().nonzero()[0])
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), expected.shape)] if expected.dim() else []
    where = f"{path}[{', '.join(map(str, index))}]" if index else path
    return Mismatch(
        where,
        f"is {fmt(got.flatten()[flat])}, expected {fmt(expected.flatten()[flat])}"
        f" ({int(bad.sum())} of {expected.numel()} elements differ)",
    )


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
