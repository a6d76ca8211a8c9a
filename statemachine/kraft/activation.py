"""What a controller writes when it becomes active (Kafka's ``ActivationRecordsGenerator``).

On an empty log (no ``metadata.version`` yet) it writes the bootstrap records, in a metadata
transaction named "Bootstrap records" from 3.6-IV1 (atomically before), and, when they turn
eligible leader replicas on, a cluster-level ``min.insync.replicas`` from its static config: the
ELR rules need one (Kafka 4.1 turns ELR on for new clusters). A partial bootstrap transaction
left by a controller that failed over is aborted and written again. On a log that has a
``metadata.version`` it only aborts a transaction still open.
"""

from __future__ import annotations

from kraftlake.records.kraft import AbortTransaction, BeginTransaction, Config, EndTransaction
from kraftlake.records.metadata_versions import name_of

from . import commands as c
from .features import METADATA_VERSION, MV_3_6_IV1
from .replication import BROKER_RESOURCE, ELR_FEATURE, MIN_INSYNC_REPLICAS
from .view import ControllerView

BOOTSTRAP_TRANSACTION = "Bootstrap records"
FAILOVER = "Controller failover"


def activate(view: ControllerView, cmd: c.Activate) -> c.Decision:
    """``ActivationRecordsGenerator.generate``: the records an activating controller writes."""
    open_txn = view.transaction
    if METADATA_VERSION in view.features:  # recordsForNonEmptyLog
        if open_txn is None:
            return c.Decision()
        if view.metadata_version < MV_3_6_IV1:
            return _unsupported("in-progress", open_txn.begin_offset, view.metadata_version)
        return c.Decision(records=(AbortTransaction(reason=FAILOVER),))
    levels = {f.name: f.feature_level for f in cmd.bootstrap}
    if METADATA_VERSION not in levels:
        return c.Decision(
            reply=c.Reply(
                error_code=c.UNKNOWN_SERVER_ERROR,
                message=f"No FeatureLevelRecord for {METADATA_VERSION} was found in the bootstrap metadata",
            )
        )
    mv = levels[METADATA_VERSION]
    transactions = mv >= MV_3_6_IV1
    records: list = []
    if open_txn is not None:
        if not transactions:
            return _unsupported("partial bootstrap records", open_txn.begin_offset, mv)
        records += [AbortTransaction(reason=FAILOVER), BeginTransaction(name=BOOTSTRAP_TRANSACTION)]
    elif transactions:
        records.append(BeginTransaction(name=BOOTSTRAP_TRANSACTION))
    records += cmd.bootstrap
    if levels.get(ELR_FEATURE, 0) > 0:
        records.append(
            Config(
                resource_type=BROKER_RESOURCE,
                resource_name="",
                name=MIN_INSYNC_REPLICAS,
                value=str(cmd.default_min_insync_replicas),
            )
        )
    if transactions:
        records.append(EndTransaction())
    return c.Decision(records=tuple(records))


def _unsupported(what: str, offset: int, mv: int) -> c.Decision:
    # Kafka raises here, a fault that stops the controller: nothing is written.
    return c.Decision(
        reply=c.Reply(
            error_code=c.UNKNOWN_SERVER_ERROR,
            message=f"Detected {what} transaction at offset {offset}, but the metadata.version {name_of(mv) or mv}"
            " does not support transactions. Cannot continue.",
        )
    )
