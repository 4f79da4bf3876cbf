# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every study, in the order they run and their sections appear in the report. One explicit
list: a study that is not here does not exist."""
from encryption import Encryption
from idle import Idle
from legacy import Legacy
from neighbour import Neighbour
from ofi import Ofi
from peers import Peers
from placement import Placement
from placement_bw import PlacementBandwidth
from posted import Posted
from rate import Rate
from same_node import SameNode
from shm import Shm

STUDIES = (Shm, Legacy, Rate, Idle, Peers, Neighbour, Posted, Placement, PlacementBandwidth,
           SameNode, Ofi, Encryption)
NAMES = tuple(s.name for s in STUDIES)
DEFAULT = tuple(s.name for s in STUDIES if s.by_default)


def studies(table, names):
    """The studies named, each given its targets from table (targets.Table), in registry
    order; a row of the table that no study of the registry judges by stops the run."""
    chosen = [cls(table) if cls.name in names else None for cls in STUDIES]
    for cls in STUDIES:
        table.of(cls.name, cls.targets)
    if table.unused():
        raise ValueError(f"{table.path}: rows no study judges by: " +
                         ", ".join(f"{s} {t}" for s, t in table.unused()))
    return [s for s in chosen if s is not None]
