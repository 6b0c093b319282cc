"""Profile a window of training steps and read the capture back as a small summary.

`ProfileCallback` starts the TensorFlow profiler for an inclusive window of
global training steps and marks each step with a `Trace(step_num=...)`, so
TensorBoard's profile overview shows step times (Keras' own
`TensorBoard(profile_batch=...)` captures carry no step markers and the
overview says "No step marker observed"). `summarize` turns a capture into a
`ProfileSummary` (step times, input-bound verdict, top ops) using xprof, the
package behind TensorBoard's profile tab, without starting a server.

The package splits along the way a profile goes: `capture` (which steps, the
profiler of each backend, the Keras callback) writes it, `xprof` reads it and
finds it on disk, and `summary` is what reading gives (the model, its text and
the advice). This file only re-exports their public names.

Importing this package does not import TensorFlow or Keras: the callback class
is built on first use of `ProfileCallback`, and xprof is imported by
`summarize`.

Example:

    cb = ProfileCallback("logs", start=10, stop=14)
    try:
        model.fit(x, y, epochs=2, callbacks=[cb])
    finally:
        cb.close()
    print(summarize(cb.files[0]).to_text())
"""

from __future__ import annotations

from typing import Any, List

from tpukit.observe.profiling import capture
from tpukit.observe.profiling.capture import ProfilerBusyWarning
from tpukit.observe.profiling.summary import OpStat, ProfileSummary
from tpukit.observe.profiling.xprof import ProfileError, find_captures, summarize

__all__ = [
    "OpStat",
    "ProfileCallback",
    "ProfileError",
    "ProfileSummary",
    "ProfilerBusyWarning",
    "find_captures",
    "summarize",
]


def __getattr__(name: str) -> Any:
    # ProfileCallback subclasses keras.callbacks.Callback: `capture` builds it
    # on first use, so that importing this package stays free of TensorFlow.
    if name == "ProfileCallback":
        cls = capture.ProfileCallback
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | {"ProfileCallback"})
