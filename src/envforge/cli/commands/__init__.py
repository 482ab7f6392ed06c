"""Registration of the ``envforge`` commands: one module per command group, argparse only.

Each module has ``register(subparsers)``, which adds its commands and sets each one's ``handler``
to a reference ``"envforge.cli.<module>:<function>"``: :func:`envforge.cli.main` imports that
module (the handlers, which import the core at their top) only for the command that runs, so
``envforge --help`` and ``envforge lock diff --help`` import no stage package above
:mod:`envforge.core`. ``envforge.cli._COMMAND_GROUPS`` says which of these modules register each
top-level command.
"""

__all__ = ["SUMMARIES"]

#: Top-level command -> its one-line help, in the order ``envforge --help`` lists them. The
#: registration modules pass these as ``help=``; ``envforge --help`` (no command given) builds its
#: listing from this table alone, without registering any command (``envforge.cli._listing``).
SUMMARIES = {
    "lock": "resolve a recipe into PEP 751 locks (or --check them); also: lock diff, lock textconv",
    "build": "build envs/<recipe>-<variant> from its lock (a new generation)",
    "rollback": "point envs/<name> back at the previous generation (or --to gN)",
    "up": "the main job: check the lock, build, patch, verify (default: the project's recipe)",
    "run": "run a command in an environment's live generation (envforge run [ENV] -- CMD)",
    "env": "environments: list, show (the env profile a process sees)",
    "envs": "every environment, its generations, which one is live (= env list)",
    "gc": "remove old generations (keep the live one and the --keep newest)",
    "apply-patches": "apply (or revert) patchsets on an environment",
    "patches": "patchsets: list, export, check (before an upgrade), diff, new + commit (a hand edit as a patchset), import (an upstream diff)",
    "sbom": "write a CycloneDX 1.6 SBOM of an environment (every distribution, every patch's pedigree)",
    "verify": "prove an environment is what its lock and patchsets say (and the GPU box suits it)",
    "drafter": "fetch, inspect and compare EAGLE-3 draft models, pinned and safe",
    "bench": "smoke benchmark: start each [verify.smoke] server, measure tok/s, TTFT, ITL",
    "fleet": "verify or build the same stack on every node of a Ray cluster",
    "cache": "envforge's own caches (patch results, released wheels): dir, clean, prune, with sizes",
    "init": "scaffold a project: recipes/, patchsets/, lockfiles/, .gitattributes, .gitignore",
    "completion": "print the shell completion script for bash, zsh or fish",
}
