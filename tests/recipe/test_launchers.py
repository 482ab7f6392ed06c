"""The launcher table is what the real sglang 0.5.9 wheel's launch code does (field case B38)."""

from __future__ import annotations

import ast
import zipfile

import pytest

from envforge.recipe.launchers import ALWAYS, IF_UNSET, SGLANG_0_5_9, UNLESS_ZERO, launcher_for
from tests.conftest import cached_wheel

ENGINE_PY = "sglang/srt/entrypoints/engine.py"


def _function(name: str) -> ast.FunctionDef:
    with zipfile.ZipFile(cached_wheel("sglang", "0.5.9")) as zf:
        tree = ast.parse(zf.read(ENGINE_PY).decode("utf-8"))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _assignments(fn: ast.FunctionDef) -> list[tuple[str, int, ast.expr, ast.expr | None]]:
    """Each ``os.environ["X"] = value`` of ``fn``: (X, line, value, the test of the ``if`` whose body holds it)."""
    guard = {id(stmt): node.test for node in ast.walk(fn) if isinstance(node, ast.If) for stmt in node.body}
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (
                    isinstance(t, ast.Subscript)
                    and ast.unparse(t.value) == "os.environ"
                    and isinstance(t.slice, ast.Constant)
                ):
                    out.append((t.slice.value, node.lineno, node.value, guard.get(id(node))))
    return sorted(out, key=lambda a: a[1])


def _flags(expr: ast.AST) -> set[str]:
    """``server_args.enable_symm_mem`` in an expression -> ``--enable-symm-mem``."""
    return {
        "--" + n.attr.replace("_", "-")
        for n in ast.walk(expr)
        if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "server_args"
    }


ASSIGNED = _assignments(_function("_set_envs_and_config"))


def test_the_scan_reads_the_real_launch_code() -> None:
    assert [(name, line) for name, line, _, _ in ASSIGNED] == [
        ("NCCL_CUMEM_ENABLE", 809),
        ("NCCL_NVLS_ENABLE", 815),
        ("CUDA_DEVICE_MAX_CONNECTIONS", 818),
        ("CUDA_MODULE_LOADING", 819),
        ("TRTLLM_ENABLE_PDL", 823),
        ("CUTE_DSL_LOG_LEVEL", 827),
        ("CUTE_DSL_LOG_TO_CONSOLE", 831),
        ("SGLANG_RUN_ID", 834),
    ]


def test_every_assignment_of_the_real_wheel_is_in_the_table_with_its_line() -> None:
    table = {(w.name, w.line) for w in SGLANG_0_5_9.writes}
    assert table == {(name, line) for name, line, _, _ in ASSIGNED}


@pytest.mark.parametrize("name,line,value,test", ASSIGNED, ids=[a[0] for a in ASSIGNED])
def test_each_write_matches_the_source(name: str, line: int, value: ast.expr, test: ast.expr | None) -> None:
    writes = [w for w in SGLANG_0_5_9.writes if w.name == name]
    unconditional = [w for w in writes if not w.flags]
    assert len(unconditional) == 1
    if isinstance(value, ast.Constant):  # a literal: the table holds it
        assert {w.value for w in writes} == {value.value}
    flags = _flags(test) if test is not None else set()
    assert {f for w in writes for f in w.flags} == flags  # the flags the real `if` reads
    forced = [w for w in writes if w.flags]
    assert all(w.when == ALWAYS and w.value == "1" for w in forced)  # str(int(True))
    src = ast.unparse(test) if test is not None else ""
    if test is None:
        assert unconditional[0].when == ALWAYS
    elif f"'{name}' not in os.environ" in src or f"os.environ.get('{name}') is None" in src:
        assert unconditional[0].when == IF_UNSET
    else:
        assert src == f"os.environ.get('{name}', '1') != '0'"
        assert unconditional[0].when == UNLESS_ZERO


def test_the_run_id_is_per_run_so_the_table_holds_no_value() -> None:
    (run_id,) = [w for w in SGLANG_0_5_9.writes if w.name == "SGLANG_RUN_ID"]
    assert run_id.value is None and run_id.when == ALWAYS


# The variables sglang 0.5.9's own _set_envs_and_config left in os.environ (field case B38: a
# stub server that runs the real function), from a profile CUDA_DEVICE_MAX_CONNECTIONS=1,
# CUDA_MODULE_LOADING=EAGER, NCCL_CUMEM_ENABLE=0, NCCL_NVLS_ENABLE=0.
B38_PROFILE = {
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "CUDA_MODULE_LOADING": "EAGER",
    "NCCL_CUMEM_ENABLE": "0",
    "NCCL_NVLS_ENABLE": "0",
}


@pytest.mark.parametrize(
    "argv,dumped",
    [
        (
            ["--model-path", "stub"],
            {
                "CUDA_DEVICE_MAX_CONNECTIONS": "8",
                "CUDA_MODULE_LOADING": "AUTO",
                "NCCL_CUMEM_ENABLE": "0",
                "NCCL_NVLS_ENABLE": "0",
            },
        ),
        (
            ["--model-path", "stub", "--enable-symm-mem"],
            {
                "CUDA_DEVICE_MAX_CONNECTIONS": "8",
                "CUDA_MODULE_LOADING": "AUTO",
                "NCCL_CUMEM_ENABLE": "1",
                "NCCL_NVLS_ENABLE": "1",
            },
        ),
    ],
)
def test_applying_the_table_gives_what_the_real_launcher_left(argv: list[str], dumped: dict[str, str]) -> None:
    writes = SGLANG_0_5_9.apply(B38_PROFILE, argv)
    after = {**B38_PROFILE, **{k: w.value for k, w in writes.items() if k in B38_PROFILE}}
    assert after == dumped


def test_a_set_value_survives_the_if_unset_writes() -> None:
    writes = SGLANG_0_5_9.apply({"NCCL_CUMEM_ENABLE": "1", "TRTLLM_ENABLE_PDL": "0", "CUTE_DSL_LOG_LEVEL": "10"}, [])
    assert "NCCL_CUMEM_ENABLE" not in writes and "TRTLLM_ENABLE_PDL" not in writes
    assert "CUTE_DSL_LOG_LEVEL" not in writes
    assert writes["NCCL_NVLS_ENABLE"].value == "0" and writes["NCCL_NVLS_ENABLE"].when == IF_UNSET
    assert SGLANG_0_5_9.apply({"NCCL_NVLS_ENABLE": "0"}, ["--enable-nccl-nvls"])["NCCL_NVLS_ENABLE"].value == "1"


def test_launcher_lookup_by_engine_and_version() -> None:
    assert launcher_for("sglang", "0.5.9") is SGLANG_0_5_9
    assert SGLANG_0_5_9.label == "sglang-0.5.9"
    assert launcher_for("sglang", "0.5.8") is None
    assert launcher_for("sglang", None) is None
    assert launcher_for("vllm", "0.5.9") is None
