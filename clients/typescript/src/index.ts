export * from "./client.js";
export { MarkingError, type ErrorBody } from "./errors.js";
export { markingEvents, type EventsOptions, type MarkingEventData } from "./events.js";
export { SseParser, type SseMessage } from "./sse.js";
export type { components, paths, webhooks } from "./schema.js";
