//! Mass vectors and their checksums.
//!
//! A rank's mass for an input of `len` values is the values, one weight, and for the checked
//! rules (PFLC, PFCC, HPFLC) one checksum per value: `[x_0 .. x_{len-1}, w, c_0 .. c_{len-1}]`
//! with `c_k = x_k + w` (000 Alg. 4 extends the pair (x, w) by c = x + w; a vector gets one
//! checksum per element so that a corrupted element is found whatever the magnitudes of the
//! others). Every update is linear, so flows and estimates keep the relation exactly up to
//! round-off, and a bit flip breaks it.

use super::real::Real;

/// The layout of mass vectors for an input of `len` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Values per rank.
    pub len: usize,
    /// Whether checksums follow the weight.
    pub checked: bool,
}

impl Layout {
    /// Elements of one mass vector.
    pub fn width(&self) -> usize {
        self.len + 1 + if self.checked { self.len } else { 0 }
    }

    /// Index of the weight.
    pub fn weight(&self) -> usize {
        self.len
    }

    /// The initial mass of a rank with input `data` and initial weight `weight`: 1 at every rank
    /// for the average, so that the ratio x / w converges to it (see [`super::SumForm`]).
    pub fn initial<T: Real>(&self, data: &[f64], weight: f64, dst: &mut Vec<T>) {
        dst.clear();
        dst.extend(data.iter().map(|&x| T::from_f64(x)));
        let w = T::from_f64(weight);
        dst.push(w);
        if self.checked {
            for k in 0..self.len {
                let x = dst[k];
                dst.push(x + w);
            }
        }
    }

    /// The largest checksum defect `|x_k + w - c_k|` of `mass`, relative to `max(1, |c_k|)`:
    /// round-off grows with the magnitude, so a fixed threshold would flag large healthy flows
    /// (000 uses an absolute tau for values in [0, 1], where the two agree). Infinite for a
    /// non-finite defect, and 0 for an unchecked layout.
    pub fn checksum_defect<T: Real>(&self, mass: &[T]) -> f64 {
        if !self.checked || mass.len() != self.width() {
            return 0.0;
        }
        let w = mass[self.len].to_f64();
        let mut worst: f64 = 0.0;
        for k in 0..self.len {
            let x = mass[k].to_f64();
            let c = mass[self.len + 1 + k].to_f64();
            let defect = (x + w - c).abs() / c.abs().max(1.0);
            if !defect.is_finite() {
                return f64::INFINITY;
            }
            worst = worst.max(defect);
        }
        worst
    }

    /// Whether `mass` fails the checksum test with threshold `tau` (000 Alg. 4 lines 3, 5, 15).
    pub fn corrupted<T: Real>(&self, mass: &[T], tau: f64) -> bool {
        // A NaN defect counts as corrupted.
        self.checksum_defect(mass)
            .partial_cmp(&tau)
            .is_none_or(|order| order == std::cmp::Ordering::Greater)
    }

    /// Repairs `initial`, a rank's initial mass (`[x, w, c]` as [`Self::initial`] made it), after
    /// a bit flip; returns whether it was corrupted. The flow rules never write the initial mass,
    /// so its checksums hold exactly, not up to tau, and a flipped bit can be found: the
    /// weight is the rank's known initial `weight`, and a value `x_k` whose checksum fails is
    /// the single-bit change of itself that passes it. Where no such bit exists (the checksum
    /// itself was hit, or several bits), the checksum is recomputed from the value: the rank
    /// then reduces the value it holds, as Push-Flow would. A state that a value flip and a
    /// checksum flip would both leave is taken for a value flip: values are what faults flip.
    pub fn repair_initial<T: Real>(&self, initial: &mut [T], weight: f64) -> bool {
        if !self.checked || initial.len() != self.width() {
            return false;
        }
        let (values, rest) = initial.split_at_mut(self.len);
        let intact = |x: T, w: T, c: T| x + w == c;
        let w = T::from_f64(weight);
        let (held, checksums) = rest.split_at_mut(1);
        let mut corrupted = held[0] != w;
        held[0] = w;
        for (x, c) in values.iter_mut().zip(checksums.iter_mut()) {
            if intact(*x, w, *c) {
                continue;
            }
            corrupted = true;
            match (0..T::BITS)
                .map(|bit| x.flip(bit))
                .find(|&y| intact(y, w, *c))
            {
                Some(restored) => *x = restored,
                None => *c = *x + w,
            }
        }
        corrupted
    }

    /// The estimate `x_k / w` of each value into `dst`, times `scale` (the live rank count for a
    /// sum, 1 for an average).
    pub fn ratio<T: Real>(&self, mass: &[T], scale: f64, dst: &mut Vec<f64>) {
        dst.clear();
        if mass.len() < self.len + 1 {
            return;
        }
        let w = mass[self.len].to_f64();
        dst.extend(mass[..self.len].iter().map(|x| x.to_f64() / w * scale));
    }
}

/// `acc[i] += x[i]`.
pub fn add_into<T: Real>(acc: &mut [T], x: &[T]) {
    for (a, &b) in acc.iter_mut().zip(x) {
        *a = *a + b;
    }
}

/// `acc[i] -= x[i]`.
pub fn sub_into<T: Real>(acc: &mut [T], x: &[T]) {
    for (a, &b) in acc.iter_mut().zip(x) {
        *a = *a - b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_hold_for_linear_updates_and_catch_flips() {
        let layout = Layout {
            len: 2,
            checked: true,
        };
        let mut a: Vec<f64> = Vec::new();
        layout.initial(&[0.25, 7.0], 1.0, &mut a);
        assert_eq!(a, [0.25, 7.0, 1.0, 1.25, 8.0]);
        assert_eq!(layout.checksum_defect(&a), 0.0);
        let half: Vec<f64> = a.iter().map(|x| x.half()).collect();
        sub_into(&mut a, &half);
        assert!(!layout.corrupted(&a, 1e-11));
        a[1] = a[1].flip(60);
        assert!(layout.corrupted(&a, 1e-11));
        a[1] = f64::NAN;
        assert!(layout.corrupted(&a, 1e-11), "NaN must count as corrupted");
        let unchecked = Layout {
            len: 1,
            checked: false,
        };
        assert!(!unchecked.corrupted(&[f64::NAN, 1.0], 1e-11));
    }

    #[test]
    fn a_flip_in_the_initial_mass_is_undone() {
        let layout = Layout {
            len: 2,
            checked: true,
        };
        let mut initial: Vec<f64> = Vec::new();
        layout.initial(&[0.4578719372899391, 7.25], 1.0, &mut initial);
        let clean = initial.clone();
        assert!(!layout.repair_initial(&mut initial, 1.0));
        // Values and the weight at every bit: back to the input, up to what the checksum
        // resolves (a flip below half an ulp of c_k leaves x_k + w = c_k, harmlessly).
        for elem in 0..3 {
            for bit in 0..64 {
                let mut flipped = clean.clone();
                flipped[elem] = flipped[elem].flip(bit);
                layout.repair_initial(&mut flipped, 1.0);
                for k in 0..3 {
                    let resolution = if k < 2 {
                        clean[3 + k] * f64::EPSILON
                    } else {
                        0.0
                    };
                    assert!(
                        (flipped[k] - clean[k]).abs() <= resolution,
                        "element {elem}, bit {bit}: {flipped:?}"
                    );
                }
                assert!(
                    !layout.repair_initial(&mut flipped, 1.0),
                    "{elem}, {bit}: intact"
                );
            }
        }
        // A flipped checksum where no value bit explains it: recomputed from the value.
        let mut flipped = clean.clone();
        flipped[4] = flipped[4].flip(62);
        assert!(layout.repair_initial(&mut flipped, 1.0));
        assert_eq!(flipped, clean);
    }

    #[test]
    fn ratio_scales_for_sums() {
        let layout = Layout {
            len: 1,
            checked: false,
        };
        let mut out = Vec::new();
        layout.ratio(&[3.0f32, 2.0], 4.0, &mut out);
        assert_eq!(out, [6.0]);
    }
}
