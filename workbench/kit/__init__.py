"""The synthesis kit formulations build with: schedules from buffer accesses or deliveries
(``schedule``), reductions by duality (``duality``), hand-built reference schedules (``examples``),
the MILP layer and solver statuses (``milp``, ``milp_expressions``, ``solvers``), one deadline per
synthesis (``deadline``), integer max-flow (``maxflow``) and the symmetries of regular fabrics
(``symmetry``, ``cluster_translations``)."""
