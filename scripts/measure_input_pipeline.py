"""Measure the host input pipeline of ImageNet training on one CPU core: images per second.

What it times, per image, is what one PyTorch DataLoader worker of NVIDIA's ResNet-50 recipe does
(DeepLearningExamples PyTorch/Classification/ConvNets, `data_backend: pytorch`: torchvision's
ImageFolder loader, RandomResizedCrop(224), RandomHorizontalFlip, then a uint8 array; normalisation
runs on the GPU):
  1. read the JPEG bytes (from memory: the page cache of a warm epoch),
  2. decode with Pillow (libjpeg-turbo) and convert to RGB,
  3. RandomResizedCrop as torchvision draws it (scale 0.08-1, ratio 3/4-4/3, ten tries, centre
     fallback), crop then resize to 224 x 224 with bilinear filtering,
  4. random horizontal flip,
  5. copy to a contiguous uint8 HWC array.
torch and torchvision are not dependencies of this project; the crop rule is re-implemented here
from torchvision's documented behaviour, with the same Pillow calls.

The images: ImageNet's training JPEGs cannot be downloaded here, so the script encodes synthetic
ones that match the statistics that set JPEG decode work (bytes to entropy-decode and pixels to
transform): 500 x 375 pixels (the most common ILSVRC size, longer side 500), quality 96 with no
chroma subsampling (the most common encoding in the training set, per M. Ehrlich's survey
"Compression in the ImageNet Dataset"), and about 110 KB per file (the training tarball,
147,897,477,120 bytes for 1,281,167 images, averages 115 KB). Content is 1/f^alpha noise (the
power spectrum of natural images); alpha is set so that the mean file size is near 110 KB.

Usage:
  python scripts/measure_input_pipeline.py                  # print a YAML record
  python scripts/measure_input_pipeline.py --out data/measurements/input-pipeline-<host>.yaml
"""
from __future__ import annotations

import argparse
import io
import math
import os
import platform
import random
import statistics
import sys
import time

import numpy as np
from PIL import Image, features

WIDTH, HEIGHT = 500, 375
QUALITY = 96
TARGET_BYTES = 110_000
CROP = 224


def natural_image(rng: np.random.Generator, alpha: float) -> np.ndarray:
    """An RGB uint8 image whose amplitude spectrum falls as 1/f^alpha (natural-image statistics)."""
    fy = np.fft.fftfreq(HEIGHT)[:, None]
    fx = np.fft.rfftfreq(WIDTH)[None, :]
    radius = np.sqrt(fx * fx + fy * fy)
    radius[0, 0] = 1.0 / max(WIDTH, HEIGHT)
    channels = []
    base = None
    for _ in range(3):
        phase = rng.uniform(0, 2 * np.pi, radius.shape)
        spectrum = radius ** (-alpha) * np.exp(1j * phase)
        plane = np.fft.irfftn(spectrum, s=(HEIGHT, WIDTH), axes=(0, 1))
        # Colour channels of natural images are strongly correlated: mix with a shared plane.
        base = plane if base is None else base
        mixed = 0.7 * base + 0.3 * plane
        mixed = (mixed - mixed.mean()) / (mixed.std() + 1e-12)
        channels.append(np.clip(128 + 48 * mixed, 0, 255))
    return np.stack(channels, axis=-1).astype(np.uint8)


def encode(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="JPEG", quality=QUALITY, subsampling=0)
    return buffer.getvalue()


def make_dataset(count: int, seed: int) -> tuple[list[bytes], float]:
    """`count` JPEGs with mean size near TARGET_BYTES; returns them and the spectral exponent used."""
    rng = np.random.default_rng(seed)
    low, high = 0.6, 2.2  # larger alpha = smoother = smaller file
    for _ in range(12):
        alpha = (low + high) / 2
        sample = [len(encode(natural_image(rng, alpha))) for _ in range(4)]
        if statistics.mean(sample) > TARGET_BYTES:
            low = alpha
        else:
            high = alpha
    alpha = (low + high) / 2
    return [encode(natural_image(rng, alpha)) for _ in range(count)], alpha


def random_resized_crop_box(width: int, height: int, rand: random.Random) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params: (left, top, right, bottom)."""
    area = width * height
    log_ratio = (math.log(3 / 4), math.log(4 / 3))
    for _ in range(10):
        target_area = area * rand.uniform(0.08, 1.0)
        aspect = math.exp(rand.uniform(*log_ratio))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = rand.randint(0, height - h)
            left = rand.randint(0, width - w)
            return left, top, left + w, top + h
    in_ratio = width / height
    if in_ratio < 3 / 4:
        w, h = width, int(round(width / (3 / 4)))
    elif in_ratio > 4 / 3:
        h, w = height, int(round(height * (4 / 3)))
    else:
        w, h = width, height
    top, left = (height - h) // 2, (width - w) // 2
    return left, top, left + w, top + h


def load_one(jpeg: bytes, rand: random.Random) -> np.ndarray:
    image = Image.open(io.BytesIO(jpeg)).convert("RGB")
    box = random_resized_crop_box(image.width, image.height, rand)
    image = image.crop(box).resize((CROP, CROP), Image.BILINEAR)
    if rand.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    return np.ascontiguousarray(np.asarray(image, dtype=np.uint8))


def time_pass(jpegs: list[bytes], seed: int) -> float:
    rand = random.Random(seed)
    start = time.perf_counter()
    for jpeg in jpegs:
        load_one(jpeg, rand)
    return len(jpegs) / (time.perf_counter() - start)


def time_decode_only(jpegs: list[bytes]) -> float:
    start = time.perf_counter()
    for jpeg in jpegs:
        Image.open(io.BytesIO(jpeg)).convert("RGB").load()
    return len(jpegs) / (time.perf_counter() - start)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the YAML record here (atomically)")
    args = parser.parse_args(argv)
    jpegs, alpha = make_dataset(args.images, args.seed)
    time_pass(jpegs[:20], args.seed)  # warm-up
    full = [time_pass(jpegs, args.seed + p) for p in range(args.passes)]
    decode = [time_decode_only(jpegs) for _ in range(args.passes)]
    record = {
        "what": "images/s of one DataLoader worker's ImageNet training transform on one CPU core",
        "script": "scripts/measure_input_pipeline.py",
        "measured_on": {
            "date": time.strftime("%Y-%m-%d"),
            "cpu": cpu_model(),
            "logical_cpus": os.cpu_count(),
            "python": platform.python_version(),
            "pillow": Image.__version__,
            "libjpeg_turbo": bool(features.check_feature("libjpeg_turbo")),
        },
        "images": {
            "count": len(jpegs), "width": WIDTH, "height": HEIGHT, "quality": QUALITY,
            "subsampling": "4:4:4", "mean_bytes": round(statistics.mean(map(len, jpegs))),
            "spectrum_alpha": round(alpha, 3),
        },
        "passes": args.passes,
        "images_per_second": {
            "decode_crop_resize_flip": {"median": round(statistics.median(full), 1),
                                        "min": round(min(full), 1), "max": round(max(full), 1)},
            "decode_only": {"median": round(statistics.median(decode), 1),
                            "min": round(min(decode), 1), "max": round(max(decode), 1)},
        },
    }
    import yaml
    text = yaml.safe_dump(record, sort_keys=False)
    if args.out:
        from solver_plan.files import write_text_atomic
        write_text_atomic(args.out, text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
