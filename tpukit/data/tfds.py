"""`tfds:NAME` datasets through tensorflow-datasets (Colab ships it), checked for the network before a download."""

from __future__ import annotations

import importlib
import os
import traceback

from tpukit.data.builtin import DatasetUnavailable, reachable
from tpukit.data.types import DataError, Splits
from tpukit.errors import one_line


def load(name: str):
    """`tfds:NAME` through tensorflow-datasets (Colab ships it): train and test splits as arrays."""
    try:
        import tensorflow_datasets as tfds
    except ImportError as e:
        if (getattr(e, "name", "") or "").split(".")[0] != "tensorflow_datasets":
            raise DataError(_broken(name, e)) from None
        raise DataError(
            f"dataset 'tfds:{name}' needs tensorflow-datasets: pip install tensorflow-datasets. "
            f"Received: dataset='tfds:{name}'."
        ) from None
    if not hasattr(tfds, "builder"):
        # tensorflow_datasets/__init__.py logs its own import failure and goes on without its API: import the part
        # that failed again, for the error itself.
        try:
            importlib.import_module("tensorflow_datasets.core")
            import tensorflow_datasets.public_api  # noqa: F401
        except Exception as e:
            raise DataError(_broken(name, e)) from None
        raise DataError(
            f"dataset 'tfds:{name}': tensorflow-datasets {_version('tensorflow-datasets')} did not "
            f"import completely here (see the error it logged above). Received: dataset='tfds:{name}'."
        )
    try:
        builder = tfds.builder(name)
    except Exception as e:
        raise DataError(f"dataset 'tfds:{name}': {one_line(e)}") from None
    prepared = os.path.exists(os.path.join(builder.data_dir, "dataset_info.json"))
    if not prepared and not reachable("storage.googleapis.com"):
        raise DatasetUnavailable(
            f"Dataset 'tfds:{name}' is not in the tensorflow-datasets cache ({builder.data_dir}) and "
            "storage.googleapis.com cannot be reached (offline?). Use an offline dataset instead: "
            f"mnist5k, digits, shapes. Received: dataset='tfds:{name}'."
        )
    splits = list(builder.info.splits.keys()) if prepared else ["train", "test"]
    test_split = "test" if "test" in splits else None
    wanted = ["train"] + ([test_split] if test_split else [])
    loaded = tfds.load(name, split=wanted, as_supervised=True, batch_size=-1)
    arrays = [tuple(tfds.as_numpy(part)) for part in loaded]
    return Splits(train=arrays[0], test=arrays[1] if test_split else None)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "(not installed)"


def _broken(name: str, error: BaseException) -> str:
    """One line for a tensorflow-datasets that fails at import: the package whose code failed, with its version,
    the error's own message, and what to do."""
    from importlib.metadata import packages_distributions

    culprit = ""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        parts = frame.filename.replace(os.sep, "/").split("/site-packages/")
        if len(parts) > 1:
            top = parts[-1].split("/")[0]
            if top not in ("google", "importlib") and not top.startswith("_"):
                culprit = top
                break
    dists = packages_distributions().get(culprit, []) if culprit else []
    where = f"{dists[0]} {_version(dists[0])}" if dists else culprit or "one of its dependencies"
    advice = "install releases of the two that fit each other, or use an offline dataset: mnist5k, digits, shapes"
    if "protobuf" in str(error).lower():
        advice = (
            f"{where} needs another protobuf than the {_version('protobuf')} installed here: install a release "
            "of it generated for this protobuf, or use an offline dataset: mnist5k, digits, shapes"
        )
    return (
        f"dataset 'tfds:{name}': tensorflow-datasets {_version('tensorflow-datasets')} cannot be imported here, "
        f"{where} fails: {one_line(error, 240)}; {advice}. Received: dataset='tfds:{name}'."
    )
