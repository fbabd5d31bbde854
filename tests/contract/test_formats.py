"""`convtap audit` and `convtap rules` as CI and people use them: formats and exit codes."""

from __future__ import annotations

import contextlib
import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import jsonschema
import pytest
from convtap.contract.formats import MINTED
from convtap.contract.registry import registry
from convtap.ingest.capture import import_into

from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "captures" / "examples" / "rules"
SARIF_SCHEMA = ROOT / "tests" / "fixtures" / "sarif-2.1.0-rtm.5.json"


@pytest.fixture(scope="module")
def faulty_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture with an error (the recipient) and a warning (no prepare) on one return."""
    db = tmp_path_factory.mktemp("audit") / "capture.db"
    har = json.loads((RULES / "return-recipient" / "fail.har").read_text())
    entries = har["log"]["entries"]
    del entries[3]  # the prepare before the return: prepare-missing, a warning
    path = db.with_suffix(".har")
    path.write_text(json.dumps(har))
    import_into(db, [path])
    return db


def test_json_has_the_contract_shape(faulty_db: Path) -> None:
    proc = convtap("audit", "--db", str(faulty_db), "--format", "json")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["summary"] == {"calls": 1, "returns": 1,
                              "findings": {"error": 1, "warning": 1, "info": 0}}  # fmt: skip
    keys = {"rule", "severity", "message", "conversation_id", "call_id", "return_id", "flow_id",
            "evidence"}  # fmt: skip
    assert all(set(f) == keys for f in out["findings"])
    (error,) = [f for f in out["findings"] if f["severity"] == "error"]
    assert error["rule"] == "return-recipient"
    assert error["call_id"] == "b6d6e3a6-af6f-4a78-a649-8e3935182fcc"
    assert error["return_id"] == "b65539dc-d45f-4b37-b735-a11ac75aafed"
    assert error["evidence"] == {"expected": "all", "actual": "alefita_way"}
    assert error["conversation_id"] and error["flow_id"]


@pytest.mark.parametrize(
    ("args", "status"),
    [((), 1), (("--fail-on", "never"), 0), (("--fail-on", "warning"), 1),
     (("--rule", "prepare-missing"), 0), (("--rule", "prepare-missing", "--fail-on", "warning"), 1),
     (("--rule", "no-such-rule"), 2), (("--format", "yaml"), 2)],
)  # fmt: skip
def test_exit_status(faulty_db: Path, args: tuple[str, ...], status: int) -> None:
    assert convtap("audit", "--db", str(faulty_db), *args).returncode == status


def test_rule_filter_keeps_only_those_rules(faulty_db: Path) -> None:
    out = json.loads(convtap("audit", "--db", str(faulty_db), "--format", "json",
                             "--rule", "prepare-missing").stdout)  # fmt: skip
    assert [f["rule"] for f in out["findings"]] == ["prepare-missing"]


def test_unreadable_database_exits_2(tmp_path: Path) -> None:
    assert convtap("audit", "--db", str(tmp_path / "missing.db")).returncode == 2
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00" * 4096)
    assert convtap("audit", "--db", str(junk)).returncode == 2


def test_text_groups_by_conversation_and_call(faulty_db: Path) -> None:
    out = convtap("audit", "--db", str(faulty_db)).stdout
    assert "conversation " in out and "call b6d6e3a6" in out
    assert "return-recipient" in out and 'expected "all", got "alefita_way"' in out
    assert "1 calls, 1 returns audited: 1 error, 1 warning, 0 info" in out


def test_junit_loads_and_fails_on_errors(faulty_db: Path) -> None:
    root = ElementTree.fromstring(convtap("audit", "--db", str(faulty_db), "--format", "junit")
                                  .stdout.encode())  # fmt: skip
    assert root.tag == "testsuites" and root.get("failures") == "1"
    failures = root.findall(".//failure")
    assert [f.get("type") for f in failures] == ["return-recipient"]
    assert len(root.findall("testsuite")) == len(registry())


def test_sarif_validates_against_the_2_1_0_schema(faulty_db: Path) -> None:
    sarif = json.loads(convtap("audit", "--db", str(faulty_db), "--format", "sarif").stdout)
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.validate(sarif, schema)
    results = sarif["runs"][0]["results"]
    assert sorted((r["ruleId"], r["level"]) for r in results) == [
        ("prepare-missing", "warning"),
        ("return-recipient", "error"),
    ]
    # No link to a page that does not exist (the rule's whole text is in `help`).
    driver = sarif["runs"][0]["tool"]["driver"]
    assert "informationUri" not in driver and not any("helpUri" in r for r in driver["rules"])
    assert all("Source: docs/protocol.md" in r["help"]["text"] for r in driver["rules"])
    with pytest.raises(jsonschema.ValidationError):  # the schema does catch a broken log
        jsonschema.validate({**sarif, "version": "9"}, schema)


def test_github_annotations(faulty_db: Path) -> None:
    lines = convtap("audit", "--db", str(faulty_db), "--format", "github").stdout.splitlines()
    assert sorted(line.split("::")[1] for line in lines) == [
        "error title=convtap return-recipient",
        "warning title=convtap prepare-missing",
    ]


def test_rules_lists_and_explains() -> None:
    listing = json.loads(convtap("rules", "--format", "json").stdout)
    assert len(listing) == len(registry()) and set(listing[0]) == {"id", "severity", "summary"}
    text = convtap("rules", "return-recipient").stdout
    assert text.startswith("return-recipient (error):") and "Source:" in text and "Bad:" in text
    one = json.loads(convtap("rules", "return-hidden", "--format", "json").stdout)
    assert one["severity"] == "warning" and one["good"]
    assert convtap("rules", "nope").returncode == 2


def test_a_first_turns_finding_goes_to_the_conversation_the_server_assigned(
    tmp_path: Path,
) -> None:
    """`handoff-missing` on a first turn's request is made before the stream names the
    conversation: recorded (live or imported) and audited, it goes to that conversation, never
    to "(no conversation yet)" (the report showed the turn twice)."""
    db = tmp_path / "first.db"
    har = ROOT / "captures" / "examples" / "rules" / "handoff-missing" / "fail.har"
    assert convtap("import", str(har), "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:
        assigned = conn.execute("SELECT DISTINCT conversation_id FROM turns").fetchall()
        recorded = conn.execute("SELECT rule, conversation_id FROM findings").fetchall()
    assert recorded == [("handoff-missing", assigned[0][0])]
    audited = json.loads(convtap("audit", "--db", str(db), "--format", "json").stdout)
    assert [f["conversation_id"] for f in audited["findings"]] == [assigned[0][0]]
    assert "no conversation yet" not in convtap("audit", "--db", str(db)).stdout


# -- SARIF and JUnit that hold from one CI run to the next -----------------------------------

GITHUB_LIMITS = {"runs": 20, "results": 25_000, "rules": 25_000, "tags": 20, "locations": 1_000,
                 "extensions": 100, "gzip_bytes": 10 * 1024 * 1024}  # fmt: skip


def demo_run(folder: Path) -> Path:
    """`convtap demo`: the mock (minting new ids each run), the recorder, and the reference
    client answering once right and once with its typical mistakes."""
    folder.mkdir()
    db = folder / "ci.db"
    ran = convtap("demo", "--db", str(db))
    assert ran.returncode == 0, ran.stderr
    return db


def audited(db: Path, fmt: str, *flags: str, cwd: Path | None = None) -> str:
    with contextlib.chdir(cwd or Path.cwd()):
        ran = convtap("audit", "--db", str(db), "--format", fmt, "--fail-on", "never", *flags)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def within_github_limits(sarif: dict[str, Any]) -> None:
    """GitHub code scanning's documented upload limits, and its relative artifact URIs."""
    assert len(gzip.compress(json.dumps(sarif).encode())) <= GITHUB_LIMITS["gzip_bytes"]
    assert len(sarif["runs"]) <= GITHUB_LIMITS["runs"]
    for run in sarif["runs"]:
        assert len(run["results"]) <= GITHUB_LIMITS["results"]
        assert len(run["tool"]["driver"]["rules"]) <= GITHUB_LIMITS["rules"]
        assert len(run["tool"].get("extensions", [])) <= GITHUB_LIMITS["extensions"]
        for rule in run["tool"]["driver"]["rules"]:
            assert len(rule["properties"]["tags"]) <= GITHUB_LIMITS["tags"]
        for result in run["results"]:
            assert len(result["locations"]) <= GITHUB_LIMITS["locations"]
            uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            assert not urlsplit(uri).scheme and not uri.startswith("/")


@pytest.mark.process
def test_the_same_client_twice_gives_the_same_fingerprints_and_case_names(
    tmp_path: Path,
) -> None:
    first, second = demo_run(tmp_path / "one"), demo_run(tmp_path / "two")
    minted = "SELECT conversation_id FROM turns UNION SELECT call_id FROM tool_calls"
    with sqlite3.connect(first) as a, sqlite3.connect(second) as b:
        assert not set(a.execute(minted)) & set(b.execute(minted))  # new ids every run
    schema = json.loads(SARIF_SCHEMA.read_text())
    prints, names = [], []
    for db in (first, second):
        sarif = json.loads(audited(db, "sarif", cwd=db.parent))
        jsonschema.validate(sarif, schema)
        within_github_limits(sarif)
        results = sarif["runs"][0]["results"]
        prints.append(sorted(r["partialFingerprints"]["convtap/v2"] for r in results))
        root = ElementTree.fromstring(audited(db, "junit").encode())
        names.append(sorted((c.get("classname"), c.get("name")) for c in root.iter("testcase")))
        assert sarif["runs"][0]["artifacts"][0]["location"]["uri"] == "ci.db"
    assert prints[0] == prints[1] and len(prints[0]) >= 6
    assert len(set(prints[0])) == len(prints[0])  # one alert per mistake
    assert names[0] == names[1]
    assert not any(MINTED.search(name or "") for _, name in names[0])


def test_sarif_names_the_capture_relative_to_the_root(tmp_path: Path, faulty_db: Path) -> None:
    inside = tmp_path / "captures" / "run 1"
    inside.mkdir(parents=True)
    (inside / "ci.db").write_bytes(faulty_db.read_bytes())
    sarif = json.loads(audited(inside / "ci.db", "sarif", "--sarif-root", str(tmp_path)))
    location = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "captures/run%201/ci.db",
                                            "uriBaseId": "%SRCROOT%"}  # fmt: skip
    elsewhere = json.loads(audited(inside / "ci.db", "sarif", "--sarif-root", str(ROOT)))
    assert elsewhere["runs"][0]["artifacts"][0]["location"]["uri"] == "ci.db"
    ran = convtap("audit", "--db", str(faulty_db), "--format", "json", "--sarif-root", ".")
    assert ran.returncode == 2 and "--sarif-root goes with --format sarif" in ran.stderr


def test_sarif_keeps_the_most_severe_within_githubs_result_limit() -> None:
    from convtap.contract.audit import AuditResult
    from convtap.contract.formats import SARIF_MAX_RESULTS, sarif
    from convtap.contract.registry import Finding, Where
    from convtap.vocab import Severity

    many = [Finding("prepare-missing", Severity.WARNING, "m", Where(call_id=f"c{n}"))
            for n in range(25_010)]  # fmt: skip
    errors = [Finding("return-recipient", Severity.ERROR, "e", Where(call_id="x"))] * 3
    document = sarif(AuditResult(1, 1, [*many, *errors]), "ci.db")
    results = document["runs"][0]["results"]
    assert len(results) == SARIF_MAX_RESULTS == GITHUB_LIMITS["results"]
    assert sum(r["level"] == "error" for r in results) == 3
    assert document["runs"][0]["properties"] == {"omitted_results": 13}
