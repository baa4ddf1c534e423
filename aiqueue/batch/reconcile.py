"""Reconciling what a packing step left unsure, until the provider keeps nothing of it.

A record still 'submitting' whose step died, or whose create's answer was
lost (a timeout, a dropped connection), is looked for at the provider by its
tag (OpenAI: the batch's metadata; Anthropic, whose batches carry none: the
time of the record's intent and its size). Found with its rows still held:
the batch is adopted. Found without them: it is withdrawn (cancelled, then
deleted once it has ended, poll.py). Not found: the rows wait again, and the
record is 'clearing': for a while each step looks again for a batch or an
input file with its tag, and deletes what it finds.
"""

from __future__ import annotations

import time

from aiqueue.batch.pack import Packer, StepReport, give_back, withdraw
from aiqueue.batch.provider import Handle, ProviderError
from aiqueue.models.batch import LaneBatch


async def reconcile(packer: Packer, report: StepReport) -> None:
    """Settle the pool's records that a step left unsure (at most `packer.left()`)."""
    cfg = packer.config
    for batch in await packer.store.batches_stale(cfg.pool, cfg.submit_grace_seconds):
        if packer.left() <= 0:
            return
        try:
            if batch.state == "clearing":
                await _clear(packer, batch, report)
            else:
                await _settle(packer, batch, report)
        except ProviderError as exc:
            report.errors.append(exc.code)  # asked again on a later step


async def _settle(packer: Packer, batch: LaneBatch, report: StepReport) -> None:
    rows = await packer.store.batch_rows(batch.id)
    found = await _find(packer, batch)
    if found is not None and rows:
        await packer.store.batch_submitted(batch.id, found.batch_id, found.files,
                                           packer.config.poll_seconds)
    elif found is not None:
        await withdraw(packer, batch.id, found.batch_id, found.files)
    else:
        await give_back(packer, batch.id, batch.error or "not_created", report,
                        files=batch.files, clearing=True)


async def _clear(packer: Packer, batch: LaneBatch, report: StepReport) -> None:
    """Look again for what the provider may keep of a given-back record, and delete it."""
    cfg, provider = packer.config, packer.provider
    found = await _find(packer, batch)
    if found is not None:
        await withdraw(packer, batch.id, found.batch_id, found.files)
        return
    files = tuple(dict.fromkeys(batch.files + await provider.leftovers(batch.tag)))
    await provider.delete_files(files)
    report.deleted += bool(files)
    # A create whose answer was lost may still land: look until the grace has passed.
    settled = time.time() >= batch.created_at + cfg.submit_grace_seconds
    if settled:
        await packer.store.batch_abandon(batch.id, batch.error or "not_created")
    else:
        await packer.store.batch_clear(batch.id, batch.error or "not_created", (),
                                       cfg.poll_seconds)


async def _find(packer: Packer, batch: LaneBatch) -> Handle | None:
    known = await packer.store.batch_known(packer.config.pool)
    return await packer.provider.find(batch.tag, batch.rows, batch.created_at, known)
