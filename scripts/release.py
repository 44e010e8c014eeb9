"""What the release workflow (.github/workflows/release.yml) decides, in one place the tests run.

    python3 scripts/release.py version TAG OWNER   # key=value lines for $GITHUB_OUTPUT
    python3 scripts/release.py notes VERSION       # the release notes: CHANGELOG.md's section
    python3 scripts/release.py chart VERSION IMAGE DIGEST CHART_DIR   # the released chart

A tag is vX.Y.Z, or a pre-release vX.Y.Z-alpha.N, -beta.N, -rc.N. It must agree with the
repository before anything is built: reconcile.__version__ (in PEP 440 form: 1.2.3rc1), the
chart's version and appVersion and the kustomize base's newTag (SemVer: 1.2.3-rc.1), and a
CHANGELOG.md section for it with the changes and the upgrade notes. `chart` rewrites a copy of
the chart for packaging: values.yaml's image.digest set to the digest the release pushed, and the
Artifact Hub annotations of this version (changes from the changelog, the image by digest,
prerelease). Exit 1 with one `::error::` line when something disagrees.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = re.compile(r"v(?P<release>\d+\.\d+\.\d+)(?:-(?P<phase>alpha|beta|rc)\.(?P<n>\d+))?")
PEP440 = {"alpha": "a", "beta": "b", "rc": "rc"}
# Keep a Changelog's headings are Artifact Hub's change kinds.
KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
UPGRADE = "Upgrade notes"


class Disagreement(Exception):
    """The tag, the repository or the changelog disagree: nothing is published."""


def _read(path: str, pattern: str) -> str:
    found = re.search(pattern, (ROOT / path).read_text(), re.MULTILINE)
    return found.group(1) if found else f"(none in {path})"


def version(tag: str, owner: str) -> dict[str, str]:
    """The outputs of the workflow's version job for `tag`."""
    match = TAG.fullmatch(tag)
    if match is None:
        raise Disagreement(
            f"tag {tag}: use vX.Y.Z, or vX.Y.Z-rc.N (alpha, beta, rc) for a pre-release"
        )
    semver = tag[1:]
    phase = match["phase"]
    pep440 = match["release"] + (f"{PEP440[phase]}{match['n']}" if phase else "")
    found = {
        "package": _read("reconcile/__init__.py", r'^__version__ = "(.*)"$'),
        "chart": _read("charts/karpenter-node-holder/Chart.yaml", r"^version: (.*)$"),
        "appVersion": _read("charts/karpenter-node-holder/Chart.yaml", r'^appVersion: "(.*)"$'),
        "kustomize": _read("cronjob/base/kustomization.yaml", r'^ *newTag: "(.*)"$'),
    }
    wanted = {"package": pep440, "chart": semver, "appVersion": semver, "kustomize": semver}
    if found != wanted:
        have = ", ".join(f"{k} {v}" for k, v in found.items())
        raise Disagreement(f"tag {tag}: {have}; bump them together before tagging")
    notes(semver)
    lowered = owner.lower()
    epoch = subprocess.run(
        ["git", "log", "-1", "--format=%ct"], capture_output=True, text=True, cwd=ROOT, check=False
    ).stdout.strip()
    return {
        "version": semver,
        "prerelease": "true" if phase else "false",
        "image": f"ghcr.io/{lowered}/karpenter-node-holder",
        "charts": f"oci://ghcr.io/{lowered}/charts",
        "epoch": epoch or "0",
    }


def _section(version: str) -> str:
    text = (ROOT / "CHANGELOG.md").read_text()
    found = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if found is None:
        raise Disagreement(f"CHANGELOG.md has no section ## [{version}]")
    return found.group(1).strip()


def _subsections(section: str) -> dict[str, list[str]]:
    """`### Heading` -> its bullet points (a bullet's continuation lines joined)."""
    parts: dict[str, list[str]] = {}
    heading = None
    for line in section.splitlines():
        if line.startswith("### "):
            heading = line[4:].strip()
            parts[heading] = []
        elif heading and line.startswith("- "):
            parts[heading].append(line[2:].strip())
        elif heading and parts[heading] and line.startswith("  ") and line.strip():
            parts[heading][-1] += " " + line.strip()
    return parts


def notes(version: str) -> str:
    """CHANGELOG.md's section for `version`: at least one change, and the upgrade notes."""
    section = _section(version)
    parts = _subsections(section)
    if not any(parts.get(kind) for kind in KINDS):
        raise Disagreement(f"CHANGELOG.md [{version}]: no change under {', '.join(KINDS)}")
    if UPGRADE not in parts:
        raise Disagreement(f"CHANGELOG.md [{version}]: no ### {UPGRADE} (say 'None.' if so)")
    return section + "\n"


def chart(version: str, image: str, digest: str, directory: Path) -> None:
    """Rewrite the chart in `directory` as released: the image by digest, this version's
    Artifact Hub annotations. values.yaml keeps its comments (only one line changes)."""
    import yaml  # noqa: PLC0415 (the version and notes commands need only the standard library)

    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise Disagreement(f"image digest {digest!r}: expected sha256:<64 hex digits>")
    values = directory / "values.yaml"
    pattern = r'^(image:\n(?:  .*\n|\s*#.*\n)*?  digest: )""$'
    text, count = re.subn(pattern, rf'\1"{digest}"', values.read_text(), count=1, flags=re.M)
    if count != 1:
        raise Disagreement(f'{values}: no `  digest: ""` line under image:')
    values.write_text(text)

    path = directory / "Chart.yaml"
    meta = yaml.safe_load(path.read_text())
    changes = [
        {"kind": kind.lower(), "description": item}
        for kind, items in _subsections(_section(version)).items()
        if kind in KINDS
        for item in items
    ]
    annotations = meta.setdefault("annotations", {})
    annotations["artifacthub.io/changes"] = yaml.safe_dump(changes, sort_keys=False)
    annotations["artifacthub.io/images"] = yaml.safe_dump(
        [
            {
                "name": "karpenter-node-holder",
                "image": f"{image}:{version}@{digest}",
                "platforms": ["linux/amd64", "linux/arm64"],
            }
        ],
        sort_keys=False,
    )
    annotations["artifacthub.io/prerelease"] = "true" if "-" in version else "false"

    class Dumper(yaml.SafeDumper):
        """Multi-line strings (the annotations) as literal blocks, as in the committed file."""

    Dumper.add_representer(
        str,
        lambda dumper, s: dumper.represent_scalar(
            "tag:yaml.org,2002:str", s, style="|" if "\n" in s else None
        ),
    )
    header = "# Released from charts/karpenter-node-holder/Chart.yaml by scripts/release.py.\n"
    path.write_text(header + yaml.dump(meta, Dumper=Dumper, sort_keys=False, width=100))


def main(argv: list[str]) -> int:
    command, *args = argv
    try:
        if command == "version":
            print("\n".join(f"{k}={v}" for k, v in version(*args).items()))
        elif command == "notes":
            print(notes(*args), end="")
        elif command == "chart":
            version_, image, digest, directory = args
            chart(version_, image, digest, Path(directory))
        else:
            raise SystemExit(f"unknown command {command}: version, notes or chart")
    except Disagreement as error:
        print(f"::error::{error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
