"""The Python examples of README.md (its ```python blocks) run as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from conftest import import_or_fail

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    text = README.read_text() if README.is_file() else ""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("block", python_blocks() or [None])
def test_readme_python_example_runs(block):
    if block is None:
        pytest.skip("README.md holds no ```python example")
    if re.search(r"^import torch$", block, flags=re.M):
        import_or_fail("torch")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {})
    assert out.getvalue()
