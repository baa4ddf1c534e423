-- What the overnight lane records before it asks a provider to create anything, and what a
-- later step reconciles by (aiqueue/batch/reconcile.py; migration 0025): the tag, the
-- intent, a lost answer, a record clearing what the provider may keep, a withdrawn batch.

-- batch_tag --
-- The tag a batch's provider objects carry (aiqueue_batch_tag).
SELECT aiqueue_batch_tag($1::bigint);

-- batch_intent --
-- About to ask the provider to create: the lines sent ($2) and the files it
-- keeps already ($3), recorded first, so a lost answer is looked for by them.
-- Only while the record still says 'submitting' (a reconcile may have won).
UPDATE ai_marking_batches SET rows = $2, files = $3::text[], submitted_at = now()
WHERE id = $1 AND state = 'submitting'
RETURNING id;

-- batch_unsure --
-- A create whose answer was lost ($2: its code): the next step's reconcile
-- looks for the batch by its tag at once, not after the grace.
UPDATE ai_marking_batches SET error = $2 WHERE id = $1 AND state = 'submitting';

-- batch_clear --
-- The record's rows go back to waiting, but the provider may keep files ($3)
-- or a batch of it: later steps look for them from $4 seconds on, and delete.
UPDATE ai_marking_batches
SET state = 'clearing', error = $2, files = $3::text[],
    look_after = now() + make_interval(secs => $4::float8)
WHERE id = $1 AND state IN ('submitting', 'clearing', 'abandoned')
RETURNING id;

-- batch_withdrawn --
-- A provider batch holding none of the record's rows any more (a reconcile
-- gave them back, or found it late): cancelled, looked at like any cancelled
-- batch until it has ended and is deleted.
UPDATE ai_marking_batches
SET state = 'cancelling', provider_batch_id = $2, files = $3::text[],
    submitted_at = coalesce(submitted_at, now()), look_after = now()
WHERE id = $1 AND state IN ('submitting', 'clearing', 'abandoned');

-- batch_known --
-- The provider ids the lane recorded for pool $1 lately: a reconcile never
-- takes one of them for a batch whose create was lost.
SELECT provider_batch_id FROM ai_marking_batches
WHERE pool = $1 AND provider_batch_id IS NOT NULL AND created_at > now() - interval '2 days';

-- batches_stale --
-- Records to reconcile: still 'submitting' $2 seconds after their intent
-- (their step crashed or is stuck between recording and creating) or after
-- a create whose answer was lost (error set); and 'clearing' ones due for a
-- look.  created_at is the intent's time (what a lost create is found by).
SELECT id, provider, model, provider_batch_id, files, state, rows, error,
       aiqueue_batch_tag(id) AS tag,
       date_part('epoch', coalesce(submitted_at, created_at)) AS created_at
FROM ai_marking_batches
WHERE pool = $1
  AND ((state = 'submitting'
        AND (error IS NOT NULL
             OR coalesce(submitted_at, created_at) < now() - make_interval(secs => $2::float8)))
       OR (state = 'clearing' AND look_after <= now()))
ORDER BY id
LIMIT 20;
