"""The fleet answer is one bounded page (DESIGN §8, issue 31): at most `limit` services, topics and issues, the
newest issues first with `issuesOmitted` counting the rest, services and topics continued by name with
`nextServices` / `nextTopics`; the same pages from every store kind, and from two PostgreSQL replicas alike."""

from __future__ import annotations

from typing import Any

import pytest

from svcgen.collector import Collector
from svcgen.collector.postgres import PostgresStore
from tests.collector.test_mismatches import CAPTURE_REQUEST, WITHOUT_AMOUNT, capture, orders, payments
from tests.support.feeds import collector, descriptor, event, issue, ok, topic

NAMES = ["alpha", "bravo", "charlie", "delta", "echo"]


def fill(c: Collector) -> None:
    """Five services (delta in two versions), each handling two topics and sending the next one's first; a sixth
    only heard through its traces; three issues with distinct lastSeen, two sharing one."""
    for number, name in enumerate(NAMES):
        after = NAMES[(number + 1) % len(NAMES)]
        for version in ("1", "2") if name == "delta" else (None,):
            c.register(descriptor(name, [topic(f"{name}:a"), topic(f"{name}:b")], version=version,
                                  instance=f"{name}-{version}", produces=[topic(f"{after}:a")]))  # fmt: skip
    heard = [event(n, service="foxtrot", topic_id="foxtrot:x") for n in range(3)]
    assert ok(c.traces({"events": heard}))["accepted"] == 3
    times = ["2027-01-15T08:00:01.000Z", "2027-01-15T08:00:03.000Z", "2027-01-15T08:00:03.000Z"]
    issues = [issue(name, fingerprint=f"{n:032x}", first=times[0], last=last)
              for n, (name, last) in enumerate(zip(NAMES, times, strict=False))]  # fmt: skip
    for entry in issues:
        assert ok(c.issues({"service": entry["service"], "issues": [entry]})) is not None


def pages(c: Collector, listed: str, cursor: str, after: str, limit: int) -> list[list[Any]]:
    """Every page of `listed`, following the answers' `cursor` as `after`."""
    found: list[list[Any]] = []
    body: dict[str, Any] = {"limit": limit}
    while True:
        answer = ok(c.query_fleet(body))
        found.append(answer[listed])
        if cursor not in answer:
            return found
        body = {"limit": limit, after: answer[cursor]}


@pytest.mark.usefixtures("any_store")
def test_services_and_topics_come_a_page_at_a_time_and_every_page_together_is_the_whole_fleet() -> None:
    c = collector()
    fill(c)
    whole = ok(c.query_fleet({"limit": 1000}))
    assert "nextServices" not in whole and "nextTopics" not in whole
    assert [(s["service"], s.get("serviceVersion")) for s in whole["services"]] == [
        ("alpha", None), ("bravo", None), ("charlie", None), ("delta", "1"), ("delta", "2"), ("echo", None),
        ("foxtrot", None)]  # fmt: skip
    assert [t["topic"] for t in whole["topics"]] == sorted([f"{n}:{s}" for n in NAMES for s in "ab"] + ["foxtrot:x"])
    service_pages = pages(c, "services", "nextServices", "servicesAfter", 2)
    assert [[s["service"] for s in page] for page in service_pages] == [
        ["alpha", "bravo"], ["charlie", "delta", "delta"], ["echo", "foxtrot"]]  # a page holds every version
    assert [s for page in service_pages for s in page] == whole["services"]
    topic_pages = pages(c, "topics", "nextTopics", "topicsAfter", 4)
    assert [len(page) for page in topic_pages] == [4, 4, 3]
    assert [t for page in topic_pages for t in page] == whole["topics"]
    first = ok(c.query_fleet({"limit": 2}))
    assert (first["nextServices"], first["nextTopics"]) == ("bravo", "alpha:b")
    alpha_a = next(t for t in whole["topics"] if t["topic"] == "alpha:a")
    assert (alpha_a["providers"], alpha_a["consumers"]) == (["echo"], ["alpha"])
    assert next(t for t in whole["topics"] if t["topic"] == "foxtrot:x")["invocations"] == 3


@pytest.mark.usefixtures("any_store")
def test_issues_are_the_newest_first_capped_with_how_many_were_left_out() -> None:
    c = collector()
    fill(c)
    c.register(orders(capture(WITHOUT_AMOUNT)))  # orders sends payments:capture without the amount payments needs
    c.register(payments(capture(CAPTURE_REQUEST)))
    whole = ok(c.query_fleet())
    assert whole["issuesOmitted"] == 0
    listed = [(i["lastSeen"], i["fingerprint"]) for i in whole["issues"]]
    newest = sorted(listed, key=lambda pair: pair[1])  # lastSeen descending, then fingerprint ascending
    newest.sort(key=lambda pair: pair[0], reverse=True)
    assert listed == newest
    assert len(listed) == 4 and any(i["classification"] == "contract-mismatch" for i in whole["issues"])
    page = ok(c.query_fleet({"limit": 2}))
    assert page["issues"] == whole["issues"][:2]
    assert page["issuesOmitted"] == 2


@pytest.mark.usefixtures("any_store")
@pytest.mark.parametrize("body", [{"limit": 0}, {"limit": 1001}, {"limit": "5"}, {"servicesAfter": ""}])
def test_a_fleet_page_out_of_bounds_is_a_bad_request(body: dict[str, Any]) -> None:
    assert collector().query_fleet(body).status == "bad-request"


@pytest.mark.usefixtures("any_store")
def test_the_windowed_ranking_is_capped_too() -> None:
    c = collector()
    fill(c)
    calls = [event(10 + n, service="alpha", topic_id="alpha:a", status="timeout") for n in range(2)]
    assert ok(c.traces({"events": calls}))["accepted"] == 2
    whole = ok(c.query_fleet({"window": "24h"}))
    assert [(r["service"], r["topic"]) for r in whole["ranking"]] == [("alpha", "alpha:a"), ("foxtrot", "foxtrot:x")]
    assert whole["rankingOmitted"] == 0
    answer = ok(c.query_fleet({"window": "24h", "limit": 1}))
    assert answer["window"] == "24h"
    assert (answer["ranking"], answer["rankingOmitted"]) == (whole["ranking"][:1], 1)


def test_two_replicas_on_one_database_answer_every_page_alike(postgres_url: str) -> None:
    replicas = [collector(PostgresStore(postgres_url)) for _ in range(2)]
    fill(replicas[0])
    for body in ({}, {"limit": 2}, {"limit": 2, "servicesAfter": "bravo", "topicsAfter": "charlie:a"}):
        first, second = (ok(replica.query_fleet(body)) for replica in replicas)
        assert first == second
    # A register at one replica that fixes a mismatch clears it at the other (its derivation is not kept stale).
    replicas[0].register(orders(capture(WITHOUT_AMOUNT)))
    replicas[0].register(payments(capture(CAPTURE_REQUEST)))
    assert [i["classification"] for i in ok(replicas[1].query_fleet())["issues"]].count("contract-mismatch") == 1
    replicas[0].register(orders(capture(CAPTURE_REQUEST)))
    for replica in replicas:
        assert "contract-mismatch" not in [i["classification"] for i in ok(replica.query_fleet())["issues"]]
    # Breaks and fixes at either replica, each followed by a query at the other: what each derived step by step is
    # what a fresh replica derives from every entry at once.
    steps = [(0, orders(capture(WITHOUT_AMOUNT))), (1, descriptor("bravo", [topic("bravo:a", WITHOUT_AMOUNT)])),
             (0, descriptor("charlie", [topic("charlie:a", CAPTURE_REQUEST)], produces=[topic("delta:a")])),
             (1, descriptor("echo", [topic("echo:a")], produces=[topic("alpha:a", WITHOUT_AMOUNT)]))]  # fmt: skip
    for at, document in steps:
        replicas[at].register(document)
        ok(replicas[1 - at].query_fleet())
    fresh = collector(PostgresStore(postgres_url))
    answers = [ok(c.query_fleet({"limit": 1000}))["issues"] for c in (*replicas, fresh)]
    assert answers[0] == answers[1] == answers[2]
    assert sum(i["classification"] == "contract-mismatch" for i in answers[0]) >= 2
    for replica in (*replicas, fresh):
        replica.flush()


@pytest.mark.usefixtures("any_store")
def test_a_member_only_polled_and_never_reached_is_listed_as_unhealthy() -> None:
    """The poller names a service that never answered: no descriptor, no feed, no traces; every store lists it,
    unhealthy (a failed poll), as its service query answers."""
    c = collector()
    c.record_poll("ghost", "http://127.0.0.1:9", spec=None, health=None, error="spec: ConnectError: refused")
    services = ok(c.query_fleet({}))["services"]
    assert services == [{"service": "ghost", "topics": 0, "health": "unhealthy", "instances": 0,
                         "staleInstances": 0, "missingFeeds": ["descriptor", "health", "traces"]}]  # fmt: skip
    assert ok(c.query_service({"service": "ghost"}))["health"] == "unhealthy"
