-- Rolling back drops every aiqueue_* function (and its triggers) first; the
-- previous version's functions folder creates its status triggers again.
-- Nothing in the tables changed.
SELECT 1;
