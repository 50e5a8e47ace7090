"""The schema and the keys of evidence.json that the harness's core writes, read by both sides: the harness
(evidence.py writes them; a pattern's probe may not claim one) and repairbot's own
``repairbot/evidence.py`` (every other key is a pattern probe's record). Standard library
only, imports nothing: the main process imports it without torch."""

from typing import FrozenSet

# The version both sides check: the parent reads no evidence.json of another schema.
SCHEMA = "repairbot.evidence/1"

# Written by the core under a launcher only (torchrun, accelerate launch): which rank traced it.
LAUNCHED_KEYS: FrozenSet[str] = frozenset({"rank"})

# Every key the core writes (in each run, but LAUNCHED_KEYS only in a launched one).
CORE_KEYS: FrozenSet[str] = frozenset({
    "schema", "outcome", "exit_code", "exception", "stopped_at", "limits", "progress", "linears",
    "layer_sites", "probes", "health", "imported_files", "environment", "files",
}) | LAUNCHED_KEYS
