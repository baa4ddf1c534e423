"""Vercel function: /api/marking/process-queue (POST chain, GET cron)."""

from aiqueue.vercel import vercel_app

app = vercel_app(["/api/marking/process-queue"])
