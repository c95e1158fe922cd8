//! The workload's loops over millions of values: the seeded draws of generated models' weights
//! and of benchmark inputs, their int8 and int32 quantization, their little-endian packing into
//! ONNX raw data, and the value ranges of calibration outputs.
//!
//! A crate of its own so that the dev profile can optimise it (opt-level 3 in the workspace's
//! Cargo.toml) while `greenpipe-workload` builds unoptimised: ResNet-50 alone draws 25 M normal
//! samples, which took most of a model test unoptimised, and optimising the whole workload crate
//! for these few loops cost minutes of every build (host, aarch64 and without tract). Nothing
//! here is generic over its caller's types, so every instantiation (ChaCha8's rounds, the normal
//! sampler) is compiled here, at this crate's optimisation level.

use std::ops::Range;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

/// A seeded ChaCha8 stream: the same seed gives the same values, in the same order, on every
/// target.
#[derive(Debug)]
pub struct Draws(ChaCha8Rng);

impl Draws {
    /// The stream of `seed`.
    pub fn seeded(seed: u64) -> Draws {
        Draws(ChaCha8Rng::seed_from_u64(seed))
    }

    /// `n` samples of a normal distribution of mean 0 and standard deviation `std`.
    ///
    /// # Panics
    /// If `std` is not finite or is negative: the callers pass constants and fan-in based
    /// values, so such a `std` is a bug.
    pub fn normal(&mut self, n: usize, std: f32) -> Vec<f32> {
        let normal = Normal::new(0.0f32, std).expect("finite non-negative std");
        (0..n).map(|_| normal.sample(&mut self.0)).collect()
    }

    /// `n` values uniform in `range`.
    pub fn uniform_f32(&mut self, n: usize, range: Range<f32>) -> Vec<f32> {
        (0..n).map(|_| self.0.random_range(range.clone())).collect()
    }

    /// `n` values uniform in `range`.
    pub fn uniform_u8(&mut self, n: usize, range: Range<u8>) -> Vec<u8> {
        (0..n).map(|_| self.0.random_range(range.clone())).collect()
    }

    /// `n` values uniform in `range`, as the bytes of ONNX int8 raw data (two's complement).
    pub fn uniform_i8_bytes(&mut self, n: usize, range: Range<i8>) -> Vec<u8> {
        (0..n)
            .map(|_| self.0.random_range(range.clone()) as u8)
            .collect()
    }
}

/// `values` as ONNX float raw data: each value's 4 little-endian bytes, in order.
pub fn f32_le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Symmetric per-tensor int8 quantization: the scale maps the largest magnitude to 127 (a
/// tensor of zeros keeps a positive scale), and each value rounds to the nearest step, clamped
/// to ±127. Returns the int8 raw data and the scale.
pub fn quantize_i8_symmetric(values: &[f32]) -> (Vec<u8>, f32) {
    let max = values
        .iter()
        .fold(0.0f32, |m, v| m.max(v.abs()))
        .max(f32::MIN_POSITIVE);
    let scale = max / 127.0;
    let raw = values
        .iter()
        .map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8 as u8)
        .collect();
    (raw, scale)
}

/// `values` in steps of `scale`, rounded, as ONNX int32 raw data (a quantized layer's bias, whose
/// scale is its input's times its weights').
pub fn quantize_i32_le(values: &[f32], scale: f32) -> Vec<u8> {
    values
        .iter()
        .flat_map(|v| ((v / scale).round() as i32).to_le_bytes())
        .collect()
}

/// The smallest and the largest of `values`; (+∞, -∞) for none.
pub fn min_max(values: &[f32]) -> (f32, f32) {
    values
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_stream_and_another_seed_another() {
        let a = Draws::seeded(7).normal(1000, 0.5);
        assert_eq!(a, Draws::seeded(7).normal(1000, 0.5));
        assert_ne!(a, Draws::seeded(8).normal(1000, 0.5));
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        let var = a.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / a.len() as f32;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((var.sqrt() - 0.5).abs() < 0.05, "std {}", var.sqrt());
    }

    #[test]
    fn uniform_draws_stay_in_their_range() {
        let mut d = Draws::seeded(1);
        assert!(d
            .uniform_f32(1000, -1.0..1.0)
            .iter()
            .all(|v| (-1.0..1.0).contains(v)));
        assert!(d
            .uniform_u8(1000, 96..160)
            .iter()
            .all(|v| (96..160).contains(v)));
        let bytes = d.uniform_i8_bytes(1000, -64..64);
        assert!(bytes.iter().all(|&b| (-64..64).contains(&(b as i8))));
        assert!(bytes.iter().any(|&b| (b as i8) < 0), "negative values kept");
    }

    #[test]
    fn packing_is_little_endian_in_order() {
        assert_eq!(
            f32_le_bytes(&[1.0, -2.5]),
            [1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat()
        );
        assert_eq!(
            quantize_i32_le(&[0.5, -1.0, 0.26], 0.1),
            [
                5i32.to_le_bytes(),
                (-10i32).to_le_bytes(),
                3i32.to_le_bytes()
            ]
            .concat()
        );
    }

    #[test]
    fn int8_quantization_maps_the_largest_magnitude_to_127() {
        let (raw, scale) = quantize_i8_symmetric(&[0.5, -1.27, 0.0, 0.004]);
        assert!((scale - 0.01).abs() < 1e-6);
        let q: Vec<i8> = raw.iter().map(|&b| b as i8).collect();
        assert_eq!(q, [50, -127, 0, 0]);
        let (raw, scale) = quantize_i8_symmetric(&[0.0, 0.0]);
        assert!(scale > 0.0);
        assert_eq!(raw, [0, 0]);
    }

    #[test]
    fn min_max_of_values_and_of_none() {
        assert_eq!(min_max(&[3.0, -1.0, 2.0]), (-1.0, 3.0));
        assert_eq!(min_max(&[]), (f32::INFINITY, f32::NEG_INFINITY));
    }
}
