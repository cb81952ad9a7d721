#!/usr/bin/env python3
"""Writes scikit-learn's handwritten digits as the .npz data sets of the digits models.

The data (1797 8x8 grey images, classes 0-9) ships inside scikit-learn, so nothing is downloaded.
The split is stratified and seeded: 1347 training and 450 test samples, the same on every run.

    train.npz, test.npz          x: float32 [N,64] (pixels / 16), labels: int64 [N]   (mlp.onnx)
    train_img.npz, test_img.npz  x: float32 [N,1,8,8], labels: int64 [N]             (cnn.onnx)

Each array is named after the model input it feeds (both models call their input "x").
Run: /usr/bin/python3 models/digits/make_digits.py
"""

import os

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_FRACTION = 0.25
SEED = 0


def load_split():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # 0..16 grey levels -> [0, 1]
    labels = digits.target.astype(np.int64)
    return train_test_split(x, labels, test_size=TEST_FRACTION, random_state=SEED,
                            stratify=labels)


def main():
    x_train, x_test, y_train, y_test = load_split()
    for split, x, labels in [("train", x_train, y_train), ("test", x_test, y_test)]:
        np.savez_compressed(os.path.join(HERE, f"{split}.npz"), x=x, labels=labels)
        np.savez_compressed(os.path.join(HERE, f"{split}_img.npz"), x=x.reshape(-1, 1, 8, 8),
                            labels=labels)
        print(f"{split}: x {x.shape} labels {labels.shape}, class counts {np.bincount(labels)}")


if __name__ == "__main__":
    main()
