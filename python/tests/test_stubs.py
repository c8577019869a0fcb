"""The type stub of the C++ extension (_core.pyi) names exactly the functions the extension
defines, each with the extension's parameter names in order; the package is marked typed."""

from __future__ import annotations

import ast
from pathlib import Path

import qexact
from qexact import _core

PACKAGE = Path(qexact.__file__).parent


def stub_functions() -> dict[str, list[str]]:
    tree = ast.parse((PACKAGE / "_core.pyi").read_text())
    return {f.name: [a.arg for a in f.args.args] for f in tree.body if isinstance(f, ast.FunctionDef)}


def parameter_names(signature: str) -> list[str]:
    """Names in nanobind's "def f(a: T[...], b: U) -> R": the identifiers before each ':' at
    bracket depth 1 of the parameter list."""
    names, depth, token = [], 0, ""
    for ch in signature[signature.index("("):]:
        if ch in "([":
            depth += 1
            token = ""
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                break
        elif ch == ":" and depth == 1 and token.strip().isidentifier():
            names.append(token.strip())
            token = ""
        elif ch == ",":
            token = ""
        else:
            token += ch
    return names


def test_the_stub_matches_the_extension():
    defined = {n for n in dir(_core) if not n.startswith("_")}
    stubs = stub_functions()
    assert set(stubs) == defined
    for name, params in stubs.items():
        (signature, _doc, _defaults), = getattr(_core, name).__nb_signature__
        assert parameter_names(signature) == params, name


def test_the_package_is_typed():
    assert (PACKAGE / "py.typed").is_file()
