"""The panel's charts, drawn with matplotlib's Agg canvas into PNG bytes for an Image widget.

No pyplot: figures are built directly, so nothing touches the notebook's
backend or pyplot's global figure list, and drawing from a training thread is
safe. matplotlib loads when the first chart is drawn.
"""

from __future__ import annotations

import io
import math
from typing import Dict, List, Optional, Sequence, Tuple

DPI = 72
SHARP = 2  # static charts are drawn at SHARP x DPI and shown at their size in points: crisp on HiDPI screens
_BLUE, _ORANGE = "#1f77b4", "#ff7f0e"


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI * SHARP)
    return buffer.getvalue()


def css_width(png: bytes, scale: int = SHARP) -> str:
    """The width to show `png` at (its pixels / `scale`), so a flex box never stretches it past its drawn size."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        return ""
    return f"{int.from_bytes(png[16:20], 'big') // scale}px"


class LiveCurves:
    """Loss and accuracy against the training step, redrawn in place, cheaply.

    The figure, axes and lines are made once. The axes' limits change rarely
    (x spans the whole run; y is rounded up), so most redraws restore the
    saved background and draw only the lines (blitting), then encode the
    pixels with fast PNG compression: a few milliseconds instead of the
    ~100 ms a full draw of the figure costs.
    """

    def __init__(self, width: float = 11.5, height: float = 2.6):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        # As wide as a notebook's output (11.5 in at 72 dpi: 828 px; JupyterLab's is ~846 px at 1280x800), drawn
        # at SHARP x the pixels like the static charts; the redraw throttle keeps its cost within the budget.
        self.fig = Figure(figsize=(width, height), dpi=DPI * SHARP)
        FigureCanvasAgg(self.fig)
        self.fig.subplots_adjust(left=0.05, right=0.985, bottom=0.19, top=0.88, wspace=0.12)
        self.loss_ax, self.acc_ax = self.fig.subplots(1, 2)
        self.lines = {}
        for ax, key in ((self.loss_ax, "loss"), (self.acc_ax, "accuracy")):
            ax.set_title(key, fontsize=10)
            ax.set_xlabel("step", fontsize=9)
            ax.tick_params(labelsize=8)
            ax.grid(alpha=0.3)
            (self.lines[key],) = ax.plot([], [], color=_BLUE, lw=1.2, label="train", animated=True)
            (self.lines["val_" + key],) = ax.plot(
                [], [], "o-", color=_ORANGE, ms=4, lw=1, label="validation", animated=True, clip_on=False
            )  # the last epoch's dot: whole
            (self.lines["mean_" + key],) = ax.plot(
                [],
                [],
                "o",
                mfc="white",
                mec=_BLUE,
                ms=5,
                mew=1.2,
                label="train, epoch mean",
                animated=True,
                clip_on=False,
            )
        self.acc_ax.set_ylim(0, 1.02)
        self._none_note = self.acc_ax.text(
            0.5, 0.5, "", ha="center", va="center", fontsize=9, color="#666", transform=self.acc_ax.transAxes
        )
        self._snug = None  # a language model's (loss axis, perplexity axis), fitted to the curves
        self._perplexity = False
        self._title = "accuracy"
        self._limits = (0, 0.0)
        self._background = None
        self._means = None  # whether the legend names the epoch means (only where some are drawn)

    def prepare(self, total_steps: int, loss_top: float = 1.0, chart: str = "accuracy") -> bytes:
        """Start a run: empty curves on axes sized for it (the one full draw, before training starts). `chart`: the
        right chart's figure (`ModelSource.chart`): "perplexity" for a language model's run, exp(loss), both axes
        fitted to the curves; else the metric its accuracy line shows ("accuracy", "reward_accuracy")."""
        self._limits = (max(1, total_steps), _nice_ceiling(loss_top))
        self._snug, self._perplexity = None, chart == "perplexity"
        self._title = chart.replace("_", " ")
        self._background = None  # a new run's axes: without this, a second run drew on the first run's x range
        return self.render([], [])

    def render(
        self,
        points: Sequence[Tuple[int, Optional[float], Optional[float]]],
        epochs: Sequence[Tuple[int, Dict[str, float]]] = (),
    ) -> bytes:
        """PNG of the curves; the axes only grow, and only then is the whole figure drawn.

        Args:
            points: (global step, loss, accuracy) samples of training.
            epochs: (global step at the epoch's end, its logs) with val_loss / val_accuracy, and loss / accuracy
                (the epoch's mean) for a kept epoch whose steps `points` does not have (see `series`).
        """
        data = series(points, epochs)
        # A language model: its right chart is perplexity, exp(loss), not an empty accuracy chart, and both charts fit
        # the curves (a loss of 5.6 falling by 0.05 is a flat line on axes from 0).
        snug = self._perplexity and bool(data["loss"][0])
        if snug:
            from tpukit.models.modeling import perplexity

            for key in ("accuracy", "val_accuracy", "mean_accuracy"):
                xs, ys = data[key.replace("accuracy", "loss")]
                data[key] = (xs, [perplexity(y) for y in ys])
        for name, (xs, ys) in data.items():
            self.lines[name].set_data(xs, ys)
        losses = [*data["loss"][1], *data["val_loss"][1], *data["mean_loss"][1]]
        top = max([*losses, 0.0])
        means = bool(data["mean_loss"][0] or data["mean_accuracy"][0])
        last = max([p[0] for p in points] + [s for s, _ in epochs] + [1])
        x_max, y_max = self._limits
        limits = (max(x_max, last), y_max if top <= y_max else _nice_ceiling(top))
        # Another model compiled without accuracy (the user's regression): say so, not an empty chart.
        accuracy = any(data[k][0] for k in ("accuracy", "val_accuracy", "mean_accuracy"))
        none = "no accuracy: the model measures none" if data["loss"][0] and not snug and not accuracy else ""
        if snug:
            left = _around(losses, self._snug[0] if self._snug else None)
            perplexities = [*data["accuracy"][1], *data["val_accuracy"][1], *data["mean_accuracy"][1]]
            right = _around(perplexities, self._snug[1] if self._snug else None)
            snugged = (left, right)
        else:
            snugged = None
        redraw = limits != self._limits or self._background is None or means != self._means
        if redraw or snugged != self._snug or none != self._none_note.get_text():
            self._none_note.set_text(none)
            self._limits, self._means, self._snug = limits, means, snugged
            self.acc_ax.set_title("perplexity" if snug else self._title, fontsize=10)
            shown = ["accuracy", "val_accuracy"] + (["mean_accuracy"] if means else [])
            self.acc_ax.legend(
                [self.lines[k] for k in shown],
                [self.lines[k].get_label() for k in shown],
                fontsize=8,
                loc="upper right" if snug else "lower right",
            ).set_visible(not none)
            for ax in (self.loss_ax, self.acc_ax):
                ax.set_xlim(0, limits[0])
            self.loss_ax.set_ylim(*(snugged[0] if snug else (0, limits[1])))
            self.acc_ax.set_ylim(*(snugged[1] if snug else (0, 1.02)))
            self.fig.canvas.draw()
            self._background = self.fig.canvas.copy_from_bbox(self.fig.bbox)
        else:
            self.fig.canvas.restore_region(self._background)
        for key, line in self.lines.items():
            (self.acc_ax if key.endswith("accuracy") else self.loss_ax).draw_artist(line)
        return _fast_png(self.fig)


def series(
    points: Sequence[Tuple[int, Optional[float], Optional[float]]], epochs: Sequence[Tuple[int, Dict[str, float]]] = ()
) -> Dict[str, Tuple[List[int], List[float]]]:
    """The curves' (steps, values), by line: "loss"/"accuracy" (the train line: one point per drawn step),
    "val_loss"/"val_accuracy" (validation, at epoch ends), "mean_loss"/"mean_accuracy" (an epoch's mean train
    figure, at its end: only for a kept epoch whose steps the curve does not have; never joined to the line)."""
    out = {}
    for key, column in (("loss", 1), ("accuracy", 2)):
        out[key] = (
            [p[0] for p in points if p[column] is not None],
            [p[column] for p in points if p[column] is not None],
        )
        for prefix, name in (("val_", "val_" + key), ("", "mean_" + key)):
            kept = [(step, logs[prefix + key]) for step, logs in epochs if logs.get(prefix + key) is not None]
            out[name] = ([v[0] for v in kept], [v[1] for v in kept])
    return out


def _around(values: Sequence[float], shown: Optional[Tuple[float, float]] = None) -> Tuple[float, float]:
    """Y limits that fit `values` with a margin, rounded outward to a step of their spread, and never narrower than
    `shown` (the axes only grow, so most redraws blit): a language model's loss of 5.60 to 5.55 gets about 5.5-5.7."""
    finite = [v for v in values if math.isfinite(v)] or [0.0]
    low, high = min(finite), max(finite)
    span = max(high - low, 0.02 * abs(high), 1e-6)
    step = 10 ** math.floor(math.log10(span / 2))
    limits = (math.floor((low - span / 2) / step) * step, math.ceil((high + span / 2) / step) * step)
    if shown is not None:
        limits = (min(limits[0], shown[0]), max(limits[1], shown[1]))
    return limits


def _nice_ceiling(value: float) -> float:
    """The next round number (1, 1.5, 2, 2.5, 3, 4, 5, 7.5 x 10^k) at or above `value`."""
    if not value > 0 or not math.isfinite(value):
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10):
        if step * 10**exponent >= value:
            return float(step * 10**exponent)
    return float(10 ** (exponent + 1))


def _fast_png(fig) -> bytes:
    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).save(buffer, format="png", compress_level=1)
    return buffer.getvalue()


def runs_chart(rows: List[dict]) -> bytes:
    """Bars comparing runs: examples/sec and the final validation figure (accuracy, else the runs' own metric),
    labelled by precision and batch.

    Args:
        rows: `tpukit.runs.records.compare(...)` rows.
    """
    fig = _figure(8.0, 0.9 + 0.32 * max(len(rows), 1))
    speed_ax, acc_ax = fig.subplots(1, 2, sharey=True)
    labels = [_run_label(i, row) for i, row in enumerate(rows)]
    ys = list(range(len(rows)))
    speed = [row.get("examples_per_sec") or 0.0 for row in rows]
    from tpukit.ui import tables

    keys = [tables.validation_key(row) for row in rows]
    key = "val_accuracy" if "val_accuracy" in keys else next((k for k in keys if k), None)
    accuracy = [row.get(key) or 0.0 for row in rows] if key else [0.0] * len(rows)
    speed_ax.barh(ys, speed, color=_BLUE)
    acc_ax.barh(ys, accuracy, color=_ORANGE)
    speed_ax.set_yticks(ys, labels, fontsize=8)
    speed_ax.invert_yaxis()
    speed_ax.set_title("examples / sec", fontsize=10)
    acc_ax.set_title(f"final {(key or 'validation').replace('_', ' ')}", fontsize=10)
    if key == "val_accuracy":
        acc_ax.set_xlim(0, 1)
    for ax in (speed_ax, acc_ax):
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def tuning_chart(result) -> bytes:
    """Examples/sec against the per-replica batch size, the recommended size marked (a `BatchTuning`)."""
    measured = [t for t in result.trials if t.examples_per_sec]
    fig = _figure(6.0, 2.2)
    ax = fig.subplots()
    xs = [t.batch_size for t in measured]
    ax.plot(xs, [t.examples_per_sec for t in measured], "o-", color=_BLUE)
    best = next((t for t in measured if t.batch_size == result.recommended), None)
    if best is not None:
        ax.plot([best.batch_size], [best.examples_per_sec], "o", color=_ORANGE, markersize=10)
        ax.annotate(
            f"recommended: {best.batch_size}",
            (best.batch_size, best.examples_per_sec),
            fontsize=8,
            color="#a04000",
            xytext=(0, 9),
            textcoords="offset points",
            ha="center",
            va="bottom",
        )
    for t in result.trials:
        if t.outcome != "measured":
            ax.axvline(t.batch_size, color="#b00020", linestyle="--", linewidth=1)
            ax.annotate(
                t.outcome,
                (t.batch_size, 0),
                fontsize=8,
                color="#b00020",
                rotation=90,
                xytext=(-4, 4),
                textcoords="offset points",
                va="bottom",
                ha="right",
            )
    sizes = [t.batch_size for t in result.trials]
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes) / 1.3, max(sizes) * 1.3)
    ax.set_xticks(sizes, [str(size) for size in sizes])
    ax.set_xlabel("batch size per replica", fontsize=9)
    ax.set_ylabel("examples / sec", fontsize=9)
    ax.set_ylim(0, 1.3 * max((t.examples_per_sec for t in measured), default=1.0))  # room for the label
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def _run_label(i: int, row: dict) -> str:
    """'#2 mlp-digits 10:27:33' from the run directory '20261124-102733-mlp-digits' (as the runs table names it)."""
    parts = str(row.get("run") or "").split("-", 2)
    if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and len(parts[1]) == 6:
        return f"#{i + 1} {parts[2]} {parts[1][:2]}:{parts[1][2:4]}:{parts[1][4:]}"
    return f"#{i + 1} {row.get('run')}"


def profile_chart(summary) -> bytes:
    """Top ops by self time and the profiled steps' times, from a `ProfileSummary`."""
    fig = _figure(8.0, 1.65)  # short: the profile section fits the first screen at 1280x800 (above Lab's status bar)
    ops_ax, steps_ax = fig.subplots(1, 2, width_ratios=(3, 2))
    ops = list(summary.top_ops)[:6]
    ys = list(range(len(ops)))
    ops_ax.barh(ys, [op.self_time_percent for op in ops], color=_BLUE)
    ops_ax.set_yticks(ys, [_short(op.name) for op in ops], fontsize=7)
    ops_ax.invert_yaxis()
    ops_ax.set_title("top ops: % of self time", fontsize=10)
    steps_ax.bar(range(len(summary.steps)), [ms for _, ms in summary.steps], color=_ORANGE)
    steps_ax.set_xticks(range(len(summary.steps)), [name.split()[-1] for name, _ in summary.steps], fontsize=7)
    steps_ax.set_title("step time (ms)", fontsize=10)
    for ax in (ops_ax, steps_ax):
        ax.tick_params(labelsize=8)
    if not summary.steps:
        steps_ax.text(0.5, 0.5, "no step markers", ha="center", va="center", transform=steps_ax.transAxes)
    return _png(fig)


def _short(name: str, width: int = 36) -> str:
    """A long op name cut in its middle: the profile names an op by its layer, then what it does
    ('batch_normalization Cast (grad)'), and both ends tell ops apart ('batch_normal… Cast (grad)')."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 2 + 2
    return name[: width - 1 - tail] + "…" + name[-tail:]
