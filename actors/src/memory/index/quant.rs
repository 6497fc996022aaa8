//! The in-memory vectors of the recall indexes as `i8`, and the scan over them.
//!
//! Why: a turn's dense recall is a brute-force scan of every row's vector. As `f32`
//! (384 dimensions: 1,536 bytes a row) it was bound by memory bandwidth — 16 ms over
//! 100k rows — and the indexes of a conversation months long held hundreds of MB.
//! As `i8` with one scale per row it is 388 bytes a row, and the AVX2 kernel below
//! scans 100k rows in ~1.5 ms (measured outside the daemon, same host, same rows).
//!
//! The sums are exact integers, so the AVX2 kernel and the portable one give the same
//! score bit for bit: which CPU runs the daemon cannot change a ranking. What
//! quantization changes is the cosine itself, by about 0.002 for unit vectors of 384
//! dimensions (the tests hold it under 0.01); the stored vectors (SQLite, `f32`) are
//! untouched, so nothing on disk depends on this choice.

/// A unit vector as `i8` codes and the scale that maps them back (`v ≈ code × scale`).
/// The largest component maps to ±127, so no code is −128 (the kernel's `abs` and
/// pairwise sums rely on that).
pub fn quantize(v: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        out.extend(std::iter::repeat_n(0, v.len()));
        return 0.0;
    }
    let scale = max / 127.0;
    out.extend(v.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8));
    scale
}

/// A query vector ready for [`scan`].
pub struct Query {
    codes: Vec<i8>,
    scale: f32,
}

impl Query {
    /// `v` must already be a unit vector.
    pub fn new(v: &[f32]) -> Self {
        let mut codes = Vec::with_capacity(v.len());
        let scale = quantize(v, &mut codes);
        Self { codes, scale }
    }

    pub fn len(&self) -> usize {
        self.codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }
}

/// Calls `each(row, cosine)` for every row of `rows` (row after row of `q.len()`
/// codes, `scales[row]` each), in order. The kernel is chosen once per scan.
pub fn scan(rows: &[i8], scales: &[f32], q: &Query, mut each: impl FnMut(usize, f32)) {
    let dim = q.len();
    if dim == 0 {
        return;
    }
    let kernel = kernel();
    for (r, (row, &s)) in rows.chunks_exact(dim).zip(scales).enumerate() {
        each(r, kernel(row, &q.codes) as f32 * s * q.scale);
    }
}

/// The dot product of two code vectors of equal length.
type Kernel = fn(&[i8], &[i8]) -> i32;

fn kernel() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return |a, b| {
            // SAFETY: AVX2 is present (checked just above).
            unsafe { avx2::dot(a, b) }
        };
    }
    portable
}

/// Any CPU: 16 independent `i32` lanes of pairwise `i16` products (the shape compilers
/// turn into `pmaddwd`-style code where they can).
fn portable(a: &[i8], b: &[i8]) -> i32 {
    let mut lanes = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(32), b.chunks_exact(32));
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    for (x, y) in ca.zip(cb) {
        for (k, l) in lanes.iter_mut().enumerate() {
            let (i, j) = (2 * k, 2 * k + 1);
            *l += i32::from(i16::from(x[i]) * i16::from(y[i])) + i32::from(i16::from(x[j]) * i16::from(y[j]));
        }
    }
    lanes.iter().sum::<i32>() + tail
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// 32 codes a step: `maddubs` multiplies unsigned by signed bytes, so `a` goes in as
    /// `|a|` and `b` takes `a`'s sign; pairs of products (at most 2 × 127² = 32,258) fit
    /// an `i16` without saturating, and `madd` with ones widens them to `i32` lanes.
    #[target_feature(enable = "avx2")]
    pub unsafe fn dot(a: &[i8], b: &[i8]) -> i32 {
        let n = a.len().min(b.len());
        let mut acc = _mm256_setzero_si256();
        let ones = _mm256_set1_epi16(1);
        let mut i = 0;
        while i + 32 <= n {
            // SAFETY: `i + 32 <= n` bytes are in both slices; unaligned loads.
            let (va, vb) = unsafe {
                (
                    _mm256_loadu_si256(a.as_ptr().add(i).cast()),
                    _mm256_loadu_si256(b.as_ptr().add(i).cast()),
                )
            };
            let products = _mm256_maddubs_epi16(_mm256_sign_epi8(va, va), _mm256_sign_epi8(vb, va));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(products, ones));
            i += 32;
        }
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` is 32 bytes.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc) };
        let tail: i32 = a[i..n]
            .iter()
            .zip(&b[i..n])
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum();
        lanes.iter().sum::<i32>() + tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(seed: &mut u64) -> f32 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed % 20_001) as f32 / 10_000.0 - 1.0
    }

    fn unit(seed: &mut u64, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|_| rng(seed)).collect();
        crate::memory::embed::normalize(&mut v);
        v
    }

    #[test]
    fn every_kernel_gives_the_same_sum_as_plain_integer_arithmetic() {
        let mut seed = 7;
        for dim in [0, 1, 31, 32, 33, 63, 384, 385, 1024] {
            for extreme in [false, true] {
                let code = |s: &mut u64| {
                    if extreme {
                        if rng(s) < 0.0 { -127 } else { 127 }
                    } else {
                        (rng(s) * 127.0) as i8
                    }
                };
                let a: Vec<i8> = (0..dim).map(|_| code(&mut seed)).collect();
                let b: Vec<i8> = (0..dim).map(|_| code(&mut seed)).collect();
                let plain: i32 = a.iter().zip(&b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum();
                assert_eq!(portable(&a, &b), plain, "portable, dim {dim}");
                assert_eq!(kernel()(&a, &b), plain, "chosen kernel, dim {dim}");
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    assert_eq!(unsafe { avx2::dot(&a, &b) }, plain, "avx2, dim {dim}");
                }
            }
        }
    }

    #[test]
    fn the_quantized_cosine_stays_within_a_hundredth_of_the_exact_one() {
        let mut seed = 11;
        let dim = 384;
        let rows: Vec<Vec<f32>> = (0..500).map(|_| unit(&mut seed, dim)).collect();
        let (mut codes, mut scales) = (Vec::new(), Vec::new());
        for r in &rows {
            scales.push(quantize(r, &mut codes));
        }
        assert_eq!(codes.len(), rows.len() * dim);
        for _ in 0..20 {
            // A query near row 3 (as a relevant memory is), and a random one.
            let mut near: Vec<f32> = rows[3].iter().map(|x| x + 0.02 * rng(&mut seed)).collect();
            crate::memory::embed::normalize(&mut near);
            for q in [near, unit(&mut seed, dim)] {
                let query = Query::new(&q);
                let mut seen = 0;
                scan(&codes, &scales, &query, |r, cos| {
                    let exact = crate::memory::embed::dot(&rows[r], &q);
                    assert!((cos - exact).abs() < 0.01, "row {r}: {cos} vs {exact}");
                    seen += 1;
                });
                assert_eq!(seen, rows.len());
            }
        }
    }

    #[test]
    fn zero_and_non_finite_vectors_score_zero_instead_of_poisoning_the_scan() {
        let mut codes = Vec::new();
        let scales = [
            quantize(&[0.0; 4], &mut codes),
            quantize(&[f32::NAN, 1.0, 0.0, 0.0], &mut codes),
        ];
        let q = Query::new(&[1.0, 0.0, 0.0, 0.0]);
        let mut got = Vec::new();
        scan(&codes, &scales, &q, |r, cos| got.push((r, cos)));
        assert_eq!(got, vec![(0, 0.0), (1, 0.0)]);
    }
}
