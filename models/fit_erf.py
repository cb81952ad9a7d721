#!/usr/bin/env python3
"""Fits the float erf polynomials of kernels/common/elementwise.h (math::erf) by least squares
against float64 erf and prints their coefficients rounded to float32, with each piece's largest
error in float32 ulp when evaluated in float32 (Horner, as the C++ does).

  |x| < 0.875      erf(x) = x + x * P6(x^2)            (P6 fits erf(x)/x - 1)
  0.875 <= |x| < 2.2   erf(x) = 1 - Q10(|x| - 1.5375)  (Q10 fits erfc)
  2.2 <= |x| < 3.92    erf(x) = 1 - R10(|x| - 3.06)
  |x| >= 3.92          1 (erf(3.92) rounds to 1 in float32)

tests/kernels/math_test.cc checks the C++ function on a sample of every float (at most 1.5 ulp).
Run: /usr/bin/python3 models/fit_erf.py
"""
from math import erf, erfc

import numpy as np

verf = np.vectorize(erf)
verfc = np.vectorize(erfc)


def horner32(coefs, t):
    r = np.full_like(t, np.float32(coefs[-1]))
    for c in coefs[-2::-1]:
        r = (r * t + np.float32(c)).astype(np.float32)
    return r


def max_ulp(got, xs):
    want = verf(xs.astype(np.float64))
    return float((np.abs(got.astype(np.float64) - want) / np.spacing(np.float32(want)).astype(np.float64)).max())


def main():
    x = np.linspace(0, 0.875, 40001)[1:]
    pa = np.float32(np.polynomial.polynomial.polyfit(x * x, verf(x) / x - 1, 6))
    xs = np.float32(np.linspace(1e-6, 0.875, 400001))
    got = (xs + xs * horner32(pa, (xs * xs).astype(np.float32))).astype(np.float32)
    print("small |x| < 0.875: P6 =", ", ".join("%.9ef" % v for v in pa), " max %.3f ulp" % max_ulp(got, xs))
    for lo, hi, c0 in ((0.875, 2.2, 1.5375), (2.2, 3.92, 3.06)):
        x = np.linspace(lo, hi, 40001)
        q = np.float32(np.polynomial.polynomial.polyfit(x - c0, verfc(x), 10))
        xs = np.float32(np.linspace(lo, hi, 400001))
        got = (np.float32(1) - horner32(q, (xs - np.float32(c0)).astype(np.float32))).astype(np.float32)
        print("erfc on [%g, %g) around %g: Q10 =" % (lo, hi, c0), ", ".join("%.9ef" % v for v in q),
              " max %.3f ulp" % max_ulp(got, xs))


if __name__ == "__main__":
    main()
