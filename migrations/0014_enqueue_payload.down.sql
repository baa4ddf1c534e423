-- Back to a copy of the payload in every row.
ALTER TABLE ai_marking_queue ADD COLUMN payload jsonb NOT NULL DEFAULT '{}'::jsonb;

UPDATE ai_marking_queue q SET payload = p.payload
FROM ai_marking_payloads p
WHERE p.id = q.payload_id;

ALTER TABLE ai_marking_queue DROP COLUMN payload_id;
DROP TABLE ai_marking_payloads;
