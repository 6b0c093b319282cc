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


def test_a_language_model_gets_perplexity_and_axes_that_fit_its_curves():
    """A language model's next-token loss (5.6 falling by a few hundredths) was a flat line on axes from 0, beside an
    empty accuracy chart. A regression model (no accuracy, no perplexity either) keeps the plain axes."""
    import math

    from tpukit.ui.plots import LiveCurves

    curves = LiveCurves()
    curves.prepare(8, 6.0, chart="perplexity")
    curves.render([(4, 5.60, None), (8, 5.55, None)], [(4, {"val_loss": 5.58}), (8, {"val_loss": 5.54})])
    assert curves.acc_ax.get_title() == "perplexity" and curves.acc_ax.get_legend().get_visible()
    low, high = curves.loss_ax.get_ylim()
    assert 5.0 <= low < 5.54 and 5.60 < high <= 6.0, (low, high)  # the change fills a good part of the axis
    assert list(curves.lines["val_accuracy"].get_ydata()) == [math.exp(5.58), math.exp(5.54)]
    p_low, p_high = curves.acc_ax.get_ylim()
    assert p_low < math.exp(5.54) and math.exp(5.60) < p_high < 2 * math.exp(5.60)
    curves.render([(4, 5.60, None), (8, 5.55, None), (12, 4.0, None)])  # the curve leaves the axis: it grows
    assert curves.loss_ax.get_ylim()[0] < 4.0 and curves.loss_ax.get_ylim()[1] >= high
    assert curves._none_note.get_text() == ""
    for point in ((4, 1.2, 0.6), (4, 1.2, None)):  # a classifier, a regression: accuracy from 0 to 1, loss from 0
        curves.prepare(8, 2.0)
        curves.render([point])
        assert curves.acc_ax.get_title() == "accuracy" and curves.acc_ax.get_ylim() == (0, 1.02)
        assert curves.loss_ax.get_ylim()[0] == 0
    assert curves._none_note.get_text() == "no accuracy: the model measures none"  # the regression: said, not empty
    assert not curves.acc_ax.get_legend().get_visible()
