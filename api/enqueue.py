"""Vercel function: /api/marking/enqueue."""

from aiqueue.vercel import vercel_app

app = vercel_app(["/api/marking/enqueue"])
