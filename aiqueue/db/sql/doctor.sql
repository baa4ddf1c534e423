-- The doctor's statements (docs/operating/doctor.md) and the schema check of every instance.

-- schema_version --
-- The newest migration applied (its number), 0 on a database never migrated.
-- Read once per instance (web/state.py), not per request.
SELECT coalesce(max(split_part(version, '_', 1)::int), 0) AS found
FROM aiqueue_migrations
WHERE version ~ '^[0-9]+_'

-- unknown_zones --
-- Of the zone names $1, those the database does not know: a name Python's zone
-- data has and an older PostgreSQL's lacks fails every statement that uses it.
-- Read once per instance (runtime.py) and by the doctor; pg_timezone_names reads
-- the server's zone files, so it is not for a per-request path.
SELECT z AS zone FROM unnest($1::text[]) AS z
WHERE NOT EXISTS (SELECT 1 FROM pg_timezone_names t WHERE t.name = z)

-- record_probe_answer --
-- The first answer wins: a repeated callback of the same probe changes nothing.
INSERT INTO ai_marking_probes (probe_id, answer, detail)
VALUES ($1, $2, $3::jsonb)
ON CONFLICT (probe_id) DO NOTHING

-- probe_answer --
SELECT answer, detail::text AS detail FROM ai_marking_probes WHERE probe_id = $1

-- prune_probe_answers --
-- Probes are answered within seconds; an hour keeps a late answer visible.
DELETE FROM ai_marking_probes WHERE answered_at < now() - interval '1 hour'

-- prompt_prefixes --
-- Per pool, the prompt prefixes (payloads) dispatched in the last week and
-- their middle size in tokens (functions/45_cache.sql keeps them).
SELECT pool, count(*) AS prefixes,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY tokens)::float8 AS tokens
FROM ai_marking_prefixes
WHERE dispatched_at > now() - interval '7 days'
GROUP BY pool ORDER BY pool

-- doctor_backend_pid --
SELECT pg_backend_pid() AS pid, inet_server_port() AS port

-- doctor_mark_session --
-- A session-level setting: a session connection keeps it for itself; behind a
-- transaction pooler the next transaction of another client may see it.
SELECT set_config('aiqueue.doctor_mark', $1, false)

-- doctor_read_mark --
SELECT current_setting('aiqueue.doctor_mark', true) AS mark

-- doctor_notify --
SELECT pg_notify($1, $2)

-- cron_called --
-- The cron (GET /api/marking/process-queue) called: the doctor warns when it
-- has not for 3 periods (docs/deploying/index.md).  Skipped when written within the last
-- 10 s, so a burst of calls rewrites the control row once.
UPDATE ai_queue_control SET cron_called_at = now()
WHERE id = 1 AND (cron_called_at IS NULL OR cron_called_at < now() - interval '10 seconds');

-- cron_last_call --
-- Seconds since the cron last called (NULL: never).
SELECT extract(epoch FROM now() - cron_called_at)::float8 FROM ai_queue_control WHERE id = 1;

-- months_ahead --
-- Per partitioned history table (functions/97_partitions.sql): whether a month
-- partition covers the start of next month (UTC), how many partitions it has,
-- and about how many rows its default holds (rows no month took: the
-- housekeeping has not run; PostgreSQL's estimate, so no table is scanned).
SELECT p.parent::text AS parent,
       EXISTS (SELECT 1 FROM aiqueue_partitions() x
               WHERE x.parent = p.parent AND NOT x.is_default
                 AND coalesce(x.lower_bound, '-infinity') <= n.next_month
                 AND x.upper_bound > n.next_month) AS ready,
       (SELECT count(*) FROM aiqueue_partitions() x
        WHERE x.parent = p.parent AND NOT x.is_default) AS months,
       coalesce((SELECT s.n_live_tup FROM aiqueue_partitions() x
                 JOIN pg_stat_user_tables s ON s.relid = x.part
                 WHERE x.parent = p.parent AND x.is_default), 0) AS default_rows
FROM aiqueue_partitioned() p,
     LATERAL (SELECT (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month')
                     AT TIME ZONE 'UTC' AS next_month) n
ORDER BY 1;

-- table_health --
-- The record's (and, when they exist, the state tables') dead rows and HOT
-- updates, from PostgreSQL's own statistics (pg_stat_user_tables): an update
-- that is not heap-only writes every index of the row again.
-- The record is partitioned by month (aiqueue 0078): its figures are its
-- partitions' summed.
SELECT t.name AS relname, sum(s.n_live_tup)::bigint AS live, sum(s.n_dead_tup)::bigint AS dead,
       sum(s.n_tup_upd)::bigint AS updates, sum(s.n_tup_hot_upd)::bigint AS hot_updates,
       sum(pg_total_relation_size(s.relid))::bigint AS bytes,
       max(greatest(s.last_autovacuum, s.last_vacuum)) AS vacuumed_at
FROM unnest(ARRAY['ai_marking_queue', 'ai_marking_ready', 'ai_marking_claimed']) AS t (name)
JOIN pg_partition_tree(to_regclass(t.name)) p ON p.isleaf
JOIN pg_stat_user_tables s ON s.relid = p.relid
GROUP BY t.name
ORDER BY 1;

-- submissions_fill --
-- The host's submissions: its fillfactor (100 unless set) and its updates,
-- all and heap-only.  A result's update of ai_result finds no room on a full
-- page and writes every index of the table again (docs/operating/doctor.md).
SELECT coalesce((SELECT o.option_value::int FROM pg_options_to_table(c.reloptions) o
                 WHERE o.option_name = 'fillfactor'), 100) AS fillfactor,
       coalesce(s.n_tup_upd, 0) AS updates, coalesce(s.n_tup_hot_upd, 0) AS hot_updates
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = to_regclass('submissions');
