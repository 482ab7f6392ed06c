"""The generic libcst operations, one class at a time: before/after strings, holds, drifts."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from envforge.patching.operations import (
    AddDelegatingMethods,
    AddDictEntry,
    AddGuardOperand,
    AddListElement,
    Codemod,
    OpContext,
    Operation,
    Outcome,
)
from envforge.patching.source import Source, parse_source


def ctx(files: dict[str, str] | None = None, directory: Path = Path(".")) -> OpContext:
    return OpContext(read_text=lambda p: (files or {}).get(p), patchset_dir=directory)


def run(
    op: Operation, source: str, files: dict[str, str] | None = None, directory: Path = Path(".")
) -> tuple[Outcome, str]:
    """Run ``op`` on the whole file; check that on the partial parse (only the statements the
    operation wants) it ends the same, and that both renderers give libcst's own output."""
    text = textwrap.dedent(source)
    module = cst.parse_module(text)
    outcome = op.run(module, ctx(files, directory))
    code = outcome.module.code if outcome.status == "changed" else module.code
    tree = ast.parse(text)
    partial = parse_source(text.encode(), tree, op.wanted(tree))
    again = op.run(partial.module, ctx(files, directory))
    assert (again.status, again.detail) == (outcome.status, outcome.detail)
    if outcome.status == "changed":
        assert partial.render(again.module).decode() == code
        assert Source(text.encode(), module, None).render(outcome.module).decode() == code
    return outcome, code


GUARD_SRC = """\
from utils import (
    is_sm90,
    is_sm100,
)

_is_cuda = True
_sm90 = _is_cuda and is_sm90()
_sm100 = _is_cuda and is_sm100()


def fusion(n):
    return (
        # comment kept
        (_sm90 or _sm100)
        and n > 0
    )
"""

GUARD = AddGuardOperand(
    file="m.py",
    function="fusion",
    anchor="_sm90 or _sm100",
    operand="_sm120",
    define="_sm120 = _is_cuda and is_sm120()",
    define_after="_sm100",
    import_="from utils import is_sm120",
)


def test_guard_operand_added_with_define_and_import() -> None:
    outcome, code = run(GUARD, GUARD_SRC)
    assert outcome.status == "changed"
    assert outcome.detail == "added `_sm120` to the guard in fusion(); defined _sm120; imported is_sm120 from utils"
    assert code == GUARD_SRC.replace("    is_sm100,\n", "    is_sm100,\n    is_sm120,\n").replace(
        "_sm100 = _is_cuda and is_sm100()\n", "_sm100 = _is_cuda and is_sm100()\n_sm120 = _is_cuda and is_sm120()\n"
    ).replace("(_sm90 or _sm100)", "(_sm90 or _sm100 or _sm120)")


def test_guard_operand_holds_when_present_in_any_order() -> None:
    src = GUARD_SRC.replace("(_sm90 or _sm100)", "(_sm120 or _sm90 or _sm100)")
    outcome, _ = run(GUARD, src)
    assert (outcome.status, outcome.detail) == ("holds", "`_sm120` already in the guard")


def test_guard_operand_reapplied_holds() -> None:
    _, once = run(GUARD, GUARD_SRC)
    outcome, twice = run(GUARD, once)
    assert outcome.status == "holds" and twice == once


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        (("(_sm90 or _sm100)", "(_sm90 or _sm100 or _sm110)"), "anchor matched 0 times in fusion(), expected 1"),
        (("and n > 0", "and n > 0 and (_sm90 or _sm100)"), "anchor matched 2 times in fusion(), expected 1"),
        (("def fusion(n)", "def fusion2(n)"), "function fusion found 0 times, expected 1"),
        (("_sm100 = _is_cuda", "_sm100x = _is_cuda"), "module-level assignment of _sm100 found 0 times, expected 1"),
    ],
)
def test_guard_operand_drifts(change: tuple[str, str], detail: str) -> None:
    outcome, _ = run(GUARD, GUARD_SRC.replace(*change))
    assert (outcome.status, outcome.detail) == ("drifted", detail)


def test_guard_operand_import_single_line_and_missing() -> None:
    op = AddGuardOperand(file="m.py", function="f", anchor="a or b", operand="c", import_="from x import c")
    _, code = run(op, "from x import a, b\n\ndef f():\n    return a or b\n")
    assert code == "from x import a, b, c\n\ndef f():\n    return a or b or c\n"
    _, code = run(op, "import os\n\ndef f():\n    return a or b\n")
    assert code == "import os\nfrom x import c\n\ndef f():\n    return a or b or c\n"
    _, code = run(op, "from x import c\n\ndef f():\n    return a or b\n")
    assert code == "from x import c\n\ndef f():\n    return a or b or c\n"


def test_guard_operand_in_method_and_and_chain() -> None:
    op = AddGuardOperand(file="m.py", function="K.ok", anchor="x and y", operand="z")
    _, code = run(op, "class K:\n    def ok(self):\n        return x and y\n")
    assert code == "class K:\n    def ok(self):\n        return x and y and z\n"


DICT_SRC = """\
MiB = 1024 * 1024

SIZES = {
    9: {
        2: 64 * MiB,  # 64 MB
    },
    10: {
        2: 64 * MiB,  # 64 MB
    },
}


class C:
    _MULTI = {
        9: [4, 6, 8],
        10: [6, 8],
    }
"""


def test_dict_entry_module_level_multiline_value() -> None:
    op = AddDictEntry(file="m.py", target="SIZES", key=12, value="{\n        2: 64 * MiB,  # 64 MB\n    }")
    outcome, code = run(op, DICT_SRC)
    assert outcome.detail == "added key 12 to SIZES"
    assert code == DICT_SRC.replace("    },\n}\n", "    },\n    12: {\n        2: 64 * MiB,  # 64 MB\n    },\n}\n", 1)


def test_dict_entry_class_level_and_holds() -> None:
    op = AddDictEntry(file="m.py", target="C._MULTI", key=12, value="[]")
    _, code = run(op, DICT_SRC)
    assert code == DICT_SRC.replace("        10: [6, 8],\n", "        10: [6, 8],\n        12: [],\n")
    outcome, _ = run(op, code)
    assert (outcome.status, outcome.detail) == ("holds", "C._MULTI already has key 12")


def test_dict_entry_single_line_and_string_key() -> None:
    _, code = run(AddDictEntry(file="m.py", target="D", key="b", value="2"), 'D = {"a": 1}\n')
    assert code == 'D = {"a": 1, "b": 2}\n'


@pytest.mark.parametrize(
    ("source", "detail"),
    [
        ("X = 1\n", "assignment of SIZES found 0 times, expected 1"),
        ("SIZES = {}\nSIZES = {}\n", "assignment of SIZES found 2 times, expected 1"),
        ("SIZES = dict(a=1)\n", "SIZES is not assigned a dict literal"),
    ],
)
def test_dict_entry_drifts(source: str, detail: str) -> None:
    outcome, _ = run(AddDictEntry(file="m.py", target="SIZES", key=12, value="[]"), source)
    assert (outcome.status, outcome.detail) == ("drifted", detail)


def test_dict_entry_refuses_a_key_of_another_type_than_the_existing_keys() -> None:
    outcome, _ = run(AddDictEntry(file="m.py", target="SIZES", key="12", value="[]"), DICT_SRC)
    assert (outcome.status, outcome.detail, outcome.fix) == (
        "drifted",
        'SIZES: existing keys are int, the patchset\'s key is str ("12")',
        "write `key` as a TOML integer (key = 12)",
    )
    outcome, _ = run(AddDictEntry(file="m.py", target="D", key=2, value="2"), 'D = {"a": 1}\n')
    assert (outcome.status, outcome.detail, outcome.fix) == (
        "drifted",
        "D: existing keys are str, the patchset's key is int (2)",
        "write `key` as a TOML string",
    )
    # Keys of mixed types give no single type to compare with: the entry is added.
    _, code = run(AddDictEntry(file="m.py", target="D", key="b", value="2"), 'D = {1: 1, "a": 2}\n')
    assert code == 'D = {1: 1, "a": 2, "b": 2}\n'


DELEGATE = """\
class Base:
    def get_embed_and_head(self):
        return 1

    def set_embed_and_head(self, embed, head):
        pass

class V3(Base):
    def set_eagle3_layers_to_capture(self, layer_ids: "list[int] | None" = None):
        pass

    def odd(self, a, /, b, *rest, k: int = 3, **kw):
        pass
"""

WRAPPER = """\
class Wrapper:
    def __init__(self):
        self.language_model = V3()

    def get_embed_and_head(self):
        return self.language_model.get_embed_and_head()


EntryClass = [Wrapper]
"""

METHODS = AddDelegatingMethods(
    file="w.py",
    class_="Wrapper",
    attribute="language_model",
    methods=["get_embed_and_head", "set_embed_and_head", "set_eagle3_layers_to_capture"],
    signatures_from={"file": "d.py", "class": "V3"},
)


def test_delegating_methods_adds_only_the_missing_with_delegate_signatures() -> None:
    outcome, code = run(METHODS, WRAPPER, {"d.py": DELEGATE})
    assert outcome.detail == "added set_embed_and_head, set_eagle3_layers_to_capture to Wrapper"
    assert code == WRAPPER.replace(
        "get_embed_and_head()\n\n\nEntry",
        (
            "get_embed_and_head()\n\n"
            "    def set_embed_and_head(self, embed, head):\n"
            "        return self.language_model.set_embed_and_head(embed, head)\n\n"
            "    def set_eagle3_layers_to_capture(self, layer_ids=None):\n"
            "        return self.language_model.set_eagle3_layers_to_capture(layer_ids)\n\n\nEntry"
        ),
    )
    again, _ = run(METHODS, code, {"d.py": DELEGATE})
    assert (again.status, again.detail) == (
        "holds",
        "Wrapper already defines get_embed_and_head, set_embed_and_head, set_eagle3_layers_to_capture",
    )


def test_delegating_method_signature_kinds() -> None:
    op = AddDelegatingMethods(
        file="w.py",
        class_="Wrapper",
        attribute="language_model",
        methods=["odd"],
        signatures_from={"file": "d.py", "class": "V3"},
    )
    _, code = run(op, WRAPPER, {"d.py": DELEGATE})
    assert (
        "    def odd(self, a, /, b, *rest, k=3, **kw):\n"
        "        return self.language_model.odd(a, b, *rest, k=k, **kw)\n"
    ) in code


@pytest.mark.parametrize(
    ("source", "files", "detail"),
    [
        (
            WRAPPER.replace("class Wrapper", "class Other"),
            {"d.py": DELEGATE},
            "class Wrapper found 0 times, expected 1",
        ),
        (
            WRAPPER.replace("self.language_model = V3()", "self.lm = V3()"),
            {"d.py": DELEGATE},
            "class Wrapper never assigns self.language_model",
        ),
        (WRAPPER, {}, "delegate file d.py is missing"),
        (
            WRAPPER,
            {"d.py": DELEGATE.replace("def set_embed_and_head", "def set_embed")},
            "delegate V3 (d.py) has no method set_embed_and_head",
        ),
    ],
)
def test_delegating_methods_drifts(source: str, files: dict[str, str], detail: str) -> None:
    outcome, _ = run(METHODS, source, files)
    assert (outcome.status, outcome.detail) == ("drifted", detail)


KINDS_DELEGATE = """\
import functools, typing


class Base:
    @classmethod
    def config_for(cls, config, *, strict=False):
        return config

    @staticmethod
    def helper(a, b=2):
        return a + b

    @property
    def start_layer(self):
        return 0

    @property
    def finished(self):
        return self._f

    @finished.setter
    def finished(self, value):
        self._f = value

    @finished.deleter
    def finished(self):
        del self._f

    @functools.cached_property
    def table(self):
        return {}

    async def encode(self, prompt, **kw):
        return prompt

    async def stream(self, obj, request=None):
        yield obj

    @typing.overload
    def pick(self, x: int) -> int: ...
    @typing.overload
    def pick(self, x: str) -> str: ...
    def pick(self, x):
        return x

    @abc.abstractmethod
    def load(self, path):
        pass

    @torch.inference_mode()
    def event_loop(self):
        pass

    @functools.lru_cache
    def cached(self, n):
        return n

    @staticmethod
    async def ping():
        return 1


class V3(Base):
    pass
"""


def delegating(*methods: str) -> AddDelegatingMethods:
    return AddDelegatingMethods(
        file="w.py",
        class_="Wrapper",
        attribute="language_model",
        methods=list(methods),
        signatures_from={"file": "d.py", "class": "V3"},
    )


@pytest.mark.parametrize(
    ("method", "detail", "added"),
    [
        (
            "config_for",
            "config_for (classmethod)",
            "    @classmethod\n    def config_for(cls, config, *, strict=False):\n"
            "        return V3.config_for(config, strict=strict)\n",
        ),
        (
            "helper",
            "helper (staticmethod)",
            "    @staticmethod\n    def helper(a, b=2):\n        return V3.helper(a, b)\n",
        ),
        (
            "start_layer",
            "start_layer (property)",
            "    @property\n    def start_layer(self):\n        return self.language_model.start_layer\n",
        ),
        (
            "finished",
            "finished (property+setter+deleter)",
            "    @property\n    def finished(self):\n        return self.language_model.finished\n\n"
            "    @finished.setter\n    def finished(self, value):\n        self.language_model.finished = value\n\n"
            "    @finished.deleter\n    def finished(self):\n        del self.language_model.finished\n",
        ),
        (
            "table",
            "table (property)",
            "    @property\n    def table(self):\n        return self.language_model.table\n",
        ),
        (
            "encode",
            "encode (async)",
            "    async def encode(self, prompt, **kw):\n        return await self.language_model.encode(prompt, **kw)\n",
        ),
        (
            "stream",
            "stream (async-generator)",
            "    async def stream(self, obj, request=None):\n"
            "        async for item in self.language_model.stream(obj, request):\n            yield item\n",
        ),
        ("pick", "pick", "    def pick(self, x):\n        return self.language_model.pick(x)\n"),
        ("load", "load", "    def load(self, path):\n        return self.language_model.load(path)\n"),
    ],
)
def test_delegating_methods_keep_the_delegates_kind(method: str, detail: str, added: str) -> None:
    """Field case B29: a classmethod, staticmethod, property or async delegate keeps its kind."""
    outcome, code = run(delegating(method), WRAPPER, {"d.py": KINDS_DELEGATE})
    assert outcome.detail == f"added {detail} to Wrapper"
    assert code == WRAPPER.replace("get_embed_and_head()\n\n\nEntry", f"get_embed_and_head()\n\n{added}\n\nEntry")


@pytest.mark.parametrize(
    ("method", "why"),
    [
        ("event_loop", "is decorated with @torch.inference_mode() (a kind envforge cannot delegate)"),
        ("cached", "is decorated with @functools.lru_cache (a kind envforge cannot delegate)"),
        ("ping", "is an async staticmethod (a kind envforge cannot delegate)"),
    ],
)
def test_delegating_methods_refuse_a_kind_they_cannot_tell(method: str, why: str) -> None:
    outcome, _ = run(delegating(method), WRAPPER, {"d.py": KINDS_DELEGATE})
    assert (outcome.status, outcome.detail) == (
        "drifted",
        f"delegate V3.{method} {why}; envforge delegates plain, async, classmethod, staticmethod "
        "and property methods only",
    )


LIST_SRC = """\
def gen():
    flags = ctx.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )
    return flags
"""

LIST = AddListElement(
    file="c.py",
    function="gen",
    call="get_nvcc_flags_list",
    keyword="supported_major_versions",
    element="12",
    anchor="[9, 10]",
)


def test_list_element_added_then_holds() -> None:
    outcome, code = run(LIST, LIST_SRC)
    assert code == LIST_SRC.replace("[9, 10]", "[9, 10, 12]")
    again, _ = run(LIST, code)
    assert (again.status, again.detail) == ("holds", "supported_major_versions already lists 12")


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        (("[9, 10]", "[9, 10, 11]"), "supported_major_versions is [9, 10, 11], expected [9, 10]"),
        (
            ("get_nvcc_flags_list", "flags_for"),
            "get_nvcc_flags_list(supported_major_versions=[...]) found 0 times in gen(), expected 1",
        ),
    ],
)
def test_list_element_drifts(change: tuple[str, str], detail: str) -> None:
    outcome, _ = run(LIST, LIST_SRC.replace(*change))
    assert (outcome.status, outcome.detail) == ("drifted", detail)


def test_list_element_refuses_an_element_of_another_type() -> None:
    op = AddListElement(
        file="c.py", function="gen", call="get_nvcc_flags_list", keyword="supported_major_versions", element='"12"'
    )
    outcome, _ = run(op, LIST_SRC)
    assert (outcome.status, outcome.detail, outcome.fix) == (
        "drifted",
        'supported_major_versions: existing elements are int, the patchset\'s element is str ("12")',
        "write `element` as a Python int literal",
    )


CODEMOD = """\
import libcst as cst
from libcst.codemod import Codemod, SkipFile


class Rename(Codemod):
    def __init__(self, context, old, new):
        super().__init__(context)
        self.old, self.new = old, new

    def transform_module_impl(self, tree):
        if "boom" in tree.code:
            raise RuntimeError("boom found")
        if "skip" in tree.code:
            raise SkipFile("nothing here")
        return tree.visit(_Swap(self.old, self.new))


class _Swap(cst.CSTTransformer):
    def __init__(self, old, new):
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.new) if updated.value == self.old else updated
"""


def test_codemod_escape_hatch(tmp_path: Path) -> None:
    (tmp_path / "my_codemods_t1.py").write_text(CODEMOD)
    op = Codemod(file="m.py", codemod="my_codemods_t1:Rename", args={"old": "a", "new": "b"})
    outcome, code = run(op, "x = a\n", directory=tmp_path)
    assert (outcome.status, code) == ("changed", "x = b\n")
    assert run(op, "x = b\n", directory=tmp_path)[0].status == "holds"
    assert (
        run(op, "skip = 1\n", directory=tmp_path)[0].detail == "codemod my_codemods_t1:Rename left the file unchanged"
    )
    boom = run(op, "boom = 1\n", directory=tmp_path)[0]
    assert (boom.status, boom.detail) == ("drifted", "codemod my_codemods_t1:Rename failed: boom found")
    missing = run(Codemod(file="m.py", codemod="nope_t1:X"), "x = 1\n", directory=tmp_path)[0]
    assert (missing.status, missing.detail) == ("drifted", "cannot load codemod nope_t1:X: No module named 'nope_t1'")


def _table(**kw: Any) -> dict[str, Any]:
    return {"file": "m.py", **kw}


def test_from_table_builds_and_validates() -> None:
    op, problems = Operation.from_table(
        _table(kind="add-list-element", function="f", call="c", keyword="k", element="12"), "operation[0]", ""
    )
    assert problems == [] and isinstance(op, AddListElement) and op.anchor is None
    op, problems = Operation.from_table(
        _table(kind="add-guard-operand", function="f", anchor="a or", operand="b", extra=1), "operation[1]", ""
    )
    assert op is None
    assert [(p.path, p.message) for p in problems] == [
        ("operation[1].anchor", "not a Python expression: invalid syntax"),
        (
            "operation[1].extra",
            "unknown key; known keys: anchor, define, define-after, file, function, import, kind, operand",
        ),
    ]
    _, problems = Operation.from_table({"kind": "add-dict-entri"}, "operation[2]", "")
    assert [(p.path, p.message) for p in problems] == [
        (
            "operation[2].kind",
            "must be one of 'add-guard-operand', 'add-dict-entry', "
            "'add-delegating-methods', 'add-list-element', 'codemod', 'replace-definition', 'replace-text', "
            "'add-definition', 'remove-definition', 'add-statement', 'remove-statement', 'replace-module-comments', "
            "'move-definition', 'move-statement', got 'add-dict-entri'",
        )
    ]


def test_form_feed_and_crlf_keep_line_numbers_aligned() -> None:
    """``str.splitlines`` would split at the form feed and shift every later line."""
    src = GUARD_SRC.replace("\n\ndef fusion", "\n\x0c\ndef fusion")
    outcome, code = run(GUARD, src)
    assert "\x0c\ndef fusion" in code and "(_sm90 or _sm100 or _sm120)" in code
    crlf = GUARD_SRC.replace("\n", "\r\n")
    _, code = run(GUARD, crlf)
    assert "(_sm90 or _sm100 or _sm120)\r\n" in code and "\r\n_sm120 = _is_cuda and is_sm120()\r\n" in code


def test_guard_operand_function_alternatives() -> None:
    op, problems = Operation.from_table(
        _table(kind="add-guard-operand", function=["g", "f"], anchor="a or b", operand="c"), "operation[0]", ""
    )
    assert problems == [] and isinstance(op, AddGuardOperand) and op.names == ("g", "f")
    assert op.describe() == "add-guard-operand g | f: `a or b` + `c`"
    assert op.anchor_text() == "`a or b` in g() | f()"
    outcome, code = run(op, "def f():\n    return a or b\n")
    assert (outcome.status, outcome.detail, code) == (
        "changed",
        "added `c` to the guard in f()",
        "def f():\n    return a or b or c\n",
    )
    both = run(op, "def f():\n    return a or b\n\n\ndef g():\n    return a or b\n")[0]
    assert (both.status, both.detail) == ("drifted", "functions g | f (alternatives) found 2 times, expected 1")
    _, problems = Operation.from_table(
        _table(kind="add-guard-operand", function=[1], anchor="a or b", operand="c"), "operation[1]", ""
    )
    assert [p.path for p in problems] == ["operation[1].function[0]"]
    _, problems = Operation.from_table(
        _table(kind="add-guard-operand", function=1, anchor="a or b", operand="c"), "operation[2]", ""
    )
    assert [(p.path, p.message) for p in problems] == [
        ("operation[2].function", "expected a function name or a list of alternative names, got an integer (1)")
    ]
