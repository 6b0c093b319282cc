"""How straight each face walks its argument down (`benchmarks/walks.py`): the figures docs/decisions.md records
("How straight the settings walk"), kept. A layer that asks back up for the CLI's arguments, the resumed run's
directory, the panel's config or the tuned config, or re-checks it, adds a climb or a return and fails here.

The walks are real: tiny runs of the mlp on digits, one epoch each, through the CLI's main, resume(), the panel's
train action and tune_batch_size(); only the order of the calls is counted, never a time.
"""

import importlib.util

import pytest

from conftest import REPO

# face: (most climbs, most returns); issue 56's targets.
LIMITS = {"cli": (1, 3), "resume": (1, 3), "panel": (1, 3), "tune_batch_size": (3, 6)}


@pytest.fixture(scope="module")
def walks():
    spec = importlib.util.spec_from_file_location("walks", REPO / "benchmarks" / "walks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured(walks):
    return walks.measure()


@pytest.mark.parametrize("face", sorted(LIMITS))
def test_each_face_walks_its_argument_down_within_its_limits(measured, face):
    climbs, returns = LIMITS[face]
    found = measured[face]
    assert found["climbs"] <= climbs and found["returns"] <= returns, (face, found)


def test_the_cli_hands_the_engine_a_runconfig_not_its_arguments(measured):
    assert measured["cli"]["walk"] == ["tpukit.cli.main"], measured["cli"]


def test_resume_reads_the_run_directory_before_its_records_and_decides_once(measured):
    walk = measured["resume"]["walk"]
    assert walk[:4] == ["tpukit.training.api", "tpukit.runs.resuming", "tpukit.runs.directory", "tpukit.runs.records"]
    assert walk.count("tpukit.runs.resuming") == 1, walk


def test_the_count_follows_one_value_and_sees_a_walk_come_back(walks):
    """The counter itself: a walk down and back up is counted as such."""
    order = [("tpukit.ui",), ("tpukit.training",), ("tpukit.models",)]
    walk = walks.Walk(("tpukit.ui.x", "entry"))
    walk.modules = ["tpukit.ui.x", "tpukit.training.y", "tpukit.models.z", "tpukit.training.y", "tpukit.models.z"]
    assert {k: v for k, v in walk.counts(order).items() if k != "walk"} == dict(stays=5, modules=3, climbs=1, returns=2)
