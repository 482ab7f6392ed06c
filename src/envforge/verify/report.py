"""Rendering a verify report: human text, the versioned JSON data, JUnit XML.

The JSON data (schema ``envforge.verify/1``, documented in docs/verify.md) is wrapped by the CLI in
the common envelope (``cli/output.py``). JUnit XML is built with :mod:`xml.etree.ElementTree`: one
test case per check, one ``<failure>`` per finding, so CI systems show each finding.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from envforge.core.kinds import belongs_to
from envforge.core.plural import counted
from envforge.verify.findings import VerifyReport

__all__ = ["REPORT_SCHEMA", "as_json", "as_junit", "as_text", "summary_line"]

#: Version of the shape of :func:`as_json`'s data; bump on incompatible change (docs/verify.md).
REPORT_SCHEMA = 1


def as_json(report: VerifyReport) -> dict[str, Any]:
    """The report as JSON-able data, keys in a fixed order."""
    return {
        "report-schema": REPORT_SCHEMA,
        "environment": report.environment,
        "levels": list(report.levels),
        "clean": report.clean,
        "exit-code": report.exit_code,
        "fingerprint": report.fingerprint.as_dict(),
        "target": dict(report.target),
        "findings": [f.as_dict() for f in report.findings],
        "accepted": [a.as_dict() for a in report.accepted],
        "checks": [c.as_dict() for c in report.checks],
        "notes": list(report.notes),
        "measurements": dict(report.measurements),
        "elapsed-s": report.elapsed_s,
    }


def as_text(report: VerifyReport) -> list[str]:
    """Human lines: every finding with expected / actual / fix, then a summary line."""
    lines = []
    for f in report.findings:
        lines.append(f"{f.kind}: {f.subject}")
        lines.append(f"    expected: {f.expected}")
        lines.append(f"    actual:   {f.actual}")
        lines.append(f"    fix:      {f.fix}")
    for a in report.accepted:
        f = a.finding
        lines.append(f"accepted {f.kind}: {f.subject} (until {a.expires}: {a.reason})")
        lines.append(f"    actual:   {f.actual}")
    for n in report.notes:
        lines.append(f"note: {n}")
    for c in report.checks:
        if c.status == "skipped":
            lines.append(f"skipped: {c.level}/{c.name}: {c.detail}")
    ar = report.measurements.get("allreduce")
    if ar:
        lines.extend(_allreduce_lines(ar))
    fp = report.fingerprint
    lines.append(f"fingerprint: {fp.describe()}")
    lines.append(summary_line(report))
    return lines


def summary_line(report: VerifyReport) -> str:
    """The last line of :func:`as_text`: the levels that ran, the verdict, the counts, the time,
    then each requested level that did not run with why (its skipped checks' details).

    A level *ran* when one of its checks ran or it produced a finding (``nothing-to-check``,
    ``no-gpu``): ``verify static,gpu: clean`` on a machine whose gpu checks were all skipped would
    claim a proof that was never made. E.g. ``verify static: clean (8 checks ran, 3 skipped) in
    1.2 s; skipped level gpu: no NVIDIA GPU visible``; no level ran: ``verify (no level ran): ...``.
    """
    ran_levels = [
        lv
        for lv in report.levels
        if any(c.level == lv and c.status != "skipped" for c in report.checks)
        or any(f.level == lv for f in report.findings)
        or any(a.finding.level == lv for a in report.accepted)
    ]
    skipped = [lv for lv in report.levels if lv not in ran_levels]
    ran = sum(1 for c in report.checks if c.status != "skipped")
    verdict = "clean" if report.clean else counted(len(report.findings), "finding")
    if report.accepted:
        verdict += f", {len(report.accepted)} accepted"
    named = ",".join(ran_levels) if ran_levels else "(no level ran)"
    line = f"verify {named}: {verdict} ({counted(ran, 'check')} ran, {len(report.checks) - ran} skipped) in {report.elapsed_s} s"
    for lv in skipped:
        why = "; ".join(dict.fromkeys(c.detail for c in report.checks if c.level == lv and c.detail))
        line += f"; skipped level {lv}: {why or 'no check of this level applies'}"
    return line


def _allreduce_lines(ar: dict[str, Any]) -> list[str]:
    sizes = [str(s) for s in ar["sizes_bytes"]]
    out = [
        f"all-reduce latency (us), world size {ar['world_size']}, NCCL {ar['nccl']}:",
        "    " + "profile".ljust(14) + "".join(s.rjust(12) for s in sizes),
    ]
    for name, p in ar["profiles"].items():
        out.append("    " + name.ljust(14) + "".join(str(p["us"].get(s, "-")).rjust(12) for s in sizes))
    b = ar.get("per_step_budget")
    if b:
        per = ", ".join(f"{k} {v} ms" for k, v in b["by_profile_ms"].items())
        out.append(
            f"per verify step: {b['allreduces_per_step']} x {b['bytes_each']}-byte all-reduce = {per} "
            f"(world size {b['world_size']}); the field's verify step is {b['field_verify_step_ms']} ms"
        )
    return out


def as_junit(report: VerifyReport) -> bytes:
    """JUnit XML: a ``testsuite`` named ``envforge verify``, a ``testcase`` per check, and a skipped
    ``testcase`` per accepted finding (its message: the expiry and the reason)."""
    suite = ET.Element(
        "testsuite",
        name="envforge verify",
        tests=str(len(report.checks)),
        failures=str(sum(1 for c in report.checks if c.status == "findings")),
        skipped=str(sum(1 for c in report.checks if c.status == "skipped")),
        time=str(report.elapsed_s or 0),
    )
    for c in report.checks:
        case = ET.SubElement(suite, "testcase", classname=f"verify.{c.level}", name=c.name)
        if c.status == "skipped":
            ET.SubElement(case, "skipped", message=c.detail)
        found = [f for f in report.findings if f.level == c.level and belongs_to(f.kind, c.name)]
        for f in found:
            fail = ET.SubElement(case, "failure", message=f"{f.kind}: {f.subject}", type=f.kind)
            fail.text = f"expected: {f.expected}\nactual: {f.actual}\nfix: {f.fix}"
        if c.status == "findings" and not found:
            ET.SubElement(case, "failure", message=c.detail or "findings", type="finding")
    for a in report.accepted:  # reported, not failing: a skipped case CI systems list with its reason
        f = a.finding
        case = ET.SubElement(suite, "testcase", classname=f"verify.{f.level}", name=f"accepted {f.kind}: {f.subject}")
        ET.SubElement(case, "skipped", message=f"accepted until {a.expires}: {a.reason}")
    suite.set("tests", str(len(report.checks) + len(report.accepted)))
    suite.set("skipped", str(sum(1 for c in report.checks if c.status == "skipped") + len(report.accepted)))
    ET.indent(suite)
    data: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    return data
