"""Generic libcst edits a patchset is made of, one class per kind.

Every operation works on one parsed file (a ``libcst.Module``) and ends in one :class:`Outcome`:

* ``changed``: the edit was made (``module`` is the new tree),
* ``holds``: its post-condition already holds (nothing to do),
* ``drifted``: the anchor it needs is missing or ambiguous (zero or several matches), or the
  patchset's value does not fit the code (a ``str`` key for an ``int``-keyed dict); ``fix`` then
  says what to change in the patchset.

An operation never raises on the code it reads (libcst codemod habit: success / skip / failure);
the engine maps ``holds`` to ``already-applied`` or ``upstream-fixed``. libcst is imported inside
the methods so loading patchsets (``patches list``) stays fast.

Kinds, by family: the anchored edits ``add-guard-operand``, ``add-dict-entry``,
``add-delegating-methods``, ``add-list-element`` (:mod:`.edits`); the replacements ``replace-definition``
and ``replace-text`` written by ``envforge patches commit``, and the escape hatch ``codemod`` (a
``libcst.codemod.Codemod`` class named by import path) (:mod:`.replacements`); the placements
``add-definition``, ``remove-definition``, ``add-statement``, ``remove-statement`` anchored to their
neighbours (:mod:`.placements`), and the moves ``move-definition``, ``move-statement`` (:mod:`.moves`). The shared base is
:mod:`.base`.
"""

from __future__ import annotations

from envforge.patching.operations.base import OPERATIONS, OpContext, Operation, Outcome
from envforge.patching.operations.edits import AddDelegatingMethods, AddDictEntry, AddGuardOperand, AddListElement
from envforge.patching.operations.moves import MoveDefinition, MoveStatement
from envforge.patching.operations.placements import (
    AddDefinition,
    AddStatement,
    RemoveDefinition,
    RemoveStatement,
    ReplaceModuleComments,
)
from envforge.patching.operations.replacements import (
    Codemod,
    ReplaceDefinition,
    ReplaceText,
    definition_code,
    definition_digest,
    definitions,
)

__all__ = [
    "OPERATIONS",
    "AddDefinition",
    "AddDelegatingMethods",
    "AddDictEntry",
    "AddGuardOperand",
    "AddListElement",
    "AddStatement",
    "Codemod",
    "MoveDefinition",
    "MoveStatement",
    "OpContext",
    "Operation",
    "Outcome",
    "RemoveDefinition",
    "RemoveStatement",
    "ReplaceDefinition",
    "ReplaceModuleComments",
    "ReplaceText",
    "definition_code",
    "definition_digest",
    "definitions",
]

OPERATIONS.update(
    (c.kind, c)
    for c in (
        AddGuardOperand,
        AddDictEntry,
        AddDelegatingMethods,
        AddListElement,
        Codemod,
        ReplaceDefinition,
        ReplaceText,
        AddDefinition,
        RemoveDefinition,
        AddStatement,
        RemoveStatement,
        ReplaceModuleComments,
        MoveDefinition,
        MoveStatement,
    )
)
