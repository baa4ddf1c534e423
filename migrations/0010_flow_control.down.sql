-- aiqueue 0010 rolled back: no learned limit, no budget window.
DROP TABLE IF EXISTS ai_marking_budget;
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS refused_since;
ALTER TABLE ai_queue_control
    DROP COLUMN IF EXISTS in_flight_limit,
    DROP COLUMN IF EXISTS limit_clean,
    DROP COLUMN IF EXISTS limit_cut_at,
    DROP COLUMN IF EXISTS refusals_rate_limited,
    DROP COLUMN IF EXISTS refusals_overloaded;
