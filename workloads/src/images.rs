//! Input images and the preprocessing a deployed classifier applies to them.
//!
//! The image set is either a directory of PNG files (`--images DIR`, e.g. real
//! photos copied to the node) or, by default, a small set generated deterministically and
//! encoded as PNG in memory, so that every run decodes real PNG bytes: gradients, stripes and
//! discs of different sizes and aspect ratios. Preprocessing is the usual ImageNet one: resize
//! the shorter side to `size / 0.875`, centre-crop `size × size`, scale to [0, 1], subtract the
//! ImageNet mean and divide by its standard deviation, lay out as NCHW.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use image::imageops::FilterType;
use image::{ImageFormat, Rgb, RgbImage};

/// ImageNet channel means and standard deviations (RGB).
const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// Why an image set could not be read or decoded; each names the directory or the file.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("--images {}", dir.display())]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--images {}: no .png file", dir.display())]
    NoPng { dir: PathBuf },
    #[error("{}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("decoding {name}")]
    Decode {
        name: String,
        #[source]
        source: image::ImageError,
    },
}

/// Encoded images (PNG bytes) with a name each.
#[derive(Debug, Clone)]
pub struct ImageSet {
    pub images: Vec<(String, Vec<u8>)>,
}

impl ImageSet {
    /// `count` generated images, the same for every run.
    pub fn generated(count: usize) -> ImageSet {
        let images = (0..count)
            .map(|i| {
                let img = synthetic(i);
                let mut png = Vec::new();
                img.write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
                    .expect("encoding PNG into memory cannot fail");
                (format!("generated-{i}.png"), png)
            })
            .collect();
        ImageSet { images }
    }

    /// Every `*.png` of `dir`, sorted by name.
    pub fn from_dir(dir: &Path) -> Result<ImageSet, ImageError> {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(|source| ImageError::ReadDir {
                dir: dir.to_path_buf(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("png")))
            .collect();
        paths.sort();
        if paths.is_empty() {
            return Err(ImageError::NoPng {
                dir: dir.to_path_buf(),
            });
        }
        let images = paths
            .into_iter()
            .map(|p| match std::fs::read(&p) {
                Ok(bytes) => Ok((p.display().to_string(), bytes)),
                Err(source) => Err(ImageError::ReadFile { path: p, source }),
            })
            .collect::<Result<_, _>>()?;
        Ok(ImageSet { images })
    }

    /// Decodes and preprocesses `batch` images starting at `first` (wrapping around) into one
    /// NCHW batch of `size × size` inputs.
    pub fn batch(&self, first: usize, batch: usize, size: usize) -> Result<Vec<f32>, ImageError> {
        let mut out = Vec::with_capacity(batch * 3 * size * size);
        for k in 0..batch {
            let (name, bytes) = &self.images[(first + k) % self.images.len()];
            let img = image::load_from_memory_with_format(bytes, ImageFormat::Png)
                .map_err(|source| ImageError::Decode {
                    name: name.clone(),
                    source,
                })?
                .to_rgb8();
            preprocess(&img, size, &mut out);
        }
        Ok(out)
    }

    pub fn len(&self) -> usize {
        self.images.len()
    }

    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }
}

/// Resize (shorter side to size/0.875), centre crop, normalise; appends CHW values to `out`.
pub fn preprocess(img: &RgbImage, size: usize, out: &mut Vec<f32>) {
    let short = (size as f32 / 0.875).round() as u32;
    let (w, h) = img.dimensions();
    let (nw, nh) = if w <= h {
        (short, (h as f32 * short as f32 / w as f32).round() as u32)
    } else {
        ((w as f32 * short as f32 / h as f32).round() as u32, short)
    };
    let resized = image::imageops::resize(img, nw, nh, FilterType::Triangle);
    let x0 = (nw - size as u32) / 2;
    let y0 = (nh - size as u32) / 2;
    for c in 0..3 {
        for y in 0..size as u32 {
            for x in 0..size as u32 {
                let v = resized.get_pixel(x0 + x, y0 + y)[c] as f32 / 255.0;
                out.push((v - MEAN[c]) / STD[c]);
            }
        }
    }
}

/// Image `i` of the generated set: size, pattern and colours all depend on `i`.
fn synthetic(i: usize) -> RgbImage {
    let w = 200 + 37 * (i as u32 % 5);
    let h = 160 + 53 * (i as u32 % 3);
    let (cx, cy) = (w as f32 * 0.4, h as f32 * 0.55);
    let radius = (w.min(h) as f32) * (0.2 + 0.05 * (i % 4) as f32);
    RgbImage::from_fn(w, h, |x, y| {
        let (xf, yf) = (x as f32, y as f32);
        let inside = (xf - cx).powi(2) + (yf - cy).powi(2) < radius * radius;
        let stripe = ((x + y * (i as u32 + 1)) / (8 + i as u32)).is_multiple_of(2);
        let r = (255.0 * xf / w as f32) as u8;
        let g = (255.0 * yf / h as f32) as u8;
        let b = if stripe { 40 + 20 * (i as u8 % 8) } else { 200 };
        if inside {
            Rgb([255 - r, b, g])
        } else {
            Rgb([r, g, b])
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_batch_is_normalised_and_deterministic() {
        let set = ImageSet::generated(3);
        let a = set.batch(0, 2, 64).unwrap();
        assert_eq!(a.len(), 2 * 3 * 64 * 64);
        assert_eq!(a, set.batch(0, 2, 64).unwrap());
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        assert!(mean.abs() < 1.5, "mean {mean}");
        assert!(a.iter().all(|v| v.is_finite() && v.abs() < 3.0));
        // Different images differ.
        assert_ne!(a[..3 * 64 * 64], a[3 * 64 * 64..]);
    }

    #[test]
    fn a_bad_png_directory_names_the_directory_or_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = ImageSet::from_dir(dir.path()).unwrap_err();
        assert!(matches!(err, ImageError::NoPng { .. }), "{err}");
        assert!(
            err.to_string().contains(&dir.path().display().to_string()),
            "{err}"
        );

        let bad = dir.path().join("broken.png");
        std::fs::write(&bad, b"not a png").unwrap();
        let set = ImageSet::from_dir(dir.path()).unwrap();
        let err = set.batch(0, 1, 32).unwrap_err();
        assert_eq!(err.to_string(), format!("decoding {}", bad.display()));
        assert!(
            std::error::Error::source(&err).is_some(),
            "the decoder's reason is the source"
        );

        let missing = dir.path().join("missing");
        let err = ImageSet::from_dir(&missing).unwrap_err();
        assert_eq!(err.to_string(), format!("--images {}", missing.display()));
    }
}
