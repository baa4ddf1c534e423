-- aiqueue 0030: the learned limit learns the model's window.
--
-- A refusal's retry_after, and the reset of the model's whole budget when the
-- function relays it (x-ratelimit-reset-*), say how long the model's window
-- is (functions/20_flow.sql: aiqueue_flow_refused).  While a pool's L was cut
-- or raised less than one window ago it does not climb again
-- (aiqueue_flow_after_result): a model with no declared budget is then probed
-- once per window, not once per L results.  NULL: not learned yet.
ALTER TABLE ai_queue_control ADD COLUMN learned_window float8,
    ADD COLUMN limit_raised_at timestamptz;
