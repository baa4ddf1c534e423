-- Back to the schema before 0041: the lease on the queue row.
ALTER TABLE ai_marking_queue ADD COLUMN lease_at timestamptz;
UPDATE ai_marking_queue q SET lease_at = c.lease_at
FROM ai_marking_claimed c WHERE c.queue_id = q.queue_id;
CREATE INDEX ai_marking_queue_lease_idx
    ON ai_marking_queue (lease_at) WHERE lease_at IS NOT NULL;
CREATE INDEX ai_marking_queue_pool_lease_idx
    ON ai_marking_queue (pool, kind, lease_at) WHERE lease_at IS NOT NULL;
DROP TABLE ai_marking_claimed;
