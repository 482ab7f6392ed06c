"""Recipes: the shipped ones resolve, broken ones give exact errors with file, key path and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.recipe.load import load_recipe
from envforge.recipe.model import RecipeError

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "r.toml"
    p.write_text(text)
    return p


def test_kimi_cu130_routes_torch_family_to_its_index_and_records_override_reason() -> None:
    v = load_recipe(ROOT / "recipes" / "kimi-k25-sm120.toml").resolve("cu130")
    pins = {p.name: p for p in v.packages}
    assert (pins["torch"].specifier, pins["torch"].index) == ("==2.9.1+cu130", "pytorch-cu130")
    assert (pins["sgl-kernel"].specifier, pins["sgl-kernel"].index) == ("==0.3.21+cu130", "sgl-kernel-cu130")
    assert pins["sglang"].index is None
    assert {p.name: p.specifier for p in v.packages if p.name.startswith("flashinfer")} == {
        "flashinfer-cubin": "==0.6.4",
        "flashinfer-jit-cache": "==0.6.4+cu130",
        "flashinfer-python": "==0.6.4",
    }
    fi = next(o for o in v.overrides if o.name == "flashinfer-python")
    assert fi.specifier == "==0.6.4" and "sglang 0.5.9 pins ==0.6.3" in fi.reason
    assert v.lock_name == "kimi-k25-sm120-cu130" and v.cuda == "13.0.1"
    assert v.env_profile == "pcie" and v.env == {"NCCL_BUFFSIZE": "131072", "NCCL_MAX_NCHANNELS": "2"}


def test_cu128_takes_everything_from_the_default_index() -> None:
    v = load_recipe(ROOT / "recipes" / "kimi-k25-sm120.toml").resolve("cu128")
    assert [p.requirement() for p in v.packages] == ["sgl-kernel==0.3.21", "sglang==0.5.9", "torch==2.9.1"]
    assert v.indexes == () and v.overrides == ()


def test_recipe_without_variants_has_the_implicit_default_variant() -> None:
    v = load_recipe(ROOT / "recipes" / "quickstart.toml").resolve()
    assert v.variant == "default" and v.lock_name == "quickstart-default"


def test_multi_variant_recipe_needs_a_variant(tmp_path: Path) -> None:
    r = load_recipe(ROOT / "recipes" / "kimi-k25-sm120.toml")
    with pytest.raises(RecipeError) as e:
        r.resolve(None)
    assert str(e.value) == (
        f"{r.path}: recipe 'kimi-k25-sm120' has variants cu128, cu130, cu130-aarch64, cu130-current; choose one\n"
        "  hint: pass --variant cu128"
    )
    with pytest.raises(
        RecipeError, match="has no variant 'cu999' \\(it has: cu128, cu130, cu130-aarch64, cu130-current\\)"
    ):
        r.resolve("cu999")


def test_unknown_key_gives_line_and_did_you_mean(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "x"\npython = "3.12"\n\n[target]\ncompute_capability = "12.0"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value) == (
        f"recipe {p} is invalid (1 problem):\n"
        f"  {p}:6: target.compute_capability: unknown key; did you mean 'compute-capability'?\n"
        "  hint: see docs/recipes.md for the recipe schema"
    )


def test_wrong_type_names_file_key_path_and_line(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "x"\npython = "3.12"\n\n[target]\ngpus = "8"\ncompute-capability = 12.0\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).splitlines()[:3] == [
        f"recipe {p} is invalid (2 problems):",
        f'  {p}:6: target.gpus: expected an integer, got a string ("8")',
        f"  {p}:7: target.compute-capability: expected a string, got a float (12.0)",
    ]


def test_wrong_type_inside_a_variant_table(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        '[recipe]\nname = "x"\npython = "3.12"\n\n[variant.cu130]\n'
        'packages = { torch = { version = "==2.9.1", index = 3 } }\n',
    )
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).splitlines()[1] == (
        f"  {p}:6: variant.cu130.packages.torch.index: expected a string, got an integer (3)"
    )


def test_name_with_a_dot_cannot_form_a_pep751_file_name(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "kimi.k25"\npython = "3.12"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).splitlines()[1] == (
        f"  {p}:2: recipe.name: 'kimi.k25' cannot form a PEP 751 lock file name "
        "(pylock.<name>.toml allows no dots); use letters, digits, '-' and '_' only"
    )


def test_variant_name_with_a_dot(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "k"\npython = "3.12"\n\n[variant."cu13.0"]\ncuda = "13.0"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert "variant.cu13.0: 'cu13.0' cannot form a PEP 751 lock file name" in str(e.value)


def test_missing_required_key_and_bad_specifier(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "k"\n\n[packages]\ntorch = "2.9.1"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).splitlines()[1:3] == [
        f"  {p}:1: recipe.python: missing required key",
        f"  {p}:5: packages.torch: '2.9.1' is not a version specifier (PEP 440), e.g. '==2.9.1' or '>=0.6,<0.7'",
    ]


def test_override_without_reason_is_refused(tmp_path: Path) -> None:
    p = write(
        tmp_path, '[recipe]\nname = "k"\npython = "3.12"\n\n[overrides]\nflashinfer-python = { version = "==0.6.4" }\n'
    )
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).splitlines()[1] == f"  {p}:6: overrides.flashinfer-python.reason: missing required key"


def test_undefined_index_is_named_with_the_fix(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        '[recipe]\nname = "k"\npython = "3.12"\n\n[packages]\ntorch = { version = "==2.9.1", index = "cu130" }\n',
    )
    with pytest.raises(RecipeError) as e:
        load_recipe(p).resolve()
    assert str(e.value) == (
        f"{p}:6: packages.torch.index: index 'cu130' is not defined\n"
        "  hint: add it under [indexes] or [variant.default.indexes] (defined: none)"
    )


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "k\n')
    with pytest.raises(RecipeError, match=rf"^{p}: not valid TOML: .*line 2"):
        load_recipe(p)


def test_unknown_env_profile(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "k"\npython = "3.12"\n\n[env.pcie]\nNCCL_BUFFSIZE = "1"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p).resolve(env_profile="nvlink")
    assert str(e.value) == (
        f"{p}: env profile 'nvlink' is not defined (defined: pcie)\n  hint: add a table [env.nvlink]"
    )


def test_an_interconnect_profile_without_an_interconnect_is_refused_with_the_fix(tmp_path: Path) -> None:
    """Issue 44: [env.pcie] without [target] interconnect was silently never applied."""
    p = write(
        tmp_path,
        '[recipe]\nname = "k"\npython = "3.12"\n\n[env.default]\nA = "1"\n\n[env.pcie]\nNCCL_P2P_DISABLE = "1"\n',
    )
    with pytest.raises(RecipeError) as e:
        load_recipe(p).resolve()
    assert str(e.value) == (
        f'{p}:8: [env.pcie] is applied when [target] interconnect = "pcie", and the recipe sets no interconnect: '
        "it would never be applied\n"
        '  hint: set interconnect = "pcie" under [target], or choose it when locking '
        "(`envforge lock --env-profile pcie`)"
    )
    assert load_recipe(p).resolve(env_profile="pcie").env == {"A": "1", "NCCL_P2P_DISABLE": "1"}
    with_link = write(
        tmp_path,
        p.read_text().replace('python = "3.12"\n', 'python = "3.12"\n\n[target]\ninterconnect = "nvlink"\n', 1),
    )
    assert load_recipe(with_link).resolve().env == {"A": "1"}  # another interconnect's profile: an alternative


def test_two_keys_naming_one_distribution_are_refused(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "k"\npython = "3.12"\n\n[packages]\nsglang = "==0.5.9"\nSGLang = "==0.5.8"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).splitlines()[1] == (
        f"  {p}:7: packages.SGLang: names the same distribution as 'sglang' (both normalise to 'sglang'); keep one"
    )


def test_python_must_be_a_version(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "k"\npython = "latest"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).splitlines()[1] == f"  {p}:3: recipe.python: 'latest' is not a Python version like \"3.12\""


def test_recipe_name_must_match_its_file_in_recipes(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    p = tmp_path / "recipes" / "mismatch.toml"
    p.write_text('[recipe]\nname = "other"\npython = "3.12"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value) == (
        f"{p}: recipe.name 'other' does not match the file name 'mismatch.toml'\n"
        '  hint: rename the file to recipes/other.toml or set name = "mismatch"'
    )


def test_index_url_must_be_a_url(tmp_path: Path) -> None:
    p = write(tmp_path, '[recipe]\nname = "k"\npython = "3.12"\n\n[indexes]\nmine = "download.pytorch.org/whl cu130"\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).splitlines()[1] == (
        f"  {p}:6: indexes.mine: 'download.pytorch.org/whl cu130' is not an index URL; use "
        "http(s)://host/path/simple (a PEP 503 index) or file:///dir"
    )


def load_recipe_text(tmp_path: Path, text: str) -> None:
    load_recipe(write(tmp_path, text))


RETIRING = """\
[recipe]
name = "gk"
python = "3.12"
patchsets = ["a-fix", "b-fix", "c-fix"]
retire-patchsets = [{ id = "c-fix", reason = "c is upstream since 2.0" }]

[variant.old]
retire-patchsets = [{ id = "b-fix", reason = "b is written for 2.x" }]

[variant.new]
retire-patchsets = [{ id = "a-fix", reason = "a is written for 1.x" }, { id = "c-fix", reason = "in 2.1 itself" }]
"""


def test_retire_patchsets_of_the_recipe_and_the_variant_merge_by_id(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, RETIRING))
    old, new = recipe.resolve("old"), recipe.resolve("new")
    assert (old.patchsets, dict(old.retired_patchsets)) == (
        ("a-fix",),
        {"b-fix": "b is written for 2.x", "c-fix": "c is upstream since 2.0"},
    )
    assert (new.patchsets, dict(new.retired_patchsets)) == (
        ("b-fix",),
        {"a-fix": "a is written for 1.x", "c-fix": "in 2.1 itself"},
    )
    assert "retire" not in str(old.inputs())  # not a resolution input: the recipe digest stays


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            '{ id = "z-fix", reason = "r" }',
            "variant.old.retire-patchsets[0].id: retires 'z-fix', which [recipe] "
            "patchsets does not list (it lists: a-fix, b-fix, c-fix)",
        ),
        ('{ id = "b-fix", reason = " " }', "variant.old.retire-patchsets[0].reason: give the reason reviewers read"),
        ('{ id = "b-fix" }', "r.toml:8: variant.old.retire-patchsets[0].reason: missing required key"),
        (
            '{ id = "b-fix", reason = "r" }, { id = "b-fix", reason = "s" }',
            "variant.old.retire-patchsets[1].id: retires 'b-fix' again; keep one entry",
        ),
    ],
)
def test_a_retirement_needs_a_listed_id_and_a_reason(tmp_path: Path, entry: str, message: str) -> None:
    text = RETIRING.replace('[{ id = "b-fix", reason = "b is written for 2.x" }]', f"[{entry}]")
    with pytest.raises(RecipeError) as exc:
        load_recipe_text(tmp_path, text)
    assert message in str(exc.value)


def test_accept_variants_name_variants_of_the_recipe(tmp_path: Path) -> None:
    entry = (
        '\n[[verify.accept]]\nkind = "file-conflict"\nsubject = "x.py"\nreason = "r"\nexpires = 2030-01-01\n'
        'variants = ["{}"]\n'
    )
    load_recipe_text(
        tmp_path, RETIRING + entry.format("old") + entry.format("new")
    )  # one entry per variant: no duplicate
    with pytest.raises(RecipeError) as exc:
        load_recipe_text(tmp_path, RETIRING + entry.format("oldd"))
    assert "verify.accept[0].variants: 'oldd' is not a variant of this recipe (it has: new, old)" in str(exc.value)
    with pytest.raises(RecipeError) as exc:
        load_recipe_text(tmp_path, RETIRING + entry.format("old") + entry.format("old"))
    assert "verify.accept[1]: accepts file-conflict 'x.py' again (already verify.accept[0]); keep one entry" in str(
        exc.value
    )
