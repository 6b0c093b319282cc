"""The run's shape decided before it starts: here, the panel's default profile window."""

from tpukit.training import plan


def test_the_default_profile_window_leaves_out_the_compile_step():
    assert plan.default_window(100, 3) == (10, 14)
    assert plan.default_window(8, 1) == (2, 6)
    assert plan.default_window(None, 3) == (2, 3)  # steps not known before the run (text): after step 0 anyway
    assert all(plan.default_window(steps, 5)[0] >= 1 for steps in range(1, 50))  # any run of 5 steps or more
