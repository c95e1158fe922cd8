//! Text in PNG plots (training reports, carbon backtest reports). plotters' `ab_glyph` backend
//! is pure Rust and takes the font bytes from us, so no fontconfig or X server is needed: DejaVu
//! Sans (Debian `fonts-dejavu-core`, installed by scripts/setup.sh) is read at run time.

use std::sync::OnceLock;

/// Fonts tried, in order (Debian, Fedora, Arch).
pub const FONT_PATHS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers DejaVu Sans as plotters' `sans-serif`, once per process; the error says which
/// files were tried.
pub fn register_sans_serif() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let bytes = FONT_PATHS
                .iter()
                .find_map(|p| std::fs::read(p).ok())
                .ok_or_else(|| {
                    format!(
                        "no font for plot labels (tried {FONT_PATHS:?}; install fonts-dejavu-core)"
                    )
                })?;
            // plotters keeps registered fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes)
                .map_err(|_| "the DejaVu font could not be parsed".to_string())
        })
        .clone()
}
