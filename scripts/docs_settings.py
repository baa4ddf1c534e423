"""What each setting sets, in words: the hand-written column of docs/reference/configuration.md.

scripts/docs_reference.py takes defaults and checks from the code and this text from
here; tests/docs/test_docs.py fails when a variable or key the code reads has no entry
here, or an entry names one the code no longer reads. `default` is given only where
the settings table has no field to read it from; `probe=False` leaves a variable's
checks out where a bad value means something else (VERCEL=x is "on Vercel").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Described:
    what: str
    default: str = ""
    probe: bool = True


V = Described
VARIABLES: dict[str, Described] = {
    # The database.
    "DATABASE_URL": V("The PostgreSQL the queue lives in; on Vercel the transaction pooler. "
                      "Unset: an embedded PostgreSQL under `.data/` (local runs only).",
                      "embedded PostgreSQL"),
    "DATABASE_DIRECT_URL": V("A session connection for migrations and `LISTEN` (live events "
                             "are pushed; without it they poll).", "`DATABASE_URL`"),
    "DATABASE_POOL_MAX": V("The most database connections one instance opens."),
    "DATABASE_PREPARED_STATEMENTS": V("Prepared statements kept per connection: `auto` is "
                                      "on for a direct connection and off behind a "
                                      "transaction-mode pooler (Supavisor's port 6543, a "
                                      "PgBouncer in front), and turned off for the "
                                      "instance at the first statement a pooler loses (one "
                                      "the check did not see; logged once, the request "
                                      "answered); `on` for a PgBouncer 1.21+ with "
                                      "`max_prepared_statements`. The doctor says which it "
                                      "chose and why."),
    # Secrets and who may call.
    "MARKING_QUEUE_SECRET": V("The bearer your app sends; signs callback tokens. Several "
                              "values separated by spaces, newest first, for rotation.",
                              "generated per run (required in production)"),
    "CRON_SECRET": V("The bearer Vercel Cron sends on `GET /api/marking/process-queue`; "
                     "several values for rotation, as `MARKING_QUEUE_SECRET`."),
    "AI_QUEUE_ADMIN_PASSWORD": V("The `/ai-queue` login. Changing it signs every operator out.",
                                 "`MARKING_QUEUE_SECRET`"),
    "METRICS_TOKEN": V("A second bearer, for `/metrics` only."),
    "APP_BASE_URL": V("The app's public URL: the chain and the function's callbacks use it.",
                      "`https://$VERCEL_PROJECT_PRODUCTION_URL` on Vercel (a preview: its own "
                      "URL), else `http://127.0.0.1:<port>`"),
    "AI_MARKING_CALLBACK_URL": V("Where the function posts results; `https://` outside "
                                 "`dev` unless local.",
                                "`APP_BASE_URL` + `/webhooks/ai-mark`"),
    # The marking function and where jobs go.
    "AI_MARKING_DISPATCH": V("Where jobs go: `http`, `digitalocean` or `lambda` "
                             "([Deploying](../deploying/index.md#where-jobs-go)).", "`http`"),
    "AI_MARKING_FUNCTION_URL": V("The function's URL (`http` dispatch), and the batch lane's "
                                 "render/parse endpoint.",
                                 "`http://127.0.0.1:8001/` (required in production)"),
    "AI_MARKING_FUNCTION_TOKEN": V("The bearer sent to the function."),
    "AI_MARKING_FUNCTION_MODE": V("`async`: the function acknowledges and calls back; `sync`: "
                                  "its answer is the result (`http` only).", "`async`"),
    "AI_MARKING_SIGNING_SECRET": V("Signs every `http` dispatch per Standard Webhooks v1; the "
                                   "reference function then refuses unsigned ones."),
    "QUEUE_DISPATCH_TIMEOUT_SECONDS": V("How long a dispatch may take to be accepted (in `sync` "
                                        "mode: to be answered)."),
    "DO_FUNCTIONS_API_HOST": V("DigitalOcean Functions' API host (`digitalocean` dispatch)."),
    "DO_FUNCTIONS_NAMESPACE": V("The namespace id, `fn-…`."),
    "DO_FUNCTIONS_ACTION": V("The action, `package/action`."),
    "DO_FUNCTIONS_AUTH": V("The namespace's access key, `<uuid>:<secret>`."),
    "DO_FUNCTIONS_ACTION_TIMEOUT_SECONDS": V(
        "The action's time limit; keep it equal to `limits.timeout` in the function's "
        "`project.yml`.", "`300`"),
    "AWS_REGION": V("The Lambda function's region (`lambda` dispatch)."),
    "AWS_ACCESS_KEY_ID": V("Static AWS keys, when `AWS_ROLE_ARN` is not set."),
    "AWS_SECRET_ACCESS_KEY": V("Static AWS keys, when `AWS_ROLE_ARN` is not set."),
    "AWS_SESSION_TOKEN": V("With temporary static keys."),
    "AWS_DEFAULT_REGION": V("Read only to name it when Lambda refuses (on Vercel it may be "
                            "a placeholder).", probe=False),
    "AWS_ROLE_ARN": V("A role trusting Vercel's OIDC provider, assumed with "
                      "`AssumeRoleWithWebIdentity`: no static keys."),
    "VERCEL_OIDC_TOKEN": V("Vercel's OIDC token, exchanged for AWS keys with `AWS_ROLE_ARN` "
                           "(the `x-vercel-oidc-token` header replaces it)."),
    "AI_MARKING_LAMBDA_FUNCTION": V("The function's name or ARN, optionally `:qualifier`."),
    "AWS_ENDPOINT_URL_LAMBDA": V("Another Lambda endpoint (an emulator); `https://` outside "
                                 "`dev` unless local.",
                                 "`https://lambda.<region>.amazonaws.com`"),
    "AWS_ENDPOINT_URL_STS": V("Another STS endpoint; `https://` outside `dev` unless local.",
                              "`https://sts.<region>.amazonaws.com`"),
    # The queue's limits and timing.
    "QUEUE_MAX_IN_FLIGHT": V("The most jobs at the function at once (the default pool's cap "
                             "for the learned limit `L`); `0`: unlimited until the model "
                             "first refuses."),
    "QUEUE_MAX_ATTEMPTS": V("Attempts before a row fails."),
    "QUEUE_RETRY_BASE_SECONDS": V("The first retry's backoff; it doubles per attempt."),
    "QUEUE_RETRY_MAX_SECONDS": V("The longest backoff."),
    "QUEUE_STUCK_AFTER_SECONDS": V("A `processing` row with no word for this long is recovered."),
    "QUEUE_HEARTBEAT_TIMEOUT_SECONDS": V("A row whose function sent a heartbeat is recovered "
                                         "this long after the last one."),
    "QUEUE_PLATFORM_GRACE_SECONDS": V("How long past a platform's time limit a silent "
                                      "dispatch waits before it is recovered."),
    "QUEUE_BREAKER_THRESHOLD": V("Consecutive failed dispatches that open the circuit breaker."),
    "QUEUE_BREAKER_COOLDOWN_SECONDS": V("How long the breaker stays open."),
    "QUEUE_TICK_SECONDS": V("The in-process safety net of `serve` and `dev`; `0`: off."),
    # Flow control.
    "QUEUE_TOKENS_PER_MINUTE": V("The default pool's declared token budget; `0`: none."),
    "QUEUE_REQUESTS_PER_MINUTE": V("The default pool's declared request budget; `0`: none."),
    "QUEUE_BUDGET_WINDOW_SECONDS": V("The window a declared budget holds over."),
    "QUEUE_REFUSED_GIVE_UP_SECONDS": V("A row still refused this long after its first refusal "
                                       "fails as `rate_limited`."),
    # Money.
    "QUEUE_MODEL_PRICES": V("USD per 1M tokens by model, "
                            "`{\"<model>\": {\"input\": …, \"output\": …}}`."),
    "QUEUE_GROUP_USD_PER_HOUR": V("The default pool's spend cap per group and UTC hour."),
    "QUEUE_GROUP_USD_PER_DAY": V("The default pool's spend cap per group and day (days begin "
                                 "at midnight in `QUEUE_TIMEZONE`)."),
    "QUEUE_USD_PER_DAY": V("The default pool's spend cap per day."),
    "QUEUE_TIMEZONE": V("Where days begin (an IANA name, e.g. `Europe/Berlin`): the daily "
                        "spend caps, the usage report's days, the charts and the pages' times. "
                        "Hourly windows stay clock hours."),
    # The provider's prompt cache (docs/prompt-cache.md).
    "QUEUE_PROMPT_CACHE_TTL_SECONDS": V("The default pool's: how long the provider keeps an "
                                        "unused prompt prefix; `0`: schedule as before."),
    "QUEUE_PROMPT_CACHE_MIN_TOKENS": V("The default pool's: the shortest prefix the provider "
                                       "caches; a shorter payload is scheduled as before."),
    # The overnight lane.
    "QUEUE_BATCH_FALLBACK_MARGIN_SECONDS": V("A batch goes live this long before its rows' "
                                             "live marking would miss the deadline."),
    # Notifications and alerts.
    "QUEUE_NOTIFY_URL": V("Where notifications are POSTed."),
    "QUEUE_NOTIFY_SECRET": V("The Standard Webhooks secret that signs them, `whsec_…`."),
    "QUEUE_NOTIFY_TIMEOUT_SECONDS": V("Each delivery attempt's deadline."),
    "QUEUE_NOTIFY_RETRY_BASE_SECONDS": V("Scales the retry schedule (5 s, 25 s, ~2 min, …)."),
    "QUEUE_NOTIFY_GIVE_UP_SECONDS": V("How long an event is retried."),
    "QUEUE_ALERT_BACKLOG_AGE_SECONDS": V("`backlog_age` fires past this wait."),
    "QUEUE_ALERT_STALLED_SECONDS": V("`stalled` fires after this long without a dispatch "
                                     "taken."),
    "QUEUE_ALERT_FAILURES_MIN": V("`failure_spike` needs at least this many failures in "
                                  "15 minutes…"),
    "QUEUE_ALERT_FAILURE_RATE": V("…and at least this share of the rows that ended."),
    "QUEUE_ALERT_P95_SECONDS": V("The `latency` alert opens when the p95 processing time of "
                                 "the last 15 minutes is above this."),
    # Retention.
    "QUEUE_PRUNE_AFTER_DAYS": V("Completed rows (and delivered notifications) are kept this "
                                "long."),
    "QUEUE_RETAIN_ENDED_DAYS": V("Failed, cancelled and expired rows are kept this long."),
    "QUEUE_RETAIN_HISTORY_DAYS": V("Applied results and long-kept attempt history."),
    # Live events.
    "QUEUE_EVENTS_MAX_SECONDS": V("A live-event stream's lifetime (it ends before the "
                                  "platform cuts it)."),
    "QUEUE_EVENTS_HEARTBEAT_SECONDS": V("A stream's heartbeat; at most 15."),
    "QUEUE_EVENTS_POLL_SECONDS": V("How often a stream polls without `LISTEN`."),
    # Traces (docs/tracing.md): OpenTelemetry's standard variables.
    "OTEL_EXPORTER_OTLP_ENDPOINT": V("The OTLP/HTTP collector: set, each job exports one "
                                     "trace to its `/v1/traces` (protobuf). Unset: tracing "
                                     "is off and OpenTelemetry is not even imported."),
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": V("The traces URL itself (used as it is, instead "
                                            "of the endpoint above).", "none", probe=False),
    "OTEL_EXPORTER_OTLP_HEADERS": V("Headers sent to the collector, `key=value,…` (an API "
                                    "key, e.g. `x-honeycomb-team=…`).", "none", probe=False),
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": V("The same, for traces only (instead of the "
                                           "above).", "none", probe=False),
    "OTEL_SERVICE_NAME": V("The `service.name` of aiqueue's spans.", "`aiqueue`",
                           probe=False),
    "OTEL_RESOURCE_ATTRIBUTES": V("More resource attributes, `key=value,…` (e.g. "
                                  "`deployment.environment=prod`).", "none", probe=False),
    "OTEL_TRACES_SAMPLER": V("Which jobs are traced: `parentbased_always_on`, "
                             "`parentbased_traceidratio` (with the ratio below), "
                             "`always_off`, …; decided once per job, at its enqueue.",
                             "`parentbased_always_on`", probe=False),
    "OTEL_TRACES_SAMPLER_ARG": V("The ratio of jobs traced by a `…traceidratio` sampler, "
                                 "0 to 1.", "`1.0`", probe=False),
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": V("Spans a request sends: a batch leaves as soon as "
                                        "this many wait.", "`512`", probe=False),
    "OTEL_BSP_SCHEDULE_DELAY": V("Milliseconds a part batch waits before it leaves.",
                                 "`5000`", probe=False),
    "OTEL_BSP_MAX_QUEUE_SIZE": V("Spans that may wait to be sent; past it new spans are "
                                 "dropped and counted in a `trace_lost` log line.", "`8192`",
                                 probe=False),
    "OTEL_BSP_EXPORT_TIMEOUT": V("Milliseconds a batch is tried for while the collector "
                                 "answers 429, 502, 503 or 504 (or not at all); then it is "
                                 "dropped, logged as `trace_lost`.", "`30000`", probe=False),
    "OTEL_EXPORTER_OTLP_COMPRESSION": V("`gzip` compresses each request's body.", "`none`",
                                        probe=False),
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": V("The same, for traces only (instead of the "
                                               "above).", "none", probe=False),
    "OTEL_SDK_DISABLED": V("`true` turns tracing off whatever the endpoint.", "`false`",
                           probe=False),
    "OTEL_TRACES_EXPORTER": V("`none` turns tracing off whatever the endpoint.",
                              "`otlp`", probe=False),
    # Where it runs.
    "AIQUEUE_CONFIG": V("The kinds-and-pools file.", "`aiqueue.toml` at the app's root, if any"),
    "AIQUEUE_ENV": V("`production` requires `DATABASE_URL`, `MARKING_QUEUE_SECRET` and (with "
                     "`http` dispatch) `AI_MARKING_FUNCTION_URL`.", "", probe=False),
    "VERCEL": V("Set by Vercel: production rules apply, and Vercel's defaults.", probe=False),
    "VERCEL_ENV": V("Set by Vercel: `preview` takes the preview's own URL; `development` "
                    "(`vercel dev`) allows http:// to any host.", probe=False),
    "VERCEL_URL": V("Set by Vercel: a preview's `APP_BASE_URL`.", probe=False),
    "VERCEL_PROJECT_PRODUCTION_URL": V("Set by Vercel: production's `APP_BASE_URL`.",
                                       probe=False),
}

KEYS: dict[str, dict[str, Described]] = {
    "pools": {
        "max_in_flight": V("The cap for the pool's learned limit `L`; `0`: unlimited until "
                           "the model first refuses. Required, except in `[pools.default]`.",
                           "required"),
        "tokens_per_minute": V("A declared token budget; `0`: none."),
        "requests_per_minute": V("A declared request budget; `0`: none."),
        "prices": V("USD per 1M input / output tokens by model: "
                    "`{ \"gpt-4o-mini\" = [0.15, 0.60] }`. A model priced differently by two "
                    "pools is refused."),
        "group_usd_per_hour": V("Spend cap per group and clock hour (needs `prices`)."),
        "group_usd_per_day": V("Spend cap per group and day (needs `prices`)."),
        "pool_usd_per_day": V("Spend cap for the pool per day (needs `prices`)."),
        "timezone": V("Where the pool's days begin for its daily caps (an IANA name).",
                      "`QUEUE_TIMEZONE`"),
        "batch": V("The overnight lane's provider: `openai` or `anthropic`."),
        "batch_base_url": V("The provider's API.", "the provider's own"),
        "batch_key_env": V("The variable holding the provider's key (required with `batch`)."),
        "batch_model": V("The model batches use (required with `batch`)."),
        "batch_prices": V("USD per 1M tokens on the batch lane.", "half of `prices`"),
        "prompt_cache": V("The provider's prompt cache: the `[pools.<name>.prompt_cache]` "
                          "table below.", "see below", probe=False),
    },
    "pools.prompt_cache": {
        "ttl_seconds": V("How long the provider keeps an unused prefix; `0`: schedule as "
                         "before. The default pool's: `QUEUE_PROMPT_CACHE_TTL_SECONDS`."),
        "min_tokens": V("The shortest prefix the provider caches; a payload under it (its "
                        "JSON length / 4) is scheduled as before. The default pool's: "
                        "`QUEUE_PROMPT_CACHE_MIN_TOKENS`."),
        "write": V("A cache write's price, as a multiple of the input price."),
        "read": V("A cache read's price, as a multiple of the input price."),
        "key_rpm": V("Above this rate per prefix, the cache key is sharded (`:<n>`)."),
        "fair_quantum": V("How far, in weighted tokens, a warm group may run ahead of the "
                          "smallest counter.", "4 × the pool's mean row charge"),
    },
    "kinds": {
        "pool": V("The pool the kind's rows belong to.", "`default`"),
        "dispatch": V("`http`, `digitalocean` or `lambda`, as `AI_MARKING_DISPATCH`."),
        "function_url": V("The function's URL (required with `http`; for a batch pool, where "
                          "render/parse go)."),
        "token_env": V("The variable holding the function's token (DigitalOcean: the "
                       "namespace's key)."),
        "do_namespace": V("The DigitalOcean namespace.", "`DO_FUNCTIONS_NAMESPACE`"),
        "do_action": V("The DigitalOcean action, `package/action` (required with "
                       "`digitalocean`)."),
        "lambda_function": V("The Lambda function (required with `lambda`)."),
        "max_in_flight": V("The kind's own cap inside its pool; `0`: none."),
        "max_attempts": V("Attempts before a row of the kind fails.", "`QUEUE_MAX_ATTEMPTS`"),
        "lane": V("The lane an enqueue of the kind takes when it names none: `live` or "
                  "`batch`."),
        "same_answers": V("`mark_once` marks answers that are the same after normalising "
                          "(NFKC, whitespace; case kept) once and copies the mark; `loose` "
                          "also ignores case and a final `.`/`!`; `off` (or `mark_each`) "
                          "marks every answer unless the enqueue asks for `mark_once`. "
                          "See [the same answer](../same-answer.md).", "`mark_once`"),
        "fallback": V("Another kind, in another pool, whose function takes this kind's due "
                      "rows while this kind's pool is down."),
        "fallback_after_seconds": V("How long the pool must refuse every call before its "
                                    "rows fall back (an open circuit falls back at once), "
                                    "and how long after its last hold it is tried again.",
                                    "`120`"),
        "expected_seconds": V("Seconds one row of the kind is expected to take, for the "
                              "estimate before any row of it has finished; without it the "
                              "time is shown after the first marks.", "none"),
        "canary": V("A drift canary: the `[kinds.<name>.canary]` table below.", "none",
                    probe=False),
    },
    "kinds.canary": {
        "rows": V("How many teacher-reviewed results of the kind a canary re-marks (spread "
                  "across assignments); 1 to 200."),
        "every_seconds": V("How often a canary runs on its schedule; one also "
                           "runs when a result reports a model or function version unlike "
                           "the last passing canary's."),
        "max_drop": V("A drop of more than this in `exact` or `qwk` against the last passing "
                      "canary opens a `drift` alert (0 to 1)."),
        "lane": V("`live` or `batch` (needs the pool's batch API).",
                  "`batch` when the pool has a batch API, else `live`"),
        "max_share": V("A canary is skipped when it would take the kind's canary spend over "
                       "this share of its spend in the last 30 days (0 to 1)."),
    },
}
