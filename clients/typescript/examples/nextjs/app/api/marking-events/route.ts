// GET /api/marking-events?assignment_id=…: the live stream for this app's pages.
// It forwards to aiqueue with the bearer (kept on the server) and passes the
// browser's Last-Event-ID through, so a dropped page connection resumes.
// (Check here that the signed-in user may see this assignment.)
export async function GET(request: Request): Promise<Response> {
  const url = new URL(request.url);
  const upstream = new URL("/api/marking/events", process.env.AIQUEUE_URL);
  upstream.search = url.search;
  const lastEventId = request.headers.get("last-event-id");
  const answer = await fetch(upstream, {
    headers: {
      authorization: `Bearer ${process.env.MARKING_QUEUE_SECRET ?? ""}`,
      accept: "text/event-stream",
      ...(lastEventId ? { "last-event-id": lastEventId } : {}),
    },
    signal: request.signal,
  });
  return new Response(answer.body, {
    status: answer.status,
    headers: { "content-type": answer.headers.get("content-type") ?? "text/event-stream",
      "cache-control": "no-store" },
  });
}

export const dynamic = "force-dynamic";
