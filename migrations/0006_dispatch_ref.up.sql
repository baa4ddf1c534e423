-- aiqueue 0006: the platform's id for each dispatch (DigitalOcean's activation
-- id, Lambda's request id), so an operator can find the invocation in its logs.
ALTER TABLE ai_marking_attempts ADD COLUMN dispatch_ref text;
