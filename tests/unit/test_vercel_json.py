"""vercel.json's rewrites both ways, and the per-function durations: pure, no I/O but the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiqueue.vercel.vercel_json import Rewrite, load, restore, route

ROOT = Path(__file__).resolve().parents[2]
CONF = load()
RW = CONF.rewrites
QID = "6f1c2a8e-0000-4000-8000-000000000001"

# (public path, public query, destination path, destination query) as Vercel's edge maps them.
CASES = [
    ("/api/marking/enqueue", "", "/api/enqueue", ""),
    ("/api/marking/process-queue", "", "/api/process_queue", ""),
    ("/webhooks/ai-mark", "", "/api/webhooks/ai_mark", ""),
    (f"/api/marking/queue/{QID}/retry", "", "/api/marking", f"path=queue/{QID}/retry"),
    ("/api/marking/queue", "status=failed&limit=5", "/api/marking",
     "path=queue&status=failed&limit=5"),
    ("/api/marking/events", "assignment_id=hw%207", "/api/marking",
     "path=events&assignment_id=hw%207"),
    ("/api/marking/assignments/hw 7/progress", "", "/api/marking",
     "path=assignments/hw%207/progress"),
    ("/api/marking/doctor", "", "/api/marking", "path=doctor"),
    ("/ai-queue", "", "/api/ai_queue", "path="),
    ("/ai-queue/doctor", "", "/api/ai_queue", "path=doctor"),
    ("/ai-queue/login", "", "/api/ai_queue", "path=login"),
    ("/results/assignments/hw-1", "", "/api/results", "path=assignments/hw-1"),
    ("/healthz", "", "/api/health", "route=healthz"),
    ("/metrics", "", "/api/health", "route=metrics"),
]


@pytest.mark.parametrize(("public", "query", "dest", "dest_query"), CASES)
def test_the_edge_routes_public_paths_to_functions(public, query, dest, dest_query):
    assert route(RW, public, query) == (dest, dest_query)


@pytest.mark.parametrize(("public", "query", "dest", "dest_query"), CASES)
def test_a_destination_maps_back_to_its_public_route(public, query, dest, dest_query):
    assert restore(RW, dest, dest_query) == (public, query)


@pytest.mark.parametrize(("public", "query", "dest", "dest_query"), CASES)
def test_a_public_path_is_left_alone(public, query, dest, dest_query):
    assert restore(RW, public, query) == (public, query)


def test_the_capture_may_come_anywhere_in_the_query_and_percent_encoded():
    got = restore(RW, "/api/marking", f"limit=5&path=queue%2F{QID}%2Fretry&x=a+b")
    assert got == (f"/api/marking/queue/{QID}/retry", "limit=5&x=a+b")


def test_the_bare_destination_without_a_capture():
    assert restore(RW, "/api/ai_queue", "") == ("/ai-queue", "")
    assert restore(RW, "/api/marking", "") == ("/api/marking", "")
    assert restore(RW, "/api/enqueue", "a=1") == ("/api/marking/enqueue", "a=1")


def test_unknown_paths_pass_through():
    assert restore(RW, "/api/nope", "path=x") == ("/api/nope", "path=x")
    assert route(RW, "/nope") is None


def test_a_single_segment_parameter():
    rw = [Rewrite("/things/:id/edit", "/api/things")]
    assert route(rw, "/things/7/edit") == ("/api/things", "id=7")
    assert restore(rw, "/api/things", "id=7") == ("/things/7/edit", "")
    assert restore(rw, "/api/things", "") == ("/api/things", "")
    assert restore(rw, "/api/things", "id=a%2Fb") == ("/api/things", "id=a%2Fb")


@pytest.mark.parametrize("source", ["/a/(.*)", "/a/:rest*/b", "/a/:id+", "/a/:id?"])
def test_sources_this_module_cannot_invert_are_refused(source):
    with pytest.raises(ValueError):
        Rewrite(source, "/api/a")


def test_destinations_with_parameters_are_refused():
    with pytest.raises(ValueError):
        Rewrite("/a/:id", "/api/a/:id")


def test_every_function_has_its_own_max_duration():
    entries = {str(p.relative_to(ROOT)) for p in (ROOT / "api").rglob("*.py")}
    assert set(CONF.max_durations) == entries
    assert {CONF.function_of(r.source.replace("/:path*", "")) for r in RW} == entries


def test_durations_cover_what_each_function_waits_for():
    # On Vercel the event stream lives up to QUEUE_EVENTS_MAX_SECONDS (default there 55 s).
    assert CONF.max_duration("api/marking.py") == 60
    assert CONF.max_duration("api/process_queue.py") == 60
    assert CONF.function_of("/api/marking/queue") == "api/marking.py"
    assert CONF.function_of("/nowhere") is None


def test_the_cron_calls_the_process_endpoint_every_minute():
    # Per minute needs Vercel Pro; the README says to switch to a daily schedule on Hobby.
    crons = json.loads((ROOT / "vercel.json").read_text())["crons"]
    assert crons == [{"path": "/api/marking/process-queue", "schedule": "* * * * *"}]
    assert CONF.function_of(crons[0]["path"]) == "api/process_queue.py"
