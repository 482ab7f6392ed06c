"""What an inference engine's own launch code writes into ``os.environ`` over the env profile (data, no I/O).

The env profile's hook sets each variable with ``setdefault`` semantics when the interpreter starts
(:mod:`envforge.env.profile`); the engine's launcher runs later in the same process and assigns some
variables unconditionally. A profile's ``CUDA_DEVICE_MAX_CONNECTIONS = "1"`` is then ``8`` in the
served process, and ``--enable-symm-mem`` turns the profile's ``NCCL_CUMEM_ENABLE = "0"`` into
``1`` (field case B38). :func:`envforge.env.profile.effective.effective_environment` applies these
writes after the profile, so ``env show``, verify and bench record what the server really runs with.

Sources, kept with the data:

- sglang 0.5.9: ``sglang/srt/entrypoints/engine.py``, function ``_set_envs_and_config`` of the
  ``sglang==0.5.9`` wheel from PyPI (``sglang-0.5.9-py3-none-any.whl``), called by
  ``_launch_subprocesses`` before the scheduler and detokenizer processes start (they inherit the
  result). Every ``os.environ["X"] = ...`` assignment of that function is one :class:`LauncherWrite`
  below, in source order, with its line; the flags are the ``server_args`` attributes of the
  assignment's ``if`` as command-line options (``enable_symm_mem`` -> ``--enable-symm-mem``,
  ``sglang/srt/server_args.py``). tests/recipe/test_launchers.py reads the real wheel and checks
  this table against it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ALWAYS",
    "IF_UNSET",
    "LAUNCHERS",
    "SGLANG_0_5_9",
    "UNLESS_ZERO",
    "Launcher",
    "LauncherWrite",
    "launcher_for",
]

#: The write is a plain assignment: it replaces whatever the process had.
ALWAYS: Final = "always"
#: The write happens only when the variable is absent (``"X" not in os.environ`` / ``.get("X") is None``).
IF_UNSET: Final = "if-unset"
#: The write happens unless the variable is set to ``"0"`` (``os.environ.get("X", "1") != "0"``).
UNLESS_ZERO: Final = "unless-0"


@dataclass(frozen=True, slots=True)
class LauncherWrite:
    """One ``os.environ[name] = value`` of a launcher.

    ``value``: the text written; None when the launcher computes it per run (``SGLANG_RUN_ID``).
    ``when``: :data:`ALWAYS`, :data:`IF_UNSET` or :data:`UNLESS_ZERO`. ``flags``: the write applies
    only when one of these options is on the server's command line (empty: whatever the flags).
    ``line``: the assignment's line in the launcher's source file.
    """

    name: str
    value: str | None
    when: str
    flags: tuple[str, ...]
    line: int

    def applies(self, argv: Sequence[str], current: str | None) -> bool:
        """Whether this write happens for a server started with ``argv`` when the variable is
        ``current`` (None: absent) just before it."""
        if self.flags and not any(f in argv for f in self.flags):
            return False
        if self.when == IF_UNSET:
            return current is None
        if self.when == UNLESS_ZERO:
            return current != "0"
        return True


@dataclass(frozen=True, slots=True)
class Launcher:
    """An engine version's launch code: where it is (``source``: file and function) and its writes.

    For one variable, the first write (in order) that :meth:`LauncherWrite.applies` is the one that
    happens; the real code's ``if`` branches are exclusive in the same way.
    """

    engine: str
    version: str
    source: str
    writes: tuple[LauncherWrite, ...]

    @property
    def label(self) -> str:
        """``sglang-0.5.9``: how a source names this launcher."""
        return f"{self.engine}-{self.version}"

    def apply(self, env: Mapping[str, str], argv: Sequence[str]) -> dict[str, LauncherWrite]:
        """The writes that happen for a server started with ``argv`` in environment ``env``:
        name -> the write (its ``value`` is what the variable holds afterwards, None: a per-run value).

        >>> sorted(SGLANG_0_5_9.apply({"NCCL_CUMEM_ENABLE": "0"}, ["--enable-symm-mem"]))[:3]
        ['CUDA_DEVICE_MAX_CONNECTIONS', 'CUDA_MODULE_LOADING', 'CUTE_DSL_LOG_LEVEL']
        """
        done: dict[str, LauncherWrite] = {}
        seen: set[str] = set()
        for w in self.writes:
            if w.name in seen:
                continue
            if w.applies(argv, env.get(w.name)):
                done[w.name] = w
                seen.add(w.name)
            elif not w.flags:
                seen.add(w.name)  # the unconditional branch did not fire: the variable stays
        return done


_SYMM = ("--enable-symm-mem",)
_NVLS = ("--enable-nccl-nvls", "--enable-symm-mem")

#: sglang 0.5.9, ``sglang/srt/entrypoints/engine.py`` ``_set_envs_and_config`` (lines 806-836).
SGLANG_0_5_9: Final = Launcher(
    "sglang",
    "0.5.9",
    "sglang/srt/entrypoints/engine.py _set_envs_and_config",
    (
        # if "NCCL_CUMEM_ENABLE" not in os.environ or server_args.enable_symm_mem:
        #     os.environ["NCCL_CUMEM_ENABLE"] = str(int(server_args.enable_symm_mem))
        LauncherWrite("NCCL_CUMEM_ENABLE", "1", ALWAYS, _SYMM, 809),
        LauncherWrite("NCCL_CUMEM_ENABLE", "0", IF_UNSET, (), 809),
        # if "NCCL_NVLS_ENABLE" not in os.environ or server_args.enable_nccl_nvls or server_args.enable_symm_mem:
        #     os.environ["NCCL_NVLS_ENABLE"] = str(int(server_args.enable_nccl_nvls or server_args.enable_symm_mem))
        LauncherWrite("NCCL_NVLS_ENABLE", "1", ALWAYS, _NVLS, 815),
        LauncherWrite("NCCL_NVLS_ENABLE", "0", IF_UNSET, (), 815),
        LauncherWrite("CUDA_DEVICE_MAX_CONNECTIONS", "8", ALWAYS, (), 818),
        LauncherWrite("CUDA_MODULE_LOADING", "AUTO", ALWAYS, (), 819),
        LauncherWrite("TRTLLM_ENABLE_PDL", "1", UNLESS_ZERO, (), 823),
        LauncherWrite("CUTE_DSL_LOG_LEVEL", "30", IF_UNSET, (), 827),
        LauncherWrite("CUTE_DSL_LOG_TO_CONSOLE", "1", IF_UNSET, (), 831),
        # f"sglang-run-{time.time()}-{random.randint(0, 100000000)}"
        LauncherWrite("SGLANG_RUN_ID", None, ALWAYS, (), 834),
    ),
)

#: Every launcher envforge knows, by (engine, version).
LAUNCHERS: Final[Mapping[tuple[str, str], Launcher]] = {("sglang", "0.5.9"): SGLANG_0_5_9}


def launcher_for(engine: str, version: str | None) -> Launcher | None:
    """The launcher of ``engine`` at ``version`` (None: no data for that version, or no version)."""
    return LAUNCHERS.get((engine, version or ""))
