"""The documentation says true things about itself and the CLI, and the user docs stay short.

- the user docs (README.md and every .md directly in docs/) are for the people who install and
  run the tool: at most 120 KB together, the README at most 15 KB, and no project history in
  them (no issue numbers, no commit hashes, no dated measurements: CHANGELOG.md keeps history);
  the maintainers' docs are in docs/maintainers/;
- the chart's commented NodePool example puts the per-NodePool settings where a run reads them,
  the NodePool's own metadata.annotations (under spec.template Karpenter would replace every
  node of the pool);
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
from typing import Any

import pytest
import yaml

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
README_LIMIT = 15_000  # 15 KB, as the maintainers' hook counts it
#: The user docs: an afternoon's reading. The maintainers' docs (docs/maintainers/) are apart.
USER_DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
USER_DOCS_LIMIT = 122_880  # 120 KB, `wc -c` of them together

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
def test_every_link_reaches_a_file_and_heading(doc: Path):  # docs/maintainers/ too
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
    known.add("NODE_HOLDER_CLOCK")  # gone: the CHANGELOG says what became of it
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


def test_the_user_docs_are_an_afternoon_and_the_maintainers_docs_apart():
    sizes = {p.name: len(p.read_bytes()) for p in USER_DOCS}
    assert sum(sizes.values()) <= USER_DOCS_LIMIT, (
        f"the user docs are {sum(sizes.values()):,} bytes, over {USER_DOCS_LIMIT:,}: {sizes}; "
        "cut, or move maintainers' material to docs/maintainers/"
    )
    assert {"README.md", "reference.md", "design.md"} <= set(sizes)
    assert (ROOT / "docs/maintainers/README.md").is_file()


#: "issue 23", "Issue #31", "(issue 24 §2)": a tracker the readers do not have.
_ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
#: A commit: a hex token of 7 to 40 characters with a digit and a letter, in backticks or after
#: "at" or "commit" (`18bb112`, "at 18bb112", "commit 069fdfa").
_HEX = r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}"
_COMMIT = re.compile(rf"`{_HEX}`|\b(?:at|commit) {_HEX}\b")
#: A dated measurement: a calendar date in prose that is not a timestamp (2026-11-27, not
#: 2026-11-27T01:00:00Z, which examples use).
_DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b(?!T)")


def history(text: str) -> list[str]:
    """What a user doc must not carry: issue numbers and commits anywhere, dates in prose."""
    return [*_ISSUE.findall(text), *_COMMIT.findall(text), *_DATE.findall(_prose(text))]


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_user_doc_carries_project_history(doc: Path):
    assert history(doc.read_text()) == [], f"{doc.name}: history belongs in CHANGELOG.md"


def test_the_history_check_sees_issues_commits_and_dates():
    assert history("as issue 23 asked; Issue #31") == ["issue 23", "Issue #31"]
    assert history("measured at 18bb112 and `069fdfa`, commit 0123abc") == [
        "at 18bb112",
        "`069fdfa`",
        "commit 0123abc",
    ]
    assert history("Measured on 2026-11-27:\n```\nstart 2026-11-27\n```\n") == ["2026-11-27"]
    # not history: a timestamp, a version, a port, a word of hex letters, a digest's name
    assert history("`2026-11-22T20:41:22Z`, v1.14.1, `65532`, `deadbeef`, sha256") == []


def nodepool_example(values: str) -> dict[str, Any]:
    """The NodePool the chart's values.yaml shows in its comments, parsed."""
    lines = values.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^#\s+kind: NodePool\s*$", line))
    while start > 0 and re.match(r"^#\s+\S", lines[start - 1]):
        start -= 1
    indent = len(re.match(r"^#(\s+)", lines[start]).group(1))
    block = []
    for line in lines[start:]:
        match = re.match(r"^#(\s*)(.*)$", line)
        if not match or not match.group(2) or len(match.group(1)) < indent:
            break
        block.append(line[1 + indent :])
    return yaml.safe_load("\n".join(block))


def _keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for value in node.values() for k in _keys(value)}
    if isinstance(node, list):
        return {k for value in node for k in _keys(value)}
    return set()


def test_the_charts_nodepool_example_puts_the_settings_in_metadata_annotations():
    example = nodepool_example((ROOT / "charts/karpenter-node-holder/values.yaml").read_text())
    settings = {"node-holder.dev/hold-duration", "node-holder.dev/max-hold"}
    assert example["kind"] == "NodePool"
    assert settings <= set(example.get("metadata", {}).get("annotations", {})), (
        "values.yaml's NodePool example: the settings go in the NodePool's metadata.annotations"
    )
    assert not settings & _keys(example.get("spec", {})), (
        "values.yaml's NodePool example puts settings under spec: a template change makes "
        "Karpenter replace every node of the pool, and a run does not read them there"
    )


def test_the_example_check_reads_the_comment_as_yaml():
    example = nodepool_example(
        "# a NodePool:\n#\n#   apiVersion: karpenter.sh/v1\n#   kind: NodePool\n#   spec:\n"
        "#     template:\n#       metadata:\n#         annotations:\n"
        "#           node-holder.dev/max-hold: 3h   # a comment\n\nholdDuration: 20m\n"
    )
    assert example == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "spec": {"template": {"metadata": {"annotations": {"node-holder.dev/max-hold": "3h"}}}},
    }
    assert "node-holder.dev/max-hold" in _keys(example["spec"])
