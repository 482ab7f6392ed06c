"""envforge: reproducible GPU inference stacks.

A recipe says what the stack is, a PEP 751 lock says which files make it up, patchsets say what we
change in third-party code and why, and verify proves on the machine that the environment is what
those say. See README.md and docs/design.md.

Importing this package is cheap on purpose: heavy libraries (libcst, huggingface_hub, git) are
imported by the modules that need them, so ``envforge --help`` starts fast.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
