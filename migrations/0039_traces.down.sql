-- Back to the schema before 0039: jobs' traces are no longer kept.
DROP TABLE IF EXISTS ai_marking_traces;
