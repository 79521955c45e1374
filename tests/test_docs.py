"""The user docs (README.md, docs/*.md) speak of the product in the present tense, and what they point at
exists: no development-history narration (numbered work rounds, issue numbers, "used to"), every results
JSON they name under benchmarks/results/ is committed, every relative link resolves to a file (and a
heading, for `#anchor` links). CHANGELOG.md is where history belongs and is not checked for narration."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Lines that tell the project's story instead of the product's: the shared hook's pattern for work rounds
# and issue numbers, and the usual phrasing of history ("used to", "was changed", "now", "no longer", ...).
NARRATION = re.compile(
    r"\bsessions? [0-9]|this session|\(issue [0-9]+\)|\bissue [0-9]+\b"
    r"|\bused to\b|\bwas changed\b|\bre-measured\b|\brebased?\b|\bno longer\b|\bnow\b"
    r"|\bearlier (?:run|runs|study|variant|plan|search|session|lease)\b|\bat the time\b|\bas it stood\b"
    r"|\bsince (?:then|session)\b|\bmerged after\b",
    re.IGNORECASE,
)
RESULT_PATH = re.compile(r"benchmarks/results/[A-Za-z0-9_./{},-]+")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def narration_lines(text: str) -> list[str]:
    """The lines of a doc that narrate development history."""
    return [line.strip() for line in text.splitlines() if NARRATION.search(line)]


def _expand_braces(path: str) -> list[str]:
    """`a_{x,y}.json` -> `a_x.json`, `a_y.json` (one level, as the docs write them)."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    head, tail = path[: match.start()], path[match.end() :]
    return [p for alt in match.group(1).split(",") for p in _expand_braces(head + alt + tail)]


def missing_result_paths(text: str, root: Path) -> list[str]:
    """Paths under benchmarks/results/ named in a doc that do not exist under root."""
    missing = []
    for found in RESULT_PATH.findall(text):
        for path in _expand_braces(found.rstrip(".,")):
            if not (root / path).exists():
                missing.append(path)
    return missing


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for a Markdown file's headings: lower case, punctuation dropped, spaces to hyphens,
    a repeated anchor numbered -1, -2, ..."""
    anchors: set[str] = set()
    for title in HEADING.findall(FENCE.sub("", text)):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "").lower()
        slug = "".join(ch for ch in plain if ch in " -_" or unicodedata.category(ch)[0] in "LN").replace(
            " ", "-"
        )
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def broken_links(doc: Path) -> list[str]:
    """Relative links in a doc and images whose file, or whose heading for a `#anchor`, does not exist."""
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # http:, https:, mailto: ...
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists() or (
            anchor
            and linked.suffix == ".md"
            and anchor not in heading_anchors(linked.read_text(encoding="utf-8"))
        ):
            broken.append(target)
    return broken


def _name(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_doc_does_not_narrate_history(doc: Path) -> None:
    assert narration_lines(doc.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_results_json_named_in_doc_exists(doc: Path) -> None:
    assert missing_result_paths(doc.read_text(encoding="utf-8"), ROOT) == []


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_relative_links_resolve(doc: Path) -> None:
    assert broken_links(doc) == []


@pytest.mark.parametrize(
    "line",
    [
        "the searched plan of session 4 kept 58.6 % INT8",
        "Sessions 8-9 gave 1.087",
        "measured earlier in this session",
        "### Which backend produced what (issue 23)",
        "see Issue 19's command",
        "Two demo runs used to say SHIP fp32",
        "The verdict now works like this",
        "the branch's code of that morning, before it was rebased onto main",
        "Peak RSS, re-measured after the change",
        "The default was changed to percentile",
        "the earlier study's entropy variant",
        "the calibration path no longer imports onnx",
    ],
)
def test_narration_is_found(line: str) -> None:
    assert narration_lines(f"A fine line.\n{line}\nAnother fine line.") == [line]


@pytest.mark.parametrize(
    "line",
    [
        "The session's intra-op threads spin while ONNX Runtime runs.",
        "`python benchmarks/calibration.py --rounds 3` (benchmarks/results/calibration.json)",
        "Known issues are tracked in the issue tracker.",
        "Each round runs every candidate once, order rotated.",
        "Knowledge of the model is read once.",
    ],
)
def test_present_tense_lines_pass(line: str) -> None:
    assert narration_lines(line) == []


def test_missing_result_path_is_found(tmp_path: Path) -> None:
    (tmp_path / "benchmarks/results").mkdir(parents=True)
    (tmp_path / "benchmarks/results/a_x.json").write_text("{}")
    text = "Numbers: benchmarks/results/a_{x,y}.json and `benchmarks/results/a_x.json`."
    assert missing_result_paths(text, tmp_path) == ["benchmarks/results/a_y.json"]


def test_broken_links_are_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text(
        "# Other page\n\n## The `calibrate` verb (CPU, GPU)\n## Twice\n## Twice\n"
    )
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n[ok](other.md) [ok](other.md#the-calibrate-verb-cpu-gpu) [ok](other.md#twice-1)"
        " [ok](#doc) [web](https://example.com/x) ![img](missing.png)\n"
        "[gone](missing.md) [bad anchor](other.md#nope) [bad local](#nowhere)\n"
        "```\n[in code](ignored.md)\n```\n"
    )
    assert broken_links(doc) == ["missing.png", "missing.md", "other.md#nope", "#nowhere"]
