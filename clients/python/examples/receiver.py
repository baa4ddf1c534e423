from collections.abc import Callable
from typing import cast

from aiqueue_client import Notification
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def notifications(secret: str, handle: Callable[[str, Notification], None]) -> Route:
    webhook = Webhook(secret)  # QUEUE_NOTIFY_SECRET, whsec_…

    async def receive(request: Request) -> Response:
        try:
            body = webhook.verify(await request.body(), dict(request.headers))
        except WebhookVerificationError:
            return Response(status_code=401)
        # One of the eight marking.* types, told by event["type"]; a retry repeats its
        # webhook-id.
        handle(request.headers["webhook-id"], cast(Notification, body))
        return Response(status_code=204)

    return Route("/aiqueue/notifications", receive, methods=["POST"])
