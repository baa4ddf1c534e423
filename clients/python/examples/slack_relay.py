import httpx
from aiqueue_client import BadSignature, verify_notification
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def slack_relay(secret: str, slack_url: str) -> Route:
    async def relay(request: Request) -> Response:
        try:
            event = verify_notification(secret, await request.body(), request.headers)
        except BadSignature:
            return Response(status_code=401)
        if event["type"] in ("marking.alert_opened", "marking.alert_resolved"):
            state = "🔴 opened" if event["type"] == "marking.alert_opened" else "✅ resolved"
            text = (f"aiqueue {event['alert']} {state} (pool {event['pool']}: "
                    f"{event['value']:g}, threshold {event['threshold']:g})")
            async with httpx.AsyncClient() as client:
                await client.post(slack_url, json={"text": text})  # Slack incoming webhook
        return Response(status_code=204)

    return Route("/aiqueue/notifications", relay, methods=["POST"])
