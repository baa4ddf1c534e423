"""Vercel function: /healthz and /metrics."""

from aiqueue.vercel import vercel_app

app = vercel_app(["/healthz", "/metrics"], dispatches=False)
