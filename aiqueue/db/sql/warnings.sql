-- Budget warnings (docs/fallback-budgets-calendar.md): sent, and the groups near a cap.  The rules:
-- aiqueue/notify/budget.py.  Functions: functions/55_warnings.sql.  Gateway:
-- aiqueue/db/warnings.py.

-- budget_warnings --
-- Send the warnings that are due ($1: the money document, $2: the moment,
-- NULL: now()); one row per warning sent.
SELECT * FROM aiqueue_budget_warnings($1::jsonb, $2::timestamptz);

-- budget_near --
-- The groups and pools at 80 % of a cap or more now ($1: the money document).
SELECT * FROM aiqueue_budget_near($1::jsonb);
