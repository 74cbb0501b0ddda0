"""The names of a result row's keys, defined once.

A row (one line of ``rows.jsonl``) is written by the runner (``workbench.run.row``: the cell's
identity, then what its process returned, then the environment) and read by the report, the
plots, the checks and the commands. Every one of them names the keys through these constants.
A formulation's own facts (``row_facts``, see ``workbench.plugin.registry``) keep the names the
formulation gives them.
"""

from __future__ import annotations

# ---------------------------------------------------------------- the cell (``workbench.run.row``)
CELL_ID = "cell_id"
EXPERIMENT = "experiment"
KIND = "kind"  # "schedule" or "design"
TOPOLOGY = "topology"  # its label
TOPOLOGY_SOURCE = "topology_source"  # its spec, file or design
COLLECTIVE = "collective"  # its kind
ROOT = "root"
SIZE_BYTES = "size_bytes"
CHUNKS = "chunks"
FORMULATION = "formulation"  # its label
FORMULATION_NAME = "formulation_name"
PARAMS = "params"
SEED = "seed"
TIME_LIMIT = "time_limit"
DESIGN = "design"  # a design cell's name

# ---------------------------------------------------------------- the synthesis (``workbench.run.evaluate``)
STATUS = "status"
SOLVER_STATUS = "solver_status"
SYNTHESIS_SECONDS = "synthesis_seconds"
STATS = "stats"
MESSAGE = "message"
MODEL_OPTIMAL = "model_optimal"
NPUS = "npus"
LINKS = "links"
CHUNK_BYTES = "chunk_bytes"

# ---------------------------------------------------------------- the evaluation
BOUND = "bound"
BOUND_EXACT = "bound_exact"
RS_AG_THROUGHPUT = "rs_ag_throughput"
IDEAL = "ideal"
IDEAL_DIMS = "ideal_dims"
BOUNDS = "bounds"
CLAIMED_TIME = "claimed_time"
CLAIM_MODEL = "claim_model"
CLAIM_SIMULATED = "claim_simulated"
COLLECTIVE_TIME = "collective_time"
DEFAULT_COLLECTIVE_TIME = "default_collective_time"
ALGBW = "algbw"
BUSBW = "busbw"
TRANSFERS = "transfers"
ALGORITHM_META = "algorithm_meta"
ALGORITHMS = "algorithms"  # one entry per algorithm when there are several (a Pareto front)
EFFICIENCY = "efficiency"
IDEAL_EFFICIENCY = "ideal_efficiency"
IDEAL_DIMS_EFFICIENCY = "ideal_dims_efficiency"
LINK_UTILISATION = "link_utilisation"
ALGORITHM_FILES = "algorithm_files"
OUTPUT_ERROR = "output_error"

# ---------------------------------------------------------------- a design cell's result
BANDWIDTHS = "bandwidths"
DESIGN_TIME = "design_time"
COST = "cost"

# ---------------------------------------------------------------- the monitor and the environment
WALL_SECONDS = "wall_seconds"
FINISHED_AT = "finished_at"
VERSIONS = "versions"
GIT_COMMIT = "git_commit"
HOST = "host"

# ---------------------------------------------------------------- an algorithm's facts the rows carry
LABEL = "label"
STEPS = "steps"
ROUNDS = "rounds"
LATENCY_OPTIMAL = "latency_optimal"
BANDWIDTH_OPTIMAL = "bandwidth_optimal"
# every algorithm entry's facts, before the formulation's own ``row_facts``
ENTRY_FACTS = (LABEL, STEPS, ROUNDS)
# the optimality flags ``algorithm_meta`` carries after the formulation's own facts
OPTIMALITY_FACTS = (LATENCY_OPTIMAL, BANDWIDTH_OPTIMAL, MODEL_OPTIMAL)

# the roles a formulation may give its own facts (``row_facts = {meta key: role}``): the
# latency-bandwidth plot reads the fact whose role is CHUNKS_ROLE as an algorithm's chunk count
CHUNKS_ROLE = "chunks"
