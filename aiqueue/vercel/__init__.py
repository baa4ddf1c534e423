"""Running on Vercel: the app each `api/` file exports, and reading `vercel.json`."""

from aiqueue.vercel.app import PublicPaths, check_durations, vercel_app

__all__ = ["PublicPaths", "check_durations", "vercel_app"]
