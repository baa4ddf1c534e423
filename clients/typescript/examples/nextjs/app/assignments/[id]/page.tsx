// The assignment page (a server component): your app knows its submissions; this
// example takes their ids from the query string (?s=<id>&s=<id>) to stay self-contained.
import { randomUUID } from "node:crypto";
import { MarkAll } from "./MarkAll.js";

export default async function Page(props: {
  params: Promise<{ id: string }>;
  searchParams: Promise<{ s?: string | string[] }>;
}) {
  const { id } = await props.params;
  const { s } = await props.searchParams;
  const submissionIds = Array.isArray(s) ? s : s ? [s] : [];
  return <MarkAll assignmentId={id} submissionIds={submissionIds}
    idempotencyKey={randomUUID()} />;
}
