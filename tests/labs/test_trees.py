"""The judge's tree comparison: paths, tolerances, types (pure, no sandbox)."""

from __future__ import annotations

import pytest

from labs.rank import trees

torch = pytest.importorskip("torch")


def test_first_difference_is_named_by_its_path_with_six_digits() -> None:
    expected = {"params": {"0.weight": torch.zeros(2, 3, dtype=torch.float64)}, "losses": [1.0, 2.0]}
    got = {"params": {"0.weight": torch.zeros(2, 3, dtype=torch.float64)}, "losses": [1.0, 2.0]}
    assert trees.compare(expected, got) is None
    got["params"]["0.weight"][1, 2] = 0.123456789
    found = trees.compare(expected, got)
    # Six digits tell these two apart; the absolute error follows (no relative one beside an expected 0).
    assert str(found) == 'params["0.weight"][1, 2] is 0.123457, expected 0 (off by 0.12; 1 of 6 elements differ)'


def test_tolerance_by_longest_path_prefix_then_dtype() -> None:
    tols = {"a": (0.0, 1e-3), 'a["b"]': (0.0, 1e-9)}
    assert trees.tolerance_for('a["c"]', "torch.float64", tols) == (0.0, 1e-3)
    assert trees.tolerance_for('a["b"][0]', "torch.float64", tols) == (0.0, 1e-9)
    assert trees.tolerance_for("z", "torch.float32", tols) == trees.DEFAULT_TOLERANCE["torch.float32"]


def test_type_shape_dtype_missing_and_scalar_mismatches() -> None:
    t = torch.ones(3)
    assert "missing from the result" in str(trees.compare({"x": t}, {}))
    assert "dtype is torch.float64" in str(trees.compare(t, t.double()))
    assert "shape is (2,)" in str(trees.compare(t, torch.ones(2)))
    assert "is a tensor of shape (3,), expected None" in str(trees.compare(None, t))
    assert str(trees.compare({"n": 3}, {"n": 4})) == "n is 4, expected 3"
    assert trees.compare({"lr": 0.1}, {"lr": 0.1 + 1e-15}) is None
    assert "has 1 items, expected 2" in str(trees.compare([1, 2], [1]))


def test_plain_refuses_what_torch_load_would_not_read() -> None:
    assert trees.plain({"a": (torch.nn.Parameter(torch.ones(1)), 2)})["a"][1] == 2
    with pytest.raises(TypeError, match="set"):
        trees.plain({"a": {1, 2}})
