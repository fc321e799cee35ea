"""Every rule against its golden cases (tests/golden/diff/cases.yaml → expected.txt); `pytest --update-golden`
rewrites expected.txt from the current findings, for review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from svcgen.contractdiff import RULES, diff_manifests
from tests.support.diffs import CASES, EXPECTED, golden_line, load_fragment


def load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = yaml.safe_load(CASES.read_text(encoding="utf-8"))
    return cases


def case_title(case: dict[str, Any]) -> str:
    return f"{case['rule']}: {case['case']}" if "case" in case else str(case["rule"])


def render_expected(tmp_path: Path) -> tuple[str, dict[str, list[str]]]:
    """The expected.txt text of every case, and each case's rule ids."""
    sections, rules = [], {}
    for index, case in enumerate(load_cases()):
        files = case.get("files")
        old = load_fragment(tmp_path / str(index) / "old", case["old"], files)
        new = load_fragment(tmp_path / str(index) / "new", case["new"], files)
        report = diff_manifests(old, new)
        title = case_title(case)
        rules[title] = [finding.rule for finding in report.findings]
        verdict = "exit 1" if report.breaking else "exit 0"
        sections.append("\n".join([f"## {title} ({verdict})", *map(golden_line, report.findings)]))
    return "\n\n".join(sections) + "\n", rules


def test_findings_match_the_golden_file(tmp_path: Path, update_golden: bool) -> None:
    text, _ = render_expected(tmp_path)
    if update_golden:
        EXPECTED.write_text(text, encoding="utf-8")
        return
    assert text == EXPECTED.read_text(encoding="utf-8"), "findings changed; run pytest --update-golden and review"


def test_each_case_finds_its_rule_and_every_rule_has_a_case(tmp_path: Path) -> None:
    _, rules = render_expected(tmp_path)
    missing_in_case = [title for title, found in rules.items() if title.split(":")[0] not in found]
    assert missing_in_case == []
    covered = {title.split(":")[0] for title in rules}
    assert [rule.id for rule in RULES if rule.id not in covered] == []


def test_case_titles_are_unique() -> None:
    titles = [case_title(case) for case in load_cases()]
    assert len(titles) == len(set(titles))
