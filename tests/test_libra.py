"""LIBRA: closed forms, the spec's oracle table, backends agree, iso-cost ratios, input errors."""

import json
from pathlib import Path

import numpy as np
import pytest

from workbench.plugin import call
from formulations.libra import Libra
from workbench.cli import main
from formulations.libra.network import DesignInputError, load_network, load_workload, volumes
from workbench.plugin.registry import DesignProblem

DATA = str(Path(__file__).resolve().parents[1] / "data" / "libra")  # vendored with the repository


def repo_problem(workload, net="4d", total=1000, objective="perf", **constraints):
    comm = {"4d": "4d", "3d": "3d"}[net]
    name = {"Turing_NLG": f"Turing_NLG_{comm.upper()}"}.get(workload, f"{workload}_{comm}")
    return DesignProblem(dimensions={"file": f"{DATA}/network/{net}_network.yml"},
                         workloads=[{"workload": f"{DATA}/workload/{workload}.txt",
                                     "communicator": f"{DATA}/communicator/{name}.yml"}],
                         cost_model={"file": f"{DATA}/cost_model/{net}_cost_model.yml"},
                         constraints={"total_bandwidth": total, **constraints} if total else constraints,
                         objective=objective)


def solve(problem, **params):
    return call.synthesize(Libra(), problem, time_limit=60, seed=0, **params)


def single_ar_problem(tmp_path, prices=(4.0, 4.0, 7.8), total=1000):
    trace = tmp_path / "ar.txt"
    trace.write_text("layer -1 0 NONE 0 0 NONE 0 0 ALLREDUCE 1000000000 0\n")
    comm = tmp_path / "comm.yml"
    comm.write_text("Forward: [-1, -1, -1]\nInputGrad: [-1, -1, -1]\nWeightGrad: [4, 4, 4]\n")
    dims = [{"kind": "ring", "size": 4, "cost_label": "a"} for _ in range(3)]
    return DesignProblem(dimensions=dims, workloads=[{"workload": str(trace), "communicator": str(comm)}],
                         cost_model={"kappa": list(prices)}, constraints={"total_bandwidth": total})


def test_volumes_follow_the_two_dimensional_formulas():
    m, n1, n2 = 6e6, 3, 2
    v = volumes("ALLREDUCE", m, [n1, n2])
    assert v == pytest.approx([2 * m * (n1 - 1) / n1, 2 * m * (n2 - 1) / (n1 * n2)])
    assert volumes("ALLTOALL", m, [n1, n2]) == pytest.approx([m * (n1 - 1) / n1, m * (n2 - 1) / n2])


def test_single_collective_closed_form(tmp_path):
    result = solve(single_ar_problem(tmp_path))
    assert result.stats["bandwidth_gbps"] == pytest.approx([1000 * 16 / 21, 1000 * 4 / 21, 1000 / 21], rel=1e-6)
    v = np.array(volumes("ALLREDUCE", 1e9, [4, 4, 4]))
    assert result.time * 1e9 == pytest.approx(v.sum() / 1000, rel=1e-6)  # T* = sum V / B_tot (ns)


def test_cost_ratio_of_the_tacos_codesign_case(tmp_path):
    result = solve(single_ar_problem(tmp_path))
    assert result.stats["equal_bw_cost"] / result.cost == pytest.approx(1.2597, abs=1e-4)


@pytest.mark.parametrize("workload, net, fractions", [
    ("GPT_3", "4d", [0.6769, 0.1692, 0.1163, 0.0376]), ("GPT_3", "3d", [0.7951, 0.1800, 0.0249]),
    ("MSFT_1T", "3d", [0.8044, 0.0469, 0.1487]), ("Turing_NLG", "4d", [0.7502, 0.2188, 0.0234, 0.0076]),
])
def test_perfopt_split_is_budget_independent(workload, net, fractions):
    a = solve(repo_problem(workload, net, 100)).stats["split"]
    b = solve(repo_problem(workload, net, 1000)).stats["split"]
    assert a == pytest.approx(b, rel=1e-5, abs=1e-6)
    assert a == pytest.approx(fractions, abs=2e-4)


ORACLES = [  # spec 3.4: (workload, budget, objective, T ns, cost $)
    ("GPT_3", 1000, "perf", 703_430_001, 19_049_899), ("GPT_3", 1000, "perf-per-cost", 775_667_445, 9_283_828),
    ("GPT_3", 100, "perf", 874_265_841, 1_905_405), ("GPT_3", 100, "perf-per-cost", 977_339_294, 1_159_271),
    ("MSFT_1T", 1000, "perf", 189_840_689, 43_666_541), ("MSFT_1T", 1000, "perf-per-cost", 239_881_870, 11_559_874),
    ("MSFT_1T", 100, "perf", 368_450_884, 4_362_945), ("MSFT_1T", 100, "perf-per-cost", 495_670_731, 1_572_976),
]


@pytest.mark.parametrize("workload, budget, objective, time_ns, cost", ORACLES)
def test_oracle_table(workload, budget, objective, time_ns, cost):
    result = solve(repo_problem(workload, "4d", budget, objective))
    if objective == "perf":
        assert result.status == "optimal"
        assert result.time * 1e9 == pytest.approx(time_ns, rel=1e-4)
    else:  # optima can tie: compare the objective T * C
        assert result.time * 1e9 * result.cost == pytest.approx(time_ns * cost, rel=1e-5)


def test_equal_bw_baseline():
    result = solve(repo_problem("GPT_3", "4d", 1000))
    assert result.stats["equal_bw_time_ns"] == pytest.approx(729_746_725, rel=1e-6)
    assert result.stats["equal_bw_cost"] == pytest.approx(69_017_784, rel=1e-6)


@pytest.mark.parametrize("workload, net", [("GPT_3", "4d"), ("MSFT_1T", "4d"), ("GPT_3", "3d"), ("MSFT_1T", "3d")])
def test_backends_agree(workload, net):
    highs = solve(repo_problem(workload, net, 1000))
    scipy = solve(repo_problem(workload, net, 1000), backend="scipy")
    assert highs.time == pytest.approx(scipy.time, rel=1e-6)


def test_iso_cost_bandwidth_ratio():
    problem = repo_problem("GPT_3", "4d", None, cost_cap=15e6)
    problem.cost_model = {"kappa": [2.0, 4.0, 4.0, 57.4]}
    result = solve(problem)
    libra_total = sum(result.stats["bandwidth_gbps"])
    equal_total = sum(result.stats["equal_bw_gbps"])
    assert libra_total / equal_total == pytest.approx(5.05, abs=0.01)
    assert result.stats["bandwidth_gbps"] == pytest.approx([822.2, 205.6, 53.1, 17.1], rel=2e-3)


def test_malformed_inputs_name_file_and_line(tmp_path):
    bad = tmp_path / "w.txt"
    bad.write_text("a -1 1 NONE 0 1 NONE 0 1 NONE 0 1\nb -1 1 NONE 0 1 ALLSUM 5 1 NONE 0 1\n")
    with pytest.raises(DesignInputError, match=r"w.txt: line 2: InputGrad collective 'ALLSUM'"):
        load_workload(bad)
    bad.write_text("a -1 1 NONE 0 1 NONE 0 1 NONE 0\n")
    with pytest.raises(DesignInputError, match=r"w.txt: line 1: expected 12 fields"):
        load_workload(bad)
    net = tmp_path / "n.yml"
    net.write_text("Topology: [Ring, Torus]\nNpusCount: [4, 4]\nCostDimension: [A, B]\n")
    with pytest.raises(DesignInputError, match=r"n.yml: Topology\[1\]"):
        load_network(net)


def test_cli(capsys):
    code = main(["libra", "--network", f"{DATA}/network/4d_network.yml", "--workload", f"{DATA}/workload/GPT_3.txt",
                 "--communicator", f"{DATA}/communicator/GPT_3_4d.yml", "--cost",
                 f"{DATA}/cost_model/4d_cost_model.yml", "--budget", "1000GB/s", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and len(data["bandwidth"]) == 4 and data["status"] == "optimal"
    assert data["time"] == pytest.approx(0.703430001, rel=1e-4)
    code = main(["libra", "--network", "missing.yml", "--workload", "x", "--communicator", "y", "--cost", "z",
                 "--budget", "1000GB/s"])
    assert code == 2 and "missing.yml: no such file" in capsys.readouterr().err


class OtherDesign:
    """A design formulation that names no statistics of its own."""

    name = "other-design"
    kind = "design"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        raise NotImplementedError


_LIBRA_METRICS = ["status", "bandwidth", "time", "cost", "speedup", "perf_per_cost_gain", "bandwidth_vs_equal",
                  "synthesis_seconds"]


@pytest.mark.parametrize("formulation, metrics, expected", [
    ("libra", None, _LIBRA_METRICS),  # no metrics given: the common ones and the formulation's own
    ("libra", ["speedup", "bandwidth_vs_equal"], ["speedup", "bandwidth_vs_equal"]),
])
def test_a_design_table_shows_what_its_formulation_names(formulation, metrics, expected):
    from workbench.config.experiment import parse_experiment

    data = {"name": "d", "grid": {"designs": [{"name": "x", "formulation": formulation, "problem": {}}]},
            "table": {"rows": "design", **({"metrics": metrics} if metrics else {})}}
    assert parse_experiment(data).table["metrics"] == expected


@pytest.mark.parametrize("formulation, metrics, error", [
    ("libra", ["gain"], r"table.metrics\[0\]: expected one of status, bandwidth, time, cost, speedup, "
                        r"perf_per_cost_gain, bandwidth_vs_equal, synthesis_seconds, got 'gain'"),
    (f"{__name__}:OtherDesign", ["speedup"], r"table.metrics\[0\]: expected one of status, bandwidth, time, cost, "
                                             r"synthesis_seconds, got 'speedup'"),
])
def test_a_design_table_refuses_what_its_formulation_does_not_name(formulation, metrics, error, request):
    from workbench.config.experiment import ConfigError, parse_experiment
    from workbench.plugin.registry import unregister

    request.addfinalizer(lambda: unregister(f"{__name__}:OtherDesign"))
    data = {"name": "d", "grid": {"designs": [{"name": "x", "formulation": formulation, "problem": {}}]},
            "table": {"rows": "design", "metrics": metrics}}
    with pytest.raises(ConfigError, match=error):
        parse_experiment(data)
