from collections.abc import Callable
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def notifications(secret: str, handle: Callable[[str, dict[str, Any]], None]) -> Route:
    webhook = Webhook(secret)  # QUEUE_NOTIFY_SECRET, whsec_…

    async def receive(request: Request) -> Response:
        try:
            event = webhook.verify(await request.body(), dict(request.headers))
        except WebhookVerificationError:
            return Response(status_code=401)
        # marking.run_finished or marking.row_failed; a retry repeats its webhook-id.
        handle(request.headers["webhook-id"], event)
        return Response(status_code=204)

    return Route("/aiqueue/notifications", receive, methods=["POST"])
