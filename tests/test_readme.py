"""The README stays a short guide and every relative link in it and under docs/ leads somewhere.

The narratives live in docs/; the README keeps the commands, short tables and links to them. A link
that points at a moved or renamed file is caught here rather than by a reader.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 400

# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def _markdown_files() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def relative_links(path: Path) -> list[str]:
    """The relative link targets of one Markdown file, outside code blocks and inline code.

    Web addresses, mail links and links to an anchor of the same page are left out: only links
    that name a file or folder of the repository can be checked here.
    """
    text = INLINE_CODE.sub("", FENCE.sub("", path.read_text()))
    targets = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I) or target.startswith("#"):
            continue
        targets.append(target)
    return targets


def test_the_readme_is_a_short_guide():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move narrative into docs/"


def anchors(path: Path) -> set[str]:
    """The anchors a Markdown renderer gives the headings of one file (GitHub's rule).

    Lower case, punctuation dropped, spaces to hyphens; a repeated heading gets ``-1``, ``-2``, ...
    """
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path):
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        linked = path.parent / file_part
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)  # the file is there, the section is not
    assert not broken, f"{path.relative_to(ROOT)} links to missing files or sections: {broken}"


def test_the_link_finder_sees_links_and_skips_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "See [a](a.md), ![plot](img/p.png) and [web](https://example.org), [here](#top).\n"
        "`[not](inline.md)`\n```sh\n[nor](fenced.md)\n```\n"
    )
    assert relative_links(page) == ["a.md", "img/p.png"]


def test_anchors_follow_the_heading_rule(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Per-size bundles: `workbench tune`\n## Notes\n## Notes\n```sh\n# not a heading\n```\n")
    assert anchors(page) == {"per-size-bundles-workbench-tune", "notes", "notes-1"}
