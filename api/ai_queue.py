"""Vercel function: the /ai-queue page, its login and actions."""

from aiqueue.vercel import vercel_app

app = vercel_app(["/ai-queue"])
