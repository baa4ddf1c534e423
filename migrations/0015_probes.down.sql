DROP TABLE IF EXISTS ai_marking_probes;
