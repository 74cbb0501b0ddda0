"""Test tiers: ``make test`` runs everything but the ``slow`` cases; ``make test-fast`` (under a
minute) also leaves out the heavy cases listed here, each of which takes seconds (a solver, a
whole run of cells, a process that must be killed). They are marked ``heavy`` at collection.
"""

import os

import pytest
from hypothesis import settings

# The property tests draw the same examples on every run ("repeatable": a verdict and a suite time
# that do not change between two runs of one commit); HYPOTHESIS_PROFILE=explore draws fresh ones.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

HEAVY = {  # test file -> test functions (every parameter set of each)
    "test_claims.py": {
        "test_a_claim_in_a_simulator_model_is_reproduced_at_every_size[forestcoll-allgather]",
        "test_forestcoll_reductions_claim_their_own_time",
        "test_forestcoll_file_order_serves_small_messages_as_fifo_would",
        "test_own_models_are_named[sccl-params0-sccl-steps]",
    },
    "test_cli_edges.py": {
        "test_time_limit_bounds_the_wall_time_of_synth",
    },
    "test_compiled_checks.py": {
        "test_both_verifiers_give_the_same_verdict_and_message",
    },
    "test_forestcoll.py": {
        "test_allgather_within_two_percent_of_optimum_at_1gib",
        "test_cli_synth_nvs_ib",
        "test_reductions_through_switches_stay_near_the_optimum",
    },
    "test_fresh_resume.py": {
        "test_an_interrupted_fresh_run_is_resumed_by_the_same_command",
    },
    "test_model_rewrite.py": {
        "test_the_larger_models_match_their_recorded_forms",
    },
    "test_msccl.py": {
        "test_runtime_limit_is_named",
    },
    "test_orphans.py": {
        "test_killing_the_parent_kills_its_cells",
    },
    "test_rebound.py": {
        "test_rebound_replaces_a_loose_bound_and_keeps_everything_else",
    },
    "test_run_lock.py": {
        "test_a_second_run_on_a_busy_folder_is_refused",
    },
    "test_runner.py": {
        "test_a_timed_out_incumbent_is_evaluated_under_the_evaluation_limit",
        "test_ctrl_c_keeps_finished_rows_and_the_next_run_finishes",
        "test_dask_scheduler_gives_the_same_results_as_local_jobs",
        "test_killed_parent_resumes_with_every_cell_exactly_once",
        "test_synth_counts_its_time_limit_from_the_command_start",
        "test_synth_timeout_and_infeasible_have_distinct_messages",
        "test_timeout_error_and_abort_are_recorded_and_the_run_continues",
        "test_tiny_experiment_end_to_end",
        "test_unreachable_scheduler_is_a_clear_error",
    },
    "test_sccl.py": {
        "test_pareto_k0_allgather_reproduces_the_table_frontier",
        "test_race_times_out_as_unknown_and_kills_both_engines",
        "test_slow_unsat_times_out_under_a_hard_limit",
        "test_table_rows_are_sat_and_verify",
        "test_z3_and_cpsat_agree",
    },
    "test_taccl.py": {
        "test_every_collective_verifies",
        "test_ndv2_allgather_blocking_simulation_replays_the_stage3_plan",
        "test_switch_sketch_on_nic_topology_with_relays_and_ordering",
        "test_symmetry_shrinks_the_routing_model",
    },
    "test_teccl.py": {
        "test_astar_against_the_milp",
        "test_ndv2_allgather_respects_the_ib_bound",
        "test_ndv2_alltoall_respects_the_ib_bound",
        "test_output_verifies_on_random_small_topologies",
        "test_simulated_time_within_one_epoch_of_the_claim",
        "test_table7_allgather_instances_match_sccl",
    },
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = HEAVY.get(item.path.name, ())
        if item.originalname in names or item.name in names:
            item.add_marker(pytest.mark.heavy)



@pytest.fixture(scope="session")
def tiny_run_template(tmp_path_factory):
    """A finished two-cell run of ``guards.TINY_RUN`` (run once per test process; copied by ``tiny_run``)."""
    from workbench.cli import main

    from guards import TINY_RUN

    base = tmp_path_factory.mktemp("tiny-run")
    (base / "tiny.yaml").write_text(TINY_RUN)
    assert main(["run", str(base / "tiny.yaml"), "--out", str(base / "run"), "--no-figures"]) == 0
    return base


@pytest.fixture()
def tiny_run(tmp_path, tiny_run_template):
    """(config, run folder): a private copy of a finished tiny run, for a test to damage."""
    import shutil

    shutil.copy(tiny_run_template / "tiny.yaml", tmp_path / "tiny.yaml")
    shutil.copytree(tiny_run_template / "run", tmp_path / "run", symlinks=True)
    return tmp_path / "tiny.yaml", tmp_path / "run"


# OR-Tools is the optional ``cpsat`` extra (pyproject.toml): a test that cannot run without it is
# marked ``@pytest.mark.requires_ortools`` and skipped, with the reason, on an install without it
# (make test-plain). Located, not imported (formulations.sccl.options.cpsat_available).
ORTOOLS_MISSING = "OR-Tools is not installed (the optional cpsat extra: pip install -e '.[cpsat]')"


def pytest_configure(config):
    config.addinivalue_line("markers", "requires_ortools: needs OR-Tools (the cpsat extra); skipped without it")


def pytest_itemcollected(item):
    if item.get_closest_marker("requires_ortools") is not None:
        from formulations.sccl.options import cpsat_available

        if not cpsat_available():
            item.add_marker(pytest.mark.skip(reason=ORTOOLS_MISSING))  # reported at the test's own line
