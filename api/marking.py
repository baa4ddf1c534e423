"""Vercel function: the JSON twins, status/progress/cancel, one row (detail, cancel,
fail), live events, a school's data (erase, export, replay), agreement, a run's
release, a re-mark, review holds (the list, an answer) and drift canaries under
/api/marking."""

from aiqueue.vercel import vercel_app

app = vercel_app(["/api/marking/queue", "/api/marking/stats", "/api/marking/submissions",
                  "/api/marking/assignments", "/api/marking/events",
                  "/api/marking/usage", "/api/marking/doctor", "/api/marking/openapi.json",
                  "/api/marking/export", "/api/marking/replay", "/api/marking/agreement",
                  "/api/marking/runs", "/api/marking/rows", "/api/marking/remark",
                  "/api/marking/canary", "/api/marking/review_needed", "/api/marking/clarify"],
                 streams=True)
