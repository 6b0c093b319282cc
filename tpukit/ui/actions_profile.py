"""The Profile and TensorBoard sections' actions: profile the next run, show a capture's summary, show
TensorBoard inline.

It exists to keep these buttons out of the controller's core (config, jobs, training): `ProfileActions` is mixed
into `tpukit.ui.controller.Controller` and uses its state: `_runs`, `_config`, `view`, `context`, `_say`,
`explain`, `_replicas`, `inputs_for` and `_auto_tensorboard`. Each method calls the engine
(`tpukit.observe.profiling`, `tpukit.observe.tensorboard`).
"""

from __future__ import annotations

import os
from typing import Optional, Tuple


class ProfileActions:
    """The Profile and TensorBoard buttons, as Controller methods; the controller's `__init__` sets
    `_profile_summary`, `_tensorboard`, `_tensorboard_lock` and `_launched`."""

    def capture_profile(self, window: Optional[Tuple[int, int]] = None) -> Tuple[int, int]:
        """Profile the next run: sets the config's profile window (default: a few steps after warm-up) for one
        Train; the run after it profiles nothing again (a window typed in the form stays, as any setting).

        After the run, the summary shows inline (`show_profile`) and TensorBoard
        opens on its profile tab. Returns the window.
        """
        window = tuple(window) if window is not None else (self._config.profile or self._default_window())
        self.config = self._config.replace(profile=window)
        self._profile_once = window
        self._say(f"The next run profiles steps {window[0]}–{window[1]}: press Train.")
        return window

    def show_profile(self, run=None):
        """Summarize a run's profile capture (default: the latest run that has one); returns the summary."""
        from tpukit.observe import profiling

        run = run or next((r for r in reversed(self._runs) if r.profile_files), None)
        if run is None:
            self.view.profile(text="No profile capture yet: press 'Profile next run', then Train.")
            return None
        try:
            summary = profiling.summarize(run.profile_files[0])
        except Exception as e:  # missing xprof, an unreadable capture
            self.view.profile(text=self.explain(e, "show_profile"), kind="error")
            return None
        self._profile_summary = summary
        self.view.profile(summary)
        return summary

    def show_tensorboard(self, profile: Optional[bool] = None) -> Optional[str]:
        """Show TensorBoard for the runs' logdir inline; returns the URL shown, or None (the view says why).

        TensorBoard listens on 127.0.0.1 (reused if one already serves the
        logdir). `profile`: open the profile tab (None: when the latest run has
        a capture under this logdir).
        """
        logdir = os.path.abspath(self._config.logdir)
        self.view.tensorboard(text=f"Starting TensorBoard for {logdir}…")
        try:
            # One start at a time: a profiled run's job opens TensorBoard while a person may open its section;
            # both started a server for the logdir (seen in the browser test). The second now reuses the first.
            with self._tensorboard_lock:
                return self._show_tensorboard(logdir, profile)
        except Exception as e:
            line = self.explain(e, "show_tensorboard")
            self.view.tensorboard(text=line, kind="error")
            self._say(line, "error")
            return None

    def _show_tensorboard(self, logdir: str, profile: Optional[bool]) -> Optional[str]:
        import atexit

        from tpukit.observe import tensorboard as tb
        from tpukit.ui import embed

        result = tb.start(logdir)
        if isinstance(result, tb.Failed):
            self.view.tensorboard(text=result.message, kind="error")
            return None
        if isinstance(result, tb.Launched):
            self._launched.append(result)
            # Stopped with the kernel: at a normal exit (Jupyter's restart or shut down) as at close(). A
            # killed kernel runs nothing; the next panel on the logdir reuses the server it left.
            atexit.register(tb.stop, result)
        self._tensorboard = result
        capture = self._latest_capture(logdir) if profile is not False else None
        url = tb.profile_url(result, run=capture) if capture else (tb.profile_url(result) if profile else result.url)
        self.view.tensorboard(embed.tensorboard(url, self.context, height=embed.HEIGHT))
        return url

    @property
    def tensorboard_started(self) -> bool:
        """Whether TensorBoard was shown (it starts when its section first opens)."""
        return self._tensorboard is not None

    @property
    def profile_summary(self):
        """The latest ProfileSummary shown, or None."""
        return self._profile_summary

    def _after_profiled_run(self, result) -> None:
        """The summary inline, and TensorBoard on the profile tab; a failure here never loses the run."""
        try:
            self.show_profile(result)
            self.view.show_section("Profile")
            if self._auto_tensorboard:
                self.show_tensorboard(profile=True)
        except Exception as e:
            self._say(
                f"{result.status}, but the profile could not be shown: {self.explain(e, 'show_profile')}", "error"
            )

    def _default_window(self) -> Tuple[int, int]:
        """A few steps after warm-up that fit in the run: 10-14 when the run is long enough."""
        from tpukit.training import plan as plans

        config = self._config
        inputs = self.inputs_for(config)
        plan = plans.make(config, self._replicas(config), inputs.get("data"), inputs.get("validation_data"))
        return plans.default_window(plan.steps_per_epoch, config.epochs)

    def _latest_capture(self, logdir: str) -> Optional[str]:
        """The newest capture of this kernel's runs under `logdir` (TensorBoard's profile tab opens on it)."""
        for run in reversed(self._runs):
            for path in run.profile_files:
                if os.path.abspath(path).startswith(logdir + os.sep):
                    return path
        return None
