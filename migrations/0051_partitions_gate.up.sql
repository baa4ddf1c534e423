-- The month partitions' pass (functions/97_partitions.sql aiqueue_keep_partitions)
-- runs at most once a minute across every instance, as the prune and the
-- retention pass do: the control row is its gate.
ALTER TABLE ai_queue_control ADD COLUMN last_partitions_at timestamptz NOT NULL
    DEFAULT '-infinity';
