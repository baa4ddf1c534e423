"""aiqueue: a serverless, self-chaining, webhook-driven job queue on PostgreSQL."""
