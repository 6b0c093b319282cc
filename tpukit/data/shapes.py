"""The `shapes` dataset, generated: circles, squares, triangles and crosses on noise, any size, no download.

Seeded: the same (size, seed) gives the same images on every machine, so runs on `shapes` are reproducible.
"""

from __future__ import annotations

from tpukit.data.types import frozen

SHAPE_CLASSES = ("circle", "square", "triangle", "cross")
_SIDE = 32
_CHUNK = 2048  # images rendered at once: bounds memory at a few tens of MB


def make_shapes(num_train: int, num_test: int, *, seed: int = 0):
    """Generate the `shapes` set: one coloured shape per 32x32x3 image on a noisy background.

    A pure function of its arguments. Each split has its own random stream, so
    the test set depends only on (seed, num_test).

    Returns:
        (x_train, y_train, x_test, y_test): uint8 NHWC images, int32 labels
        indexing `SHAPE_CLASSES`.
    """
    import numpy as np

    train_rng, test_rng = (np.random.default_rng([seed, split]) for split in (0, 1))
    return (*_render_shapes(num_train, train_rng), *_render_shapes(num_test, test_rng))


def _render_shapes(n: int, rng):
    import numpy as np

    labels = rng.integers(0, len(SHAPE_CLASSES), n).astype(np.int32)
    radius = rng.uniform(5.0, 11.0, n)
    centre = rng.uniform(radius[:, None] + 1, _SIDE - 1 - radius[:, None], (n, 2))
    # Any hue, but the shape is always the brighter one in every channel, so the task is the outline.
    fg = rng.integers(130, 256, (n, 1, 1, 3)).astype(np.int16)
    bg = rng.integers(0, 110, (n, 1, 1, 3)).astype(np.int16)
    images = np.empty((n, _SIDE, _SIDE, 3), np.uint8)
    for start in range(0, n, _CHUNK):
        part = slice(start, min(start + _CHUNK, n))
        mask = _shape_masks(labels[part], centre[part], radius[part])[..., None]
        pixels = np.where(mask, fg[part], bg[part])
        pixels += _noise(rng, pixels.shape)
        images[part] = np.clip(pixels, 0, 255)
    return frozen(images, labels)


def _noise(rng, shape):
    """Uniform integer pixel noise in [-32, 31], from raw random bytes (several times faster than normals)."""
    import numpy as np

    raw = np.frombuffer(rng.bytes(int(np.prod(shape))), np.uint8).reshape(shape)
    return (raw >> 2).astype(np.int16) - 32


def _shape_masks(labels, centre, radius):
    """Boolean (n, 32, 32) masks: which pixels belong to each image's shape."""
    import numpy as np

    grid = np.arange(_SIDE, dtype=np.float32) + 0.5
    dy = grid[None, :, None] - centre[:, 1, None, None].astype(np.float32)
    dx = grid[None, None, :] - centre[:, 0, None, None].astype(np.float32)
    r = radius[:, None, None].astype(np.float32)
    ax, ay = np.abs(dx), np.abs(dy)
    masks = (
        dx * dx + dy * dy <= r * r,  # circle
        np.maximum(ax, ay) <= 0.8 * r,  # square
        (ay <= r) & (ax <= (dy + r) * 0.5),  # triangle, apex up
        ((ax <= r / 3) & (ay <= r)) | ((ay <= r / 3) & (ax <= r)),  # cross
    )
    return np.select([labels[:, None, None] == k for k in range(len(masks))], masks)
