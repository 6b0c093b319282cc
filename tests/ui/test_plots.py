"""The panel's charts (`tpukit.ui.plots`)."""

from tpukit.ui import plots


def test_the_profile_charts_labels_keep_both_ends_of_a_long_op_name():
    """Profile names read "layer, then what it does": cut from one end, two ops of one layer (or two layers' same
    op) read alike."""
    names = [
        "batch_normalization_1 all-reduce (grad)",
        "batch_normalization_1 Cast (grad)",
        "batch_normalization_2 all-reduce (grad)",
        "conv2d_1 conv (weight grad)",
    ]
    labels = [plots._short(n) for n in names]
    assert len(set(labels)) == len(names) and all(len(label) <= 36 for label in labels)
    assert labels[0].startswith("batch_normalizat") and labels[0].endswith("all-reduce (grad)")
    assert labels[3] == names[3]  # short names stay whole


def test_the_live_accuracy_chart_says_so_when_the_model_measures_no_accuracy():
    from tpukit.ui.plots import LiveCurves

    curves = LiveCurves()
    curves.prepare(8, 6.0)
    assert curves._none_note.get_text() == ""  # nothing drawn yet: nothing to say
    curves.render([(4, 5.57, None), (8, 5.56, None)])
    assert curves._none_note.get_text() == "no accuracy: the model measures none"
    assert not curves.acc_ax.get_legend().get_visible()
    curves.prepare(8, 2.0)
    curves.render([(4, 1.2, 0.6)])
    assert curves._none_note.get_text() == "" and curves.acc_ax.get_legend().get_visible()
