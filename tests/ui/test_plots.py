"""The panel's charts (`tpukit.ui.plots`)."""

from tpukit.ui import plots


def test_the_profile_charts_labels_keep_both_ends_of_a_long_op_name():
    """Profile names read "layer, then what it does": cut from one end, two ops of one layer (or two layers' same
    op) read alike."""
    names = ["batch_normalization_1 all-reduce (grad)", "batch_normalization_1 Cast (grad)",
             "batch_normalization_2 all-reduce (grad)", "conv2d_1 conv (weight grad)"]
    labels = [plots._short(n) for n in names]
    assert len(set(labels)) == len(names) and all(len(label) <= 36 for label in labels)
    assert labels[0].startswith("batch_normalizat") and labels[0].endswith("all-reduce (grad)")
    assert labels[3] == names[3]  # short names stay whole
