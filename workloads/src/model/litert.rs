//! The LiteRT engine (wired once greenpipe-litert lands).

use super::libraries::Libraries;
use super::{EngineKind, ModelError, ModelSpec};

#[derive(Debug)]
pub struct LiteRtNetwork;

impl LiteRtNetwork {
    pub fn build(
        _spec: &ModelSpec,
        _calibration: &[f32],
        libraries: &Libraries,
    ) -> Result<LiteRtNetwork, ModelError> {
        Err(ModelError::Library {
            engine: EngineKind::LiteRt,
            path: libraries.path_for(EngineKind::LiteRt)?,
            reason: "not wired yet".into(),
        })
    }

    pub fn infer(&self, _input: &[f32]) -> Result<Vec<f32>, ModelError> {
        unreachable!()
    }
}
