"""A school's data: retention, erasure, the audit export, replay by filter.

retention.py: how long each kind of row is kept, pruned in bounded batches
from the process step's housekeeping; erasure.py: one submission's (or one
assignment's) data out of every queue table; export.py: the attempts and
results of a period, streamed as CSV or JSONL; replay.py: failed rows back to
pending by filter.  Their SQL: aiqueue/db/sql/records.sql and
erasure.sql.
"""
