"""aiqueue.toml: task kinds and model pools (CONTRACT §9b), read once at start-up.

A *kind* names what a row asks for and which function does it, and the lane
it takes by default; a *pool* is one model key with its own limits (the cap
for the learned limit L, declared budgets, prices, spend caps) and, if it
allows the overnight lane (§9f), its provider's batch API.  Every kind
belongs to one pool.

Without a file there is one kind, `mark`, in one pool, `default`, both built
from the environment (aiqueue/settings.py `Settings.queue`): the file adds
kinds and pools beside them, and may redeclare either to change it
(`[pools.default]` changes only the keys it sets).

`model.py` holds the shapes and how they merge, `load.py` reads the file,
`values.py` checks each value with an error that names its key.
"""

from aiqueue.config.load import config_path, load_file
from aiqueue.config.model import (
    BATCH_SHARE,
    DEFAULT_KIND,
    DEFAULT_POOL,
    BatchProvider,
    Kind,
    Lane,
    Pool,
    Price,
    QueueConfig,
    merged,
)
from aiqueue.config.values import NAME

__all__ = ["BATCH_SHARE", "DEFAULT_KIND", "DEFAULT_POOL", "NAME", "BatchProvider", "Kind",
           "Lane", "Pool", "Price", "QueueConfig", "config_path", "load_file", "merged"]
