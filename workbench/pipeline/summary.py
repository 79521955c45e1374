"""A run's summary for people and for CI: Markdown (``summary.md``) and JUnit XML (``--junit FILE``).

JUnit: one test suite ``workbench run <project>``, one test case per step (reused or ran, its seconds) and one per
deployment target, failed when no candidate besides the FP32 baseline passes every gate there.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

from workbench.artifacts import write_text_atomic
from workbench.pipeline.run import RunResult


def markdown(result: RunResult) -> str:
    lines = [
        f"# workbench run: {result.project.name}",
        "",
        f"Project file `{result.project.path}`; {len(result.steps)} steps in {result.seconds:.1f} s; "
        f"exit status {result.exit_status}.",
        "",
        "| step | ran or reused | seconds | inputs |",
        "| --- | --- | ---: | --- |",
        *[
            f"| {s.name} | {'reused' if s.reused else 'ran'} | {s.seconds:.1f} | `{s.inputs[:12]}` |"
            for s in result.steps
        ],
        "",
        "| target | passing candidates | verdict | report |",
        "| --- | --- | --- | --- |",
        *[
            f"| {t.target} | {', '.join(t.passing) or 'none'} | {t.line} | `{t.report}` |"
            for t in result.targets
        ],
        "",
    ]
    return "\n".join(lines)


def junit(result: RunResult) -> str:
    suite = ElementTree.Element(
        "testsuite",
        name=f"workbench run {result.project.name}",
        tests=str(len(result.steps) + len(result.targets)),
        failures=str(sum(not t.passed for t in result.targets)),
        time=f"{result.seconds:.3f}",
    )
    for s in result.steps:
        case = ElementTree.SubElement(suite, "testcase", classname="workbench.run.step", name=s.name)
        case.set("time", f"{s.seconds:.3f}")
        ElementTree.SubElement(case, "system-out").text = s.line()
    for t in result.targets:
        case = ElementTree.SubElement(suite, "testcase", classname="workbench.run.target", name=t.target)
        if not t.passed:
            ElementTree.SubElement(
                case, "failure", message="no candidate besides the FP32 baseline passes"
            ).text = t.line
        ElementTree.SubElement(case, "system-out").text = f"{t.line}\nreport: {t.report}"
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_summaries(result: RunResult, junit_path: Path | None = None) -> list[Path]:
    """``summary.md`` in the run's folder, and the JUnit file when asked for."""
    written = [result.folder / "summary.md"]
    write_text_atomic(written[0], markdown(result))
    if junit_path is not None:
        write_text_atomic(Path(junit_path), junit(result))
        written.append(Path(junit_path))
    return written
