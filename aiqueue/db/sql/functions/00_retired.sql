-- Every SQL function and trigger of aiqueue, in its current text.
--
-- `migrate up` applies this file after the schema migrations, in the same
-- transaction, whenever its text changed (or a migration ran): migrations hold
-- schema only, and a function's history is this file's git log.  Everything
-- here must be idempotent: CREATE OR REPLACE, and a DROP ... IF EXISTS first
-- where a signature or a trigger's shape changes.
--
-- The hot statements live in plpgsql functions: without a client-side
-- prepared-statement cache (transaction poolers forbid one), plpgsql is what
-- lets the server cache their plans per backend instead of planning each call.

-- Signatures that earlier versions created; dropped so a changed signature or
-- return type can be created again, and so nothing stale stays callable.
DROP FUNCTION IF EXISTS aiqueue_flow_result(uuid, integer, jsonb, integer, boolean);
DROP FUNCTION IF EXISTS aiqueue_answer_key(text, bytea, bytea);
DROP FUNCTION IF EXISTS aiqueue_answer_norm(text);
DROP FUNCTION IF EXISTS aiqueue_budget_estimate(text);
DROP FUNCTION IF EXISTS aiqueue_budget_opens_at(integer, integer, float8, bigint);
DROP FUNCTION IF EXISTS aiqueue_budget_use(float8);
DROP FUNCTION IF EXISTS aiqueue_flow_refused(uuid, integer, text, float8, float8, integer);
DROP FUNCTION IF EXISTS aiqueue_flow_refused(uuid, integer, text, float8, float8, integer, jsonb);
DROP FUNCTION IF EXISTS aiqueue_flow_after_result(integer, integer, integer);
DROP FUNCTION IF EXISTS aiqueue_gate_open(integer, integer);
DROP FUNCTION IF EXISTS aiqueue_claim(integer, integer);
DROP FUNCTION IF EXISTS aiqueue_claim(integer, integer, integer, integer, float8);
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer);
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer, integer,
                                       integer, float8);
DROP FUNCTION IF EXISTS aiqueue_claim(integer, integer, integer, integer, float8, jsonb);
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer, integer,
                                       integer, float8, jsonb);
DROP FUNCTION IF EXISTS aiqueue_group_head(text, integer, text, text[]);
DROP FUNCTION IF EXISTS aiqueue_due_exists(text[], jsonb, uuid);
DROP FUNCTION IF EXISTS aiqueue_fair_pick(text[], jsonb);
DROP FUNCTION IF EXISTS aiqueue_due_at();
DROP FUNCTION IF EXISTS aiqueue_handback(uuid, integer);
DROP FUNCTION IF EXISTS aiqueue_alert_values(timestamptz, float8, float8, integer, float8);
DROP FUNCTION IF EXISTS aiqueue_in_flight(integer);
-- The claim's seven arguments, before its one plan document.
DROP FUNCTION IF EXISTS aiqueue_claim(integer, integer, integer, integer, float8, jsonb, jsonb);
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer, integer,
                                       integer, float8, jsonb, jsonb);
DROP FUNCTION IF EXISTS aiqueue_room(jsonb, integer, float8, boolean, boolean);
DROP FUNCTION IF EXISTS aiqueue_claim_opens_at(jsonb, integer, float8);
DROP FUNCTION IF EXISTS aiqueue_flow_result(uuid, integer, jsonb, integer, boolean, jsonb);
DROP FUNCTION IF EXISTS aiqueue_complete(uuid, jsonb, jsonb, integer);
DROP FUNCTION IF EXISTS aiqueue_default_plan(integer, integer, integer);
DROP FUNCTION IF EXISTS aiqueue_plan_budgeted(jsonb);
-- The hand-off taken in the settle (aiqueue 0024): the settle and the claim take
-- the caller's token, and the separate take is gone.
DROP FUNCTION IF EXISTS aiqueue_claim(jsonb);
DROP FUNCTION IF EXISTS aiqueue_claim_row(jsonb, text[], jsonb);
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, jsonb);
DROP FUNCTION IF EXISTS aiqueue_handback(uuid, integer);
DROP FUNCTION IF EXISTS aiqueue_take_handoff(uuid, integer);
DROP FUNCTION IF EXISTS aiqueue_money_result(uuid, integer, jsonb);
DROP FUNCTION IF EXISTS aiqueue_result_cost(jsonb, jsonb, text);
DROP FUNCTION IF EXISTS aiqueue_alerts_evaluate(timestamptz, float8, float8, integer, float8);
-- The settle's result side reads the completed row once:
-- aiqueue_complete returns it (it returned whether it applied), and its
-- record takes it typed.
DROP FUNCTION IF EXISTS aiqueue_complete(uuid, jsonb, jsonb, integer, jsonb);
DROP FUNCTION IF EXISTS aiqueue_complete_record(record, jsonb, jsonb, timestamptz, text);
DROP FUNCTION IF EXISTS aiqueue_after_result(uuid, integer, jsonb, jsonb);
DROP FUNCTION IF EXISTS aiqueue_flow_result(uuid, integer, jsonb, jsonb);
DROP FUNCTION IF EXISTS aiqueue_money_result(uuid, integer, jsonb, jsonb);
DROP FUNCTION IF EXISTS aiqueue_cache_result(uuid, jsonb, jsonb);
-- The claim's helpers return one row (a plpgsql assignment, not a query).
DROP FUNCTION IF EXISTS aiqueue_cache_warm_pick(jsonb, jsonb, text[], text, integer, float8);
DROP FUNCTION IF EXISTS aiqueue_fair_head(text, integer, text, text[]);
DROP FUNCTION IF EXISTS aiqueue_cache_state(jsonb, text, uuid);
DROP FUNCTION IF EXISTS aiqueue_cache_check(jsonb, text, integer, text, bigint, uuid);
-- aiqueue_room reads each pool's gate once per claim; claim_more takes its answer.
DROP FUNCTION IF EXISTS aiqueue_room(jsonb, boolean, boolean);
DROP FUNCTION IF EXISTS aiqueue_claim_more(jsonb, text[], text, text, uuid);
-- aiqueue_cache_answered takes the row's pool, priority, group and payload (it read the row).
DROP FUNCTION IF EXISTS aiqueue_cache_answered(uuid);
-- aiqueue_cache_result returns nothing (it returned true).
DROP FUNCTION IF EXISTS aiqueue_cache_result(ai_marking_queue);
-- aiqueue_cache_local takes the plan (the warm row's slots, 36_slots.sql).
DROP FUNCTION IF EXISTS aiqueue_cache_local(jsonb, jsonb, text[], text, integer, float8);
-- aiqueue_cache_local and aiqueue_fair_pick return the kind's slot they locked,
-- the pick its pool's too (36_slots.sql); the cache's local and warm picks
-- whether they hold a counter row (43_fair_race.sql): a result of another
-- shape goes first.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = 'aiqueue_fair_pick' AND p.pronargs = 3
               AND NOT 'pool_slot' = ANY (p.proargnames)) THEN
        DROP FUNCTION aiqueue_fair_pick(text[], jsonb, jsonb);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = 'aiqueue_cache_local' AND p.pronargs = 7
               AND NOT 'held' = ANY (p.proargnames)) THEN
        DROP FUNCTION aiqueue_cache_local(jsonb, jsonb, text[], text, integer, float8, jsonb);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = 'aiqueue_cache_warm_pick'
               AND p.pronargs = 6 AND NOT 'held' = ANY (p.proargnames)) THEN
        DROP FUNCTION aiqueue_cache_warm_pick(jsonb, jsonb, text[], text, integer, float8);
    END IF;
END
$$;
-- A claim waits for a group being charged until its holder ends (43_fair_race.sql),
-- no longer by watching its counter.
DROP FUNCTION IF EXISTS aiqueue_fair_await(text, integer, text, float8),
    aiqueue_fair_counter(text, integer, text);
-- No trigger follows a status change (74_moved.sql): the move functions call
-- each effect, so the row triggers' functions and the flag-reading shapes go.
DROP FUNCTION IF EXISTS aiqueue_record_move();
DROP FUNCTION IF EXISTS aiqueue_outbox_on_end();
DROP FUNCTION IF EXISTS aiqueue_outbox_run_finished(uuid, text);
DROP FUNCTION IF EXISTS aiqueue_group_done();
DROP FUNCTION IF EXISTS aiqueue_group_complete(uuid);
DROP FUNCTION IF EXISTS aiqueue_calibration_ended();
DROP FUNCTION IF EXISTS aiqueue_fair_join_row();
DROP FUNCTION IF EXISTS aiqueue_retry_recorded(uuid[], text[], uuid[], text);
-- The claim names the row whose settle handed it out (aiqueue 0076).
DROP FUNCTION IF EXISTS aiqueue_claim(jsonb, uuid);
DROP FUNCTION IF EXISTS aiqueue_claim_row(jsonb, text[], jsonb, uuid);
-- The record's months have their own periods (aiqueue 0078).
DROP FUNCTION IF EXISTS aiqueue_keep_partitions(float8, float8, float8, integer);
-- A result's apply returns the completed row, not whether it applied (aiqueue 0078).
DO $retired$
BEGIN
    IF (SELECT p.prorettype FROM pg_proc p
        WHERE p.oid = to_regprocedure('aiqueue_result(uuid, jsonb, jsonb, integer, jsonb)'))
       = 'boolean'::regtype THEN
        DROP FUNCTION aiqueue_result(uuid, jsonb, jsonb, integer, jsonb);
    END IF;
END
$retired$;
-- A late result of a failed row is applied as the processing row it was (aiqueue 0078).
DROP FUNCTION IF EXISTS aiqueue_complete(uuid, jsonb, jsonb, integer, jsonb, boolean);
DROP FUNCTION IF EXISTS aiqueue_complete_record(ai_marking_queue, jsonb, jsonb, timestamptz, text);
