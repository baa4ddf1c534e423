"""python -m bench: the benchmark suite; prints each row as it is measured, then the table."""

from __future__ import annotations

import argparse
import asyncio

from bench import (
    batchlane,
    batchpack,
    cache,
    db,
    flow,
    groups,
    loop,
    money,
    pools,
    records,
    saturation,
    scale,
    settle,
    traces,
)
from bench.common import Table, fresh_database, middle, print_table


async def enqueue_rows(rows: Table, repeats: int) -> None:
    empty = [await db.enqueue_time(0, f"bench_enq0_{i}") * 1000 for i in range(repeats)]
    rows.append(("enqueue 10,000 ids (empty table)", "ms", empty, None, "<= 100"))
    full = [await db.enqueue_time(100_000, f"bench_enq1_{i}") * 1000 for i in range(repeats)]
    rows.append(("enqueue 10,000 ids (100,000 rows)", "ms", full, None, "<= 100"))
    rubric = [await db.enqueue_time(0, f"bench_enq2_{i}", payload=loop.PAYLOAD_2KB) * 1000
              for i in range(repeats)]
    rows.append(("enqueue 10,000 ids, 2 KB payload (empty table)", "ms", rubric, None, "-"))
    parts = [await db.enqueue_breakdown(await fresh_database(f"bench_enq_parts_{i}"))
             for i in range(repeats)]
    rows.append(("enqueue statement, empty table, under EXPLAIN ANALYZE (server)", "ms",
                 [p["explained"] for p in parts], None, "-"))
    rows.append(("  of which the foreign-key row trigger", "ms", [p["fk"] for p in parts],
                 None, "-"))
    rows.append(("  of which the change-feed trigger", "ms", [p["feed"] for p in parts],
                 None, "-"))
    rows.append(("enqueue statement, empty table", "ms", [p["statement"] for p in parts],
                 None, "-"))
    rows.append(("bare insert of the same rows into the queue table", "ms",
                 [p["same_rows"] for p in parts], None, "reference"))
    rows.append(("bare insert of 10,000 rows, one index", "ms", [p["bare"] for p in parts],
                 None, "reference"))
    rows.append(("enqueue statement / bare insert of the same rows", "ratio",
                 [p["statement"] / p["same_rows"] for p in parts], None, "<= 3"))
    rows.append(("enqueue statement / bare insert, one index", "ratio",
                 [p["statement"] / p["bare"] for p in parts], None, "-"))


# Every money feature declared at once: turns by tokens (always on), a spend cap
# on the default pool (a price known, so the cap is allowed) and a pool budget.
MONEY_ENV = {"QUEUE_MODEL_PRICES": '{"bench-model": {"input": 1.0, "output": 4.0}}',
             "QUEUE_GROUP_USD_PER_HOUR": "1000000", "QUEUE_TOKENS_PER_MINUTE": "100000000"}


async def groups_rows(rows: Table, repeats: int) -> None:
    """The same answer, marked once (docs/same-answer.md): keying's cost at enqueue, interleaved
    with the unkeyed enqueue so both see the same machine, and what groups save."""
    for repeating in (False, True):
        what = "a class's repeating answers" if repeating else "distinct answers"
        plain, keyed = [], []
        for i in range(repeats):
            plain.append(await groups.enqueue_ms(f"bench_grp_p{i}", False, repeating))
            keyed.append(await groups.enqueue_ms(f"bench_grp_k{i}", True, repeating))
        for n, unit in ((0, "ms"), (1, "server CPU ms")):
            base = middle(p[n] for p in plain)
            rows.append((f"enqueue statement, 10,000 ids, {what}, mark_each", unit,
                         [p[n] for p in plain], None, "-"))
            rows.append((f"enqueue statement, 10,000 ids, {what}, mark_once", unit,
                         [k[n] for k in keyed], base, "<= 1.1x mark_each"))
    each = await groups.short_answer_class("bench_grp_each", False)
    once = await groups.short_answer_class("bench_grp_once", True)
    for label, run in (("mark_each", each), ("mark_once", once)):
        rows.append((f"short-answer class (30 x 20): model calls, {label}", "calls",
                     [run.calls], None, "-"))
        rows.append((f"short-answer class (30 x 20): cost, {label}", "USD",
                     [run.cost_usd], None, "-"))
        rows.append((f"short-answer class (30 x 20): submissions marked, {label}", "rows",
                     [run.marked], None, "600"))


async def beside_rows(rows: Table, repeats: int, big: int) -> None:
    """An enqueue of 1,000 answers beside `big` rows of the same payload (docs/same-answer.md):
    within 3x a bare insert of the same rows, and no result waits for it."""
    runs = [await groups.enqueue_beside(f"bench_beside_{i}", big) for i in range(repeats)]
    rows.append((f"enqueue of 1,000 answers beside {big:,} rows of its payload", "ms",
                 [r.enqueue_ms for r in runs], None, "-"))
    rows.append((f"bare insert of the same rows beside {big:,} rows", "ms",
                 [r.bare_ms for r in runs], None, "reference"))
    rows.append(("enqueue beside them / bare insert", "ratio",
                 [r.enqueue_ms / r.bare_ms for r in runs], None, "<= 3"))
    rows.append(("a result for another class's row waited for the open enqueue", "runs",
                 [sum(r.result_waited for r in runs)], None, "0"))


async def loop_rows(rows: Table, repeats: int, jobs: int) -> None:
    base = [await loop.run_baseline(jobs, f"bench_base_{i}") for i in range(repeats)]
    base_med = middle(base)
    rows.append(("baseline: raw asyncpg claim+complete", "jobs/s", base, None, "floor"))
    for cap in (1, 8):
        # Interleaved, so both see the same machine: the minimal hand-written
        # loop of the same hops (bench/minimal.py) is the floor for the chain.
        runs, floor = [], []
        for i in range(repeats):
            runs.append(await loop.run_loop(cap, jobs, f"bench_loop{cap}_{i}"))
            floor.append(await loop.run_minimal(cap, jobs, f"bench_min{cap}_{i}"))
        floor_med = middle([r.jobs_per_s for r in floor])
        rows.append((f"minimal hand-written loop, in-flight {cap}", "jobs/s",
                     [r.jobs_per_s for r in floor], base_med, "reference"))
        rows.append((f"throughput, in-flight {cap}", "jobs/s", [r.jobs_per_s for r in runs],
                     base_med, ">= 450"))
        rows.append((f"throughput / minimal loop, in-flight {cap}", "ratio",
                     [r.jobs_per_s / floor_med for r in runs], None, ">= 0.85"))
        rows.append((f"app CPU per job, in-flight {cap}", "ms", [r.cpu_ms_per_job for r in runs],
                     1000 / base_med, "-"))
        rows.append((f"invocations per job, in-flight {cap}", "calls",
                     [r.invocations_per_job for r in runs], None, "<= 1.1"))
        _database_rows(rows, cap, runs, floor)
        assert all(r.max_in_flight <= cap for r in runs), "the cap was exceeded"
        if cap == 1:
            floor_gap = middle([r.gap_p50_ms for r in floor])
            rows.append(("dispatch gap p50, in-flight 1", "ms", [r.gap_p50_ms for r in runs],
                         1000 / base_med, "<= 2.5"))
            rows.append(("dispatch gap p50 / minimal loop's, in-flight 1", "ratio",
                         [r.gap_p50_ms / floor_gap for r in runs], None, "<= 1.2"))
            rows.append(("dispatch gap p99, in-flight 1", "ms", [r.gap_p99_ms for r in runs],
                         1000 / base_med, "<= 10"))
            rows.append(("minimal loop gap p50, in-flight 1", "ms",
                         [r.gap_p50_ms for r in floor], None, "reference"))
            rows.append(("minimal loop gap p99, in-flight 1", "ms",
                         [r.gap_p99_ms for r in floor], None, "reference"))
    money = [await loop.run_loop(1, jobs, f"bench_loop_money_{i}", MONEY_ENV)
             for i in range(repeats)]
    rows.append(("settle server time, turns + spend cap + budget", "ms",
                 [r.settle_ms for r in money], None, "<= 1.0"))
    rows.append(("server time per job, turns + spend cap + budget", "ms",
                 [r.server_ms_per_job for r in money], None, "-"))
    batched = [await loop.run_loop(8, jobs, f"bench_loop_batch8_{i}", batch=8)
               for i in range(repeats)]
    rows.append(("round trips per result, 8 results a webhook", "calls",
                 [r.xacts_per_job for r in batched], None, "<= 0.3"))
    rows.append(("server time per job, 8 results a webhook", "ms",
                 [r.server_ms_per_job for r in batched], None, "-"))


async def settle_rows(rows: Table, repeats: int) -> None:
    """One result's settle alone (bench/settle.py): its server time, plain and with every
    money feature, and the functions that take most of it (printed)."""
    for label, env in (("plain", {}), ("turns + spend cap + budget", MONEY_ENV)):
        runs = [await settle.run_settles(f"bench_settle_{i}", env) for i in range(repeats)]
        print(settle.report(runs[len(runs) // 2], 12), flush=True)
        rows.append((f"settle alone, server time, {label}", "ms", [r.server_ms for r in runs],
                     None, "<= 1.0"))
        rows.append((f"settle alone, wall time with commit, {label}", "ms",
                     [r.wall_ms for r in runs], None, "-"))
        rows.append((f"settle alone, plpgsql calls, {label}", "calls",
                     [sum(r.calls.values()) for r in runs], None, "-"))
        # The relation locks a settle holds at its end (pg_locks); the count does not
        # depend on the machine's load, so one run is enough.
        locks = await settle.settle_locks(f"bench_settle_locks_{len(rows)}", env)
        print(f"relations locked off the fast path ({label}): {locks.names}", flush=True)
        rows.append((f"settle's relation locks, {label}", "locks", [locks.held], None, "-"))
        rows.append((f"settle's relations locked, {label}", "relations", [locks.relations],
                     None, "-"))
        rows.append((f"settle's relation locks off the fast path, {label}", "locks",
                     [locks.slow], None, "0"))


def _database_rows(rows: Table, cap: int, runs: list[loop.LoopRun],
                   floor: list[loop.LoopRun]) -> None:
    """The database's side of a job, from its own counters (bench/loop.py _db_stats)."""
    rows.append((f"round trips per result, in-flight {cap}", "calls",
                 [r.xacts_per_job for r in runs], None, "<= 1"))
    rows.append((f"minimal loop round trips per job, in-flight {cap}", "calls",
                 [r.xacts_per_job for r in floor], None, "reference"))
    rows.append((f"server time per job, in-flight {cap}", "ms",
                 [r.server_ms_per_job for r in runs], None, "-"))
    rows.append((f"minimal loop server time per job, in-flight {cap}", "ms",
                 [r.server_ms_per_job for r in floor], None, "reference"))
    rows.append((f"settle server time, in-flight {cap}", "ms", [r.settle_ms for r in runs],
                 None, "<= 1.0"))


async def flow_rows(rows: Table, repeats: int) -> None:
    """300 jobs against a model with a budget of 30 jobs per 10 s: with no budget declared
    (the model's refusals say when its whole budget is back, or, as Azure's, only when one
    more call fits), and declared."""
    for name, declare, ms, used, refused in (
            ("no budget declared", False, False, ">= 90", "<= 5"),
            ("no budget declared, retry-after-ms", False, True, ">= 90", "<= 5"),
            ("budget declared", True, False, ">= 90", "<= 2")):
        runs = [await flow.run_flow(flow.FlowSetup(declare=declare, retry_after_ms=ms),
                                    await fresh_database(f"bench_flow_{declare:d}{ms:d}_{i}"))
                for i in range(repeats)]
        rows.append((f"flow, {name}: rows failed", "rows", [r.failed for r in runs], None,
                     "0"))
        rows.append((f"flow, {name}: budget used while work remains", "%",
                     [r.used_share * 100 for r in runs], None, used))
        rows.append((f"flow, {name}: model calls refused", "%",
                     [r.refused_share * 100 for r in runs], None, refused))
        rows.append((f"flow, {name}: time for 300 jobs", "s", [r.seconds for r in runs], None,
                     "-"))


async def money_rows(rows: Table, repeats: int, big: int) -> None:
    """Issue 30: token shares under row turns and VTC, a capped window's spend, the claim
    with turns by tokens at `big` pending rows over 1,000 groups."""
    for vtc, label, target in ((False, "row turns", "~91 (reference)"),
                               (True, "turns by tokens (VTC)", "50 +- 5")):
        shares = [await money.token_share(vtc, f"bench_share_{vtc:d}_{i}") * 100
                  for i in range(repeats)]
        rows.append((f"4,000- vs 400-token rows, essays' token share, {label}", "%", shares,
                     None, target))
    runs = [await money.capped_spend(f"bench_capped_{i}") for i in range(repeats)]
    rows.append(("capped group: most spent in one window (cap $5, L=4, $1 rows)", "USD",
                 [max(r.spent) for r in runs], None, f"<= {runs[0].bound:g}"))
    rows.append(("capped group: windows it marked in (a run of 4 windows)", "windows",
                 [len(r.spent) for r in runs], None, ">= 2"))
    rows.append(("capped run: rows failed", "rows", [r.failed for r in runs], None, "0"))
    rows.append(("capped run: the other group's rows marked meanwhile", "rows",
                 [r.other_rows for r in runs], None, "> 0"))
    await claim_rows(rows, repeats, big)


async def claim_rows(rows: Table, repeats: int, big: int) -> None:
    dsn = await fresh_database("bench_big_pending")
    await db.seed_queue(dsn, big, "pending", groups=1000)
    server, wall = await db.claim_at_scale(dsn, max(repeats, 5))
    rows.append((f"claim at {big:,} pending, 1,000 groups, VTC (server)", "ms", server, None,
                 "<= 0.5"))
    rows.append((f"claim at {big:,} pending, 1,000 groups, VTC (wall)", "ms", wall, None, "-"))


async def batch_rows(rows: Table, repeats: int) -> None:
    """Issue 33's targets: the overnight lane against both providers' emulators."""
    targets = {"healthy": "50", "stalled": "-", "slow": "-"}
    for provider in ("openai", "anthropic"):
        for scenario in ("healthy", "stalled", "slow"):
            runs = [await batchlane.run_lane(provider, await fresh_database(
                f"bench_batch_{scenario}_{provider}_{i}"), scenario)
                for i in range(repeats)]
            name = f"batch {provider}, {scenario}"
            rows.append((f"{name}: rows marked of 2,000", "rows",
                         [r.completed for r in runs], None, "2000"))
            rows.append((f"{name}: applied twice", "rows", [r.applied_twice for r in runs],
                         None, "0"))
            rows.append((f"{name}: marked after the deadline", "rows", [r.late for r in runs],
                         None, "0"))
            rows.append((f"{name}: paid twice", "%",
                         [100 * r.paid_twice / r.rows for r in runs], None, "<= 2"))
            rows.append((f"{name}: fell back to live", "rows", [r.fell_back for r in runs],
                         None, "-"))
            rows.append((f"{name}: cost / live price of the same tokens", "%",
                         [100 * r.lane_cost / r.live_cost for r in runs], None,
                         targets[scenario]))
            rows.append((f"{name}: time to all marked (emulated, deadline 3 h)", "h",
                         [r.hours for r in runs], None, "<= 3"))
            rows.append((f"{name}: app time in lane steps", "s", [r.app_seconds for r in runs],
                         None, "-"))
            rows.append((f"{name}: files/batches left at the provider", "objects",
                         [r.held for r in runs], None, "0"))
    live = 2000 / batchlane.SLOTS * batchlane.LIVE_SECONDS / 3600
    rows.append(("live marking of the same 2,000 rows (8 slots, 10 s a row)", "h", [live],
                 None, "reference"))
    await pack_rows(rows, repeats)


async def pack_rows(rows: Table, repeats: int) -> None:
    """A 20,000-row pack beside live marking at in-flight 1 (docs/overnight.md: bounded)."""
    runs = [await batchpack.run_pack(await fresh_database(f"bench_batch_pack_{i}"))
            for i in range(repeats)]
    name = "batch pack 20,000 rows beside live marking"
    rows.append((f"{name}: rows packed", "rows", [r.packed for r in runs], None, "20000"))
    rows.append((f"{name}: lane steps", "steps", [r.steps for r in runs], None, "-"))
    rows.append((f"{name}: longest lane step", "s", [max(r.step_seconds) for r in runs],
                 None, "<= 20"))
    rows.append((f"{name}: live dispatch gap p99, during a lane step", "ms",
                 [r.gap_p99_during_ms for r in runs], None, "-"))
    rows.append((f"{name}: live dispatch gap p99, no lane step", "ms",
                 [r.gap_p99_quiet_ms for r in runs], None, "reference"))



async def pools_rows(rows: Table, repeats: int) -> None:
    """Issue 29: 3 kinds in 2 pools, 100 jobs each; pool tight's model refuses, roomy's not."""
    runs = [await pools.run_pools(pools.PoolsSetup(), await fresh_database(f"bench_pools_{i}"))
            for i in range(repeats)]
    for name in ("tight", "roomy"):
        mine = [next(p for p in run if p.pool == name) for run in runs]
        if name == "tight":
            rows.append((f"pools, {name}: budget used while work remains", "%",
                         [p.budget_used * 100 for p in mine if p.budget_used is not None],
                         None, ">= 85"))
        rows.append((f"pools, {name}: model calls refused", "calls",
                     [p.refused_by_model for p in mine], None, "-"))
        rows.append((f"pools, {name}: refusals the queue saw", "calls",
                     [p.refusals_seen for p in mine], None, "-" if name == "tight" else "0"))
        rows.append((f"pools, {name}: rows failed", "rows", [p.failed for p in mine], None, "0"))
        rows.append((f"pools, {name}: time to its last row", "s", [p.seconds for p in mine],
                     None, "-" if name == "tight" else "<= 30"))


async def records_rows(rows: Table, repeats: int) -> None:
    """A school's data: the audit export and replay by filter."""
    export = [(await records.export_time(f"bench_export_{i}"))[0] for i in range(repeats)]
    rows.append(("export 10,000 attempts + 10,000 results, CSV", "s", export, None, "<= 10"))
    replay = [await records.replay_time(f"bench_replay_{i}") * 1000 for i in range(repeats)]
    rows.append(("replay 10,000 failed rows (answer)", "ms", replay, None, "<= 1000"))


async def main(repeats: int, jobs: int, big: int, only: str | None, ended: int,
               in_flight: tuple[int, ...] = (1, 8)) -> None:
    rows = Table()
    if only == "scale":
        await scale.scale_rows(rows, repeats, ended)
        print("\nall figures:", flush=True)
        print_table(rows)
        return
    if only == "batch":
        await batch_rows(rows, repeats)
        print("\nall figures:", flush=True)
        print_table(rows)
        return
    if only == "money":
        await money_rows(rows, repeats, big)
        print("\nall figures:", flush=True)
        print_table(rows)
        return
    if only == "cache":
        await cache.cache_rows(rows, repeats, big)
        print("\nall figures:", flush=True)
        print_table(rows)
        return
    if only in ("traces", "same_answers"):
        if only == "traces":
            await traces.traces_rows(rows, repeats, jobs, in_flight)
        else:
            await beside_rows(rows, repeats, big)
        print("\nall figures:", flush=True)
        print_table(rows)
        return
    if only == "pools":
        await pools_rows(rows, repeats)
        print("\nall figures:", flush=True)
        print_table(rows)
        return
    if only in ("enqueue", "flow", "records", "groups", "settle", "saturation"):
        run = {"enqueue": enqueue_rows, "flow": flow_rows, "records": records_rows,
               "groups": groups_rows, "settle": settle_rows,
               "saturation": saturation.saturation_rows}[only]
        await run(rows, repeats)
        print("\nall figures:", flush=True)
        print_table(rows)
        return
    await loop_rows(rows, repeats, jobs)
    if only == "targets":
        # The hot path's targets in one run: the loop's, the claim at scale, the enqueue.
        await claim_rows(rows, repeats, big)
        await enqueue_rows(rows, repeats)
    if only in ("loop", "targets"):
        print("\nall figures:", flush=True)
        print_table(rows)
        return
    await enqueue_rows(rows, repeats)
    await claim_rows(rows, repeats, big)
    dsn = await fresh_database("bench_big_done")
    await db.seed_queue(dsn, big, "completed")
    ours, plain = await db.stats_and_page_at_scale(dsn, max(repeats, 5))
    plain_med = middle(plain)
    rows.append((f"stats + first page at {big:,} rows (server)", "ms", ours, plain_med, "<= 150"))
    rows.append((f"plain count(*) at {big:,} rows (server)", "ms", plain, None, "reference"))
    await records_rows(rows, repeats)
    print("\nall figures:", flush=True)
    print_table(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--only", choices=["enqueue", "loop", "flow", "batch", "records",
                                           "pools", "money", "targets", "cache", "groups",
                                           "settle", "traces", "same_answers", "scale",
                                           "saturation"],
                        help="run only these rows")
    parser.add_argument("--ended", type=int, default=10_000_000,
                        help="--only scale: ended rows (a tenth as many pending)")
    parser.add_argument("--in-flight", default="1,8",
                        help="--only traces: the in-flight caps to run, e.g. 8")
    args = parser.parse_args()
    caps = tuple(int(c) for c in args.in_flight.split(","))
    asyncio.run(main(args.repeats, args.jobs, args.rows, args.only, args.ended, caps))
