"""Every document the code, templates and README cite lies in the repository, at the section cited.

Citations are written as a repository path, optionally with a section: `docs/design.md §7`,
`docs/reference/performance-figures.md §3`. The design and reference notes used to live outside the
repository and were cited by short names (`DESIGN §7`, `performance-figures §3`); those forms are
refused so that a reader can always open what is cited.
"""

import re

from tests.hygiene.repo import ROOT, text_files

CITATION = re.compile(r"(?<![\w/.-])(docs/[\w./-]+?\.(?:md|png|json|svg|pdf))(?:\s*§\s*(\d+(?:\.\d+)*))?")
OLD_FORMS = re.compile(r"DESIGN(?:\.md)? ?§|shared/reference/|\.\./shared/(?!traces)|research/mig"
                       r"|(?<!docs/reference/)performance-figures|(?<!docs/reference/)mig-and-topology")
HEADING = re.compile(r"^#+\s+(\d+(?:\.\d+)*)[.\s]", re.MULTILINE)


def citations() -> list[tuple[str, str, str | None]]:
    """(file citing, document, section or None) for every citation in the repository."""
    found = []
    for path in text_files():
        if path.is_relative_to(ROOT / "docs" / "reference"):
            continue  # the reference notes cite files of other repositories by their paths there
        for match in CITATION.finditer(path.read_text(errors="replace")):
            found.append((str(path.relative_to(ROOT)), match.group(1).rstrip("."), match.group(2)))
    return found


def test_the_design_and_reference_notes_are_cited_at_all():
    cited = {document for _where, document, _section in citations()}
    assert {"docs/design.md", "docs/reference/performance-figures.md", "docs/reference/mig-and-topology.md"} <= cited


def test_every_cited_document_exists():
    missing = [(where, document) for where, document, _section in citations() if not (ROOT / document).is_file()]
    assert missing == []


def test_every_cited_section_exists():
    wrong = []
    for where, document, section in citations():
        if section and (ROOT / document).is_file():
            if section not in HEADING.findall((ROOT / document).read_text()):
                wrong.append((where, f"{document} §{section}"))
    assert wrong == []


def test_no_citation_names_a_document_outside_the_repository():
    old = [(str(path.relative_to(ROOT)), match.group(0)) for path in text_files()
           for match in OLD_FORMS.finditer(path.read_text(errors="replace"))
           if path.name != "test_citations.py"]
    assert old == [], "cite docs/design.md §N or docs/reference/<name>.md §N instead"
