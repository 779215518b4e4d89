"""The certified reference optimum w*, f* of a least-squares problem, with its accuracy.

Every reported figure is a distance to f*, so f* must be vouched for. The solve:
1. divide each column of X by a power of two near its norm (exact), so that the rank cut-off
   and kappa describe the problem, not the columns' units;
2. one Householder QR of the scaled X; R's singular values give its rank and kappa;
3. refine the augmented system [I X; X^T 0][r; z] = [y; 0] (Bjorck), y - r - X z with
   error-free products and sums and X^T r in np.longdouble, until the correction stops
   shrinking. Refining w alone stalls at Q's float64 error when the residual is large (a
   longdouble residual alone left Filip's f* at 11.9 digits).
f* is evaluated the same way at the float64 w*, its accuracy estimated from the last correction
and the optimality residual X^T r. A numerically rank-deficient X gets the minimum-norm
solution and accuracy inf (refused).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.linalg

EXT = np.longdouble
EPS = float(np.finfo(np.float64).eps)
EPS_EXT = float(np.finfo(EXT).eps)
FLOOR = EPS  # suboptimality is relative to max(f*, FLOOR * f(0)): float64 resolves no finer
MARGIN = 100  # a tolerance is judged only against an f* this many times more accurate
MAX_STEPS = 12
CHUNK = 1 << 16  # rows per extended-precision block: memory stays O(CHUNK * d)
# What each kappa printed or reported is, said once where they appear (`regress`, the report)
KAPPA_NAMES = ("kappa is the Hessian's condition number L/mu: 'as run' of X as given, the one "
               "the iterations and their bounds see; 'scaled' with each column divided by a "
               "power of two near its norm, the one f*'s accuracy depends on; 'standardized' "
               "with the features z-scored, the one --standardize (standardize = true) would "
               "give; for logistic regression, 'at the optimum' is the Hessian's at w* and the "
               "1/L step's is the global L over that mu")


@dataclass(frozen=True, eq=False)
class Reference:
    """w*, f* and what they are worth: kappa of the scaled X and of X as given (kappa_raw);
    accuracies are relative estimates."""

    w: np.ndarray = field(repr=False)
    f: float
    accuracy: float  # |f* - exact optimum| / max(f*, floor), estimated
    w_accuracy: float  # ||w* - exact|| / ||w*||, estimated
    optimality: float  # ||X^T r|| / (||X|| ||r||) at w* (scaled X)
    floor: float  # FLOOR * f(0): the smallest scale suboptimality is measured against
    kappa: float
    kappa_raw: float
    rank: int
    steps: int
    method: str = "qr"  # "qr": least squares (augmented for ridge); "newton": logistic
    # the conditioning the bounds read (datasets.problem adds it; NaN in an older cache)
    mu: float = float("nan")
    L: float = float("nan")
    kappa_standardized: float = float("nan")
    kappa_diag_step: float = float("nan")

    @property
    def scale(self) -> float:
        """What suboptimality divides by: f*, or the floor when f* is (nearly) zero."""
        return max(self.f, self.floor) or 1.0  # all-zero labels: absolute

    def refusal(self, tol: float | None) -> str | None:
        """Why f* cannot judge a run to `tol` (one line saying what to do), or None."""
        if tol is None or self.accuracy * MARGIN <= tol:
            return None
        where = (f"kappa {self.kappa:.3g} after column scaling, {self.kappa_raw:.3g} raw")
        if self.method == "newton":
            how = ("Newton's method did not converge" if self.accuracy == float("inf") else
                   f"Newton's f* is accurate only to {self.accuracy:.2g} (relative)")
            return (f"{how} on this logistic problem ({where}; {self.steps} steps): "
                    f"the classes may be (nearly) separable; raise lam, standardize the "
                    f"features or loosen --tol")
        if self.rank < self.w.shape[0]:
            return (f"the features are numerically rank deficient (rank {self.rank} of "
                    f"{self.w.shape[0]}, {where}): w* and f* are not determined; drop or "
                    "combine the redundant columns")
        return (f"the reference f* is accurate only to {self.accuracy:.2g} (relative), not "
                f"{MARGIN}x below tol {tol:g} ({where}): standardize the features "
                f"(--standardize) or loosen --tol to {MARGIN * self.accuracy:.2g} or more")

    @property
    def kappa_gd(self) -> float:
        """L/mu: the kappa that GD's 1/L step converges at."""
        if not (self.mu >= 0 and self.L >= 0):
            return float("nan")  # a cache written before the conditioning existed
        return self.L / self.mu if self.mu > 0 else float("inf")

    def conditioning(self) -> dict:
        """The row columns of the conditioning (optimizers.driver, the refused run's row)."""
        return {"kappa": self.kappa, "kappa_raw": self.kappa_raw,
                "kappa_standardized": self.kappa_standardized, "hessian_mu": self.mu,
                "hessian_L": self.L, "kappa_diag_step": self.kappa_diag_step}

    def to_dict(self) -> dict:
        """Everything but w (stored apart as an array), as plain JSON numbers."""
        return {k: v for k, v in asdict(self).items() if k != "w"}

    @classmethod
    def from_dict(cls, meta: dict, w: np.ndarray) -> Reference:
        fields = cls.__dataclass_fields__
        return cls(w=w, **{k: meta.get(k, fields[k].default) for k in fields if k != "w"})


def _split(a):
    """Dekker's split: a = hi + lo exactly, each with at most 26 significant bits."""
    c = 134217729.0 * a  # 2**27 + 1
    hi = c - (c - a)
    return hi, a - hi


def residual(X: np.ndarray, y: np.ndarray, w) -> np.ndarray:
    """y - X w to twice float64's precision (Ogita, Rump and Oishi's Dot2), in extended
    precision; w may be extended."""
    w = np.asarray(w, dtype=EXT)
    w_hi = np.asarray(w, dtype=np.float64)
    w_lo = np.asarray(w - w_hi, dtype=np.float64)
    b_hi, b_lo = _split(-w_hi)
    out = np.empty(y.shape, dtype=EXT)
    for s in range(0, X.shape[0], CHUNK):
        block = np.ascontiguousarray(X[s:s + CHUNK].T)
        hi, lo = np.array(y[s:s + CHUNK], dtype=np.float64), 0.0
        for j, x in enumerate(block):
            x = x[:, None]
            x_hi, x_lo = _split(x)
            p = x * -w_hi[j]
            p_err = x_lo * b_lo[j] - (((p - x_hi * b_hi[j]) - x_lo * b_hi[j]) - x_hi * b_lo[j])
            total = hi + p
            back = total - hi
            s_err = (hi - (total - back)) + (p - back)
            hi, lo = total, lo + (p_err + s_err - x * w_lo[j])
        out[s:s + CHUNK] = hi.astype(EXT) + lo
    return out


def transpose_times(X: np.ndarray, r: np.ndarray) -> np.ndarray:
    """X^T r in extended precision, in row blocks."""
    out = np.zeros((X.shape[1], r.shape[1]), dtype=EXT)
    for s in range(0, X.shape[0], CHUNK):
        out += X[s:s + CHUNK].astype(EXT).T @ r[s:s + CHUNK]
    return out


def loss_extended(X: np.ndarray, y: np.ndarray, w) -> float:
    """(1/n) ||X w - y||^2 in extended precision: compares two iterates without float64 noise."""
    r = residual(X, y, w)
    return float(np.sum(r * r) / X.shape[0])


def _norm(a) -> float:
    return float(np.sqrt(np.sum(np.square(a, dtype=EXT))))


def solve(X: np.ndarray, y: np.ndarray, ridge: float = 0.0) -> Reference:
    """The certified least-squares optimum of float64 X (n x d), y (n x k); a ridge term as the
    augmented rows [X; sqrt(n ridge/2) I], [y; 0] (they add n (ridge/2)||w||^2)."""
    n, d = X.shape
    if ridge > 0:
        X = np.vstack([X, np.sqrt(n * ridge / 2) * np.eye(d)])
        y = np.vstack([y, np.zeros((d, y.shape[1]))])
    norms = np.linalg.norm(X, axis=0)
    scale = np.where(norms > 0, np.exp2(np.round(np.log2(np.where(norms > 0, norms, 1.0)))), 1.0)
    Xs = X / scale  # exact: powers of two
    Q, R = scipy.linalg.qr(Xs, mode="economic", overwrite_a=True, check_finite=False)
    sv = np.linalg.svd(R, compute_uv=False)
    sv_raw = np.linalg.svd(R * scale, compute_uv=False)
    kappa = (sv[0] / sv[-1]) ** 2 if sv[-1] > 0 else float("inf")
    kappa_raw = (sv_raw[0] / sv_raw[-1]) ** 2 if sv_raw[-1] > 0 else float("inf")
    floor = FLOOR * float(np.sum(y * y)) / n
    keep = sv > sv[0] * d * EPS  # below: float64 QR cannot see it; above: refinement decides
    if not keep.all():  # numerically rank deficient: w* is not determined by the data
        U, s, Vt = np.linalg.svd(R)
        z = Vt[keep].T @ ((U[:, keep].T @ (Q.T @ y)) / s[keep][:, None])
        w = z / scale[:, None]
        return Reference(w, loss_extended(X, y, w), float("inf"), float("inf"), float("nan"),
                         floor, float(kappa), float(kappa_raw), int(keep.sum()), 0)

    z = np.zeros((d, y.shape[1]), dtype=EXT)
    r = np.zeros(y.shape, dtype=EXT)
    previous, steps = float("inf"), 0
    dz = np.zeros_like(z, dtype=np.float64)
    c_norm = float("inf")
    while steps < MAX_STEPS:
        if steps == 0:  # z = 0, r = 0: the first correction is the plain QR solution
            f, g = y.astype(EXT), np.zeros_like(z)
        else:
            f = residual(X, y, z / scale[:, None]) - r  # y - r - Xs z
            g = -transpose_times(X, r) / scale[:, None]  # -Xs^T r
        a = scipy.linalg.solve_triangular(R, np.asarray(g, np.float64), trans="T")
        c = Q.T @ np.asarray(f, np.float64) - a
        dz = scipy.linalg.solve_triangular(R, c)
        steps += 1
        dz_norm, c_norm = _norm(dz), _norm(c)
        z += dz
        r += f - (Q @ c)
        if dz_norm <= EPS * _norm(z) or dz_norm > previous / 2:
            break  # below what float64 w* can hold, or the correction stopped shrinking
        previous = dz_norm

    w = np.asarray(z / scale[:, None], dtype=np.float64)
    r_final = residual(X, y, w)
    f_star = float(np.sum(r_final * r_final) / n)
    g = transpose_times(X, r_final) / scale[:, None]
    r_norm = _norm(r_final)
    optimality = _norm(g) / (sv[0] * r_norm) if r_norm > 0 else 0.0
    # f(w*) - f(exact) = ||Xs (z - z_exact)||^2 / n: bounded by the last correction's change of
    # the fit, or by the one Newton step that X^T r still asks for, ||R^-T g||
    newton = scipy.linalg.solve_triangular(R, np.asarray(g, np.float64), trans="T")
    fit_error = max(c_norm, _norm(newton))
    # rounding of each residual: (d + 2) eps^2 (|X||w| + |y|) plus its extended-precision store
    r64 = np.abs(np.asarray(r_final, np.float64))
    bound = (d + 2) * EPS**2 * (np.abs(X) @ np.abs(w) + np.abs(y)) + EPS_EXT * r64
    evaluation = float(np.sum(2 * r64 * bound + bound**2)) / n + EPS * f_star
    accuracy = (fit_error**2 / n + evaluation) / (max(f_star, floor) or 1.0)
    step = scipy.linalg.solve_triangular(R, newton)
    w_norm = _norm(w)
    w_accuracy = max(_norm(dz / scale[:, None]), _norm(step / scale[:, None])) / w_norm \
        if w_norm > 0 else 0.0
    return Reference(w, f_star, float(accuracy), float(w_accuracy), float(optimality), floor,
                     float(kappa), float(kappa_raw), d, steps)


def conditioning(X: np.ndarray, lam: float, kappa_raw: float) -> dict:
    """mu, L, kappa_standardized and kappa_diag_step of least squares on X (Hessian 2/n X^T X
    + lam I). mu = L / kappa_raw: the QR resolves the smallest eigenvalue, the Gram cannot.
    Standardized as `Problem.from_arrays` does it: Hessian 2 [[1, 0], [0, C]] + lam I, C the
    correlation matrix. The diag step is GD with step 1/d on D^-1/2 H D^-1/2 (largest
    eigenvalue <= d): GD at kappa d / lambda_min of that matrix."""
    n, d = X.shape
    gram = (2.0 / n) * (X.T @ X) + lam * np.eye(d)
    L = float(np.linalg.eigvalsh(gram)[-1])
    scale = np.sqrt(np.diag(gram))
    jacobi = np.linalg.eigvalsh(gram / np.outer(scale, scale)) if np.all(scale > 0) else [0.0]
    kappa_diag_step = d / jacobi[0] if jacobi[0] > 0 else float("inf")
    varying = np.ptp(X, axis=0) > 0
    Z = X[:, varying] - X[:, varying].mean(axis=0)
    Z /= np.sqrt(np.mean(Z * Z, axis=0))
    correlation = np.eye(1 + Z.shape[1])
    correlation[1:, 1:] = (Z.T @ Z) / n
    standardized = np.linalg.eigvalsh(2 * correlation + lam * np.eye(len(correlation)))
    kappa_standardized = (standardized[-1] / standardized[0] if standardized[0] > 0
                          else float("inf"))
    return {"mu": L / kappa_raw if kappa_raw > 0 else float("nan"), "L": L,
            "kappa_standardized": float(kappa_standardized),
            "kappa_diag_step": float(kappa_diag_step)}
