"""The documentation says true things about itself and the CLI, and the README stays short.

- README.md is for the people who install and run the tool: at most 15 KB;
- every link between the project's Markdown files reaches a file that exists and, with an
  `#anchor`, a heading of it (GitHub's anchors), also the chart README's absolute links into
  this repository (Artifact Hub shows that README away from the repository);
- every `HOLD_*` and `NODE_HOLDER_*` variable the docs name is one the CLI reads, or one of the
  test suite's (a documented variable that does not exist, as `NODE_HOLDER_KUBECONFIG` once
  was, would be set by someone and silently do nothing: exit 2 in fact);
- every `make X` a file tells someone to run is a target of the Makefile;
- docs/maintainers/testing.md's table is the map of the suite: each folder's row names exactly the
  test files in that folder, so a feature's tests are found from the map and none is left off it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconcile.cli import options

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "https://github.com/karpenter-node-holder/karpenter-node-holder"
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "charts/karpenter-node-holder/README.md",
        *(ROOT / "docs").glob("**/*.md"),
    ]
)
README_LIMIT = 15_000  # 15 KB, as the issue and the maintainers' hook count it

_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The Markdown outside fenced code blocks."""
    return _FENCE.sub("", text)


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, and
    `-1`, `-2` ... for repeated headings."""
    found: set[str] = set()
    for line in _prose(path.read_text()).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in found:
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found


def links(path: Path) -> list[tuple[Path, str]]:
    """(target file, anchor or '') for each link into this repository."""
    out = []
    for target in _LINK.findall(_prose(path.read_text())):
        if target.startswith(REPOSITORY):
            rest = target[len(REPOSITORY) :].removeprefix("/blob/main/").removeprefix("/")
            file_part, _, anchor = rest.partition("#")
            out.append((ROOT / (file_part or "README.md"), anchor))
        elif not re.match(r"^[a-z]+:", target):
            file_part, _, anchor = target.partition("#")
            out.append(((path.parent / file_part).resolve() if file_part else path, anchor))
    return out


def test_the_readme_is_for_users_and_short():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes: move reference material to docs/"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_reaches_a_file_and_heading(doc: Path):
    for target, anchor in links(doc):
        assert target.exists(), f"{doc.name} links to {target}, which does not exist"
        if anchor and target.suffix == ".md":
            assert anchor in anchors(target), f"{doc.name}: no heading #{anchor} in {target.name}"


def test_the_link_check_sees_a_broken_anchor(tmp_path: Path):
    (tmp_path / "a.md").write_text(
        "# Title\n\n## The `--max-hold` rule\n\n## Uninstall\n## Uninstall\n"
    )
    assert anchors(tmp_path / "a.md") == {
        "title",
        "the---max-hold-rule",
        "uninstall",
        "uninstall-1",
    }
    (tmp_path / "b.md").write_text("[x](a.md#nope) [y](a.md#uninstall-1)\n```\n[z](gone.md)\n```\n")
    assert links(tmp_path / "b.md") == [
        (tmp_path / "a.md", "nope"),
        (tmp_path / "a.md", "uninstall-1"),
    ]


def test_every_variable_the_docs_name_exists():
    known = {setting.env for setting in options.SETTINGS} | set(options.NOT_SETTINGS)
    known |= set(options.RETIRED)  # the CHANGELOG says what became of them
    known.add("NODE_HOLDER_DRYRUN")  # the docs' example of a typo that is exit 2
    for doc in DOCS:
        named = set(re.findall(r"\b(?:NODE_HOLDER|HOLD)_[A-Z0-9_]*[A-Z0-9]\b", doc.read_text()))
        assert named <= known, f"{doc.name} names {sorted(named - known)}: no such variable"


def test_the_testing_map_names_every_test_file_in_its_folder():
    mapped = {
        f"{folder}/{name}"
        for folder, row in re.findall(
            r"^\| `tests/(\w+)/` \|(.*)$",
            (ROOT / "docs/maintainers/testing.md").read_text(),
            re.MULTILINE,
        )
        for name in re.findall(r"\btest_\w+\.py\b", row)
    }
    present = {str(p.relative_to(ROOT / "tests")) for p in (ROOT / "tests").glob("**/test_*.py")}
    assert present == mapped, (
        f"docs/maintainers/testing.md's map leaves out {sorted(present - mapped)} and names files "
        f"that are not there: {sorted(mapped - present)}; name each test file in its folder's row"
    )


_MAKE_COMMAND = re.compile(r"(?:`|^\s*(?:\$ )?|run: )make ([a-z][a-z0-9-]*)", re.MULTILINE)
_MAKE_TARGETS = re.compile(r"^([a-z][a-z0-9 -]*):(?!=)", re.MULTILINE)


def test_every_make_command_a_file_names_is_a_target() -> None:
    targets = {
        t for line in _MAKE_TARGETS.findall((ROOT / "Makefile").read_text()) for t in line.split()
    }
    files = [
        *DOCS,
        ROOT / ".ci/run",
        *(ROOT / "charts").rglob("*.yaml"),
        *(ROOT / "charts").rglob("*.tpl"),
    ]
    named = {
        (f.relative_to(ROOT).as_posix(), m)
        for f in files
        for m in _MAKE_COMMAND.findall(f.read_text())
    }
    assert {m for _, m in named} >= {"test", "image-test", "chart-docs"}  # the check sees them
    assert sorted((f, m) for f, m in named if m not in targets) == []
