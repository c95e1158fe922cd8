//! The UM-series poll response: layout, per-model scaling, end marker and UM34C checksum (the
//! table in the parent module's documentation).

use super::{UM24C, UM25C, UM34C};
use crate::meter::{DeviceEnergy, Kind, Reading, Reason};

/// The poll request byte.
pub const REQUEST: u8 = 0xF0;
/// Length of a poll response.
pub const FRAME_LEN: usize = 130;
/// End marker of UM24C and UM25C frames.
pub const END_MARKER: u16 = 0xFFF1;
/// Odd byte positions covered by the UM34C checksum (sigrok wiki, "Checksum (UM34C)").
const UM34C_CHECKSUM_POSITIONS: [usize; 32] = [
    1, 3, 7, 9, 15, 17, 19, 23, 31, 39, 41, 45, 49, 53, 55, 57, 59, 63, 67, 69, 73, 79, 83, 89, 97,
    99, 109, 111, 113, 119, 121, 127,
];

/// A UM-series model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// UM24C: USB 2.0, 3 A, 10 mV / 1 mA.
    Um24c,
    /// UM25C: USB 2.0 and USB-C, 5 A, 1 mV / 0.1 mA.
    Um25c,
    /// UM34C: USB 3.0, 4 A, 10 mV / 1 mA, checksummed frames.
    Um34c,
}

impl Model {
    /// Every model.
    pub const ALL: [Model; 3] = [Model::Um24c, Model::Um25c, Model::Um34c];

    /// The meter kind of the model.
    pub fn kind(self) -> Kind {
        Kind::of(match self {
            Model::Um24c => &UM24C,
            Model::Um25c => &UM25C,
            Model::Um34c => &UM34C,
        })
    }

    /// Model id in the first two bytes of a frame.
    pub fn id(self) -> u16 {
        match self {
            Model::Um24c => 0x0963,
            Model::Um25c => 0x09c9,
            Model::Um34c => 0x0d4c,
        }
    }

    fn from_id(id: u16) -> Option<Model> {
        Model::ALL.into_iter().find(|m| m.id() == id)
    }

    /// Raw voltage units per volt.
    fn volt_divisor(self) -> f64 {
        match self {
            Model::Um25c => 1000.0,
            Model::Um24c | Model::Um34c => 100.0,
        }
    }

    /// Raw current units per ampere.
    fn amp_divisor(self) -> f64 {
        match self {
            Model::Um25c => 10_000.0,
            Model::Um24c | Model::Um34c => 1000.0,
        }
    }
}

/// One data group: charge and energy recorded by the meter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataGroup {
    /// Charge, mAh.
    pub milliamp_hours: u32,
    /// Energy, mWh.
    pub milliwatt_hours: u32,
}

/// A decoded poll response, in base units.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Model that sent it.
    pub model: Model,
    /// Bus voltage, V.
    pub voltage_volts: f64,
    /// Current, A.
    pub current_amperes: f64,
    /// Power, W (the meter's own product, 1 mW resolution).
    pub power_watts: f64,
    /// Meter temperature, °C.
    pub temperature_celsius: f64,
    /// Meter temperature, °F (as sent; not derived).
    pub temperature_fahrenheit: f64,
    /// Index of the selected data group.
    pub selected_group: u16,
    /// The ten data groups.
    pub groups: [DataGroup; 10],
    /// D+ data line, V.
    pub data_plus_volts: f64,
    /// D- data line, V.
    pub data_minus_volts: f64,
    /// Charging mode code (0 unknown, 1 QC2.0, 2 QC3.0, ...).
    pub charging_mode: u16,
    /// Threshold-based recording group.
    pub threshold_group: DataGroup,
    /// Recording threshold, A.
    pub threshold_amperes: f64,
    /// Threshold recording time, s.
    pub threshold_seconds: u32,
    /// Whether threshold recording is active.
    pub recording: bool,
    /// Load resistance, Ω.
    pub load_ohms: f64,
}

impl Frame {
    /// A frame of the model with every value zero (the emulator's starting point).
    pub fn zero(model: Model) -> Frame {
        Frame {
            model,
            voltage_volts: 0.0,
            current_amperes: 0.0,
            power_watts: 0.0,
            temperature_celsius: 0.0,
            temperature_fahrenheit: 0.0,
            selected_group: 0,
            groups: [DataGroup::default(); 10],
            data_plus_volts: 0.0,
            data_minus_volts: 0.0,
            charging_mode: 0,
            threshold_group: DataGroup::default(),
            threshold_amperes: 0.0,
            threshold_seconds: 0,
            recording: false,
            load_ohms: 0.0,
        }
    }

    /// The reading the exporter publishes.
    pub fn reading(&self) -> Reading {
        let group = self
            .groups
            .get(usize::from(self.selected_group))
            .copied()
            .unwrap_or_default();
        Reading {
            power_watts: Some(self.power_watts),
            voltage_volts: Some(self.voltage_volts),
            current_amperes: Some(self.current_amperes),
            temperature_celsius: Some(self.temperature_celsius),
            energy: Some(DeviceEnergy {
                joules: f64::from(group.milliwatt_hours) * 3.6,
                epoch: u64::from(self.selected_group),
                wraps_at_joules: None,
            }),
        }
    }
}

/// Why a frame was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer (or more) bytes than a frame.
    #[error("frame has {0} bytes, expected {FRAME_LEN}")]
    Length(usize),
    /// The first two bytes are no known model id.
    #[error("unknown model id 0x{0:04x} (not a UM24C/UM25C/UM34C frame)")]
    UnknownModel(u16),
    /// A frame of another model than expected.
    #[error("frame from a {found:?}, configured as {expected:?}")]
    WrongModel {
        /// Configured model.
        expected: Model,
        /// Model in the frame.
        found: Model,
    },
    /// UM24C/UM25C end marker is not `0xFFF1`.
    #[error("bad end marker 0x{0:04x}, expected 0xfff1")]
    EndMarker(u16),
    /// UM34C checksum mismatch.
    #[error("bad UM34C checksum 0x{found:02x}, computed 0x{computed:02x}")]
    Checksum {
        /// Byte 129.
        found: u8,
        /// XOR of the covered bytes.
        computed: u8,
    },
}

impl FrameError {
    /// The `reason` label of the error.
    pub fn reason(&self) -> Reason {
        match self {
            FrameError::Length(_) => Reason::ShortFrame,
            FrameError::WrongModel { .. } => Reason::WrongModel,
            FrameError::UnknownModel(_)
            | FrameError::EndMarker(_)
            | FrameError::Checksum { .. } => Reason::CorruptFrame,
        }
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn um34c_checksum(b: &[u8]) -> u8 {
    UM34C_CHECKSUM_POSITIONS
        .iter()
        .fold(0, |acc, &i| acc ^ b[i])
}

fn group_at(b: &[u8], at: usize) -> DataGroup {
    DataGroup {
        milliamp_hours: be32(b, at),
        milliwatt_hours: be32(b, at + 4),
    }
}

/// Decodes a poll response. `expected` is the configured model (`None` when probing).
/// Never panics, whatever the bytes.
pub fn decode(b: &[u8], expected: Option<Model>) -> Result<Frame, FrameError> {
    if b.len() != FRAME_LEN {
        return Err(FrameError::Length(b.len()));
    }
    let id = be16(b, 0);
    let model = Model::from_id(id).ok_or(FrameError::UnknownModel(id))?;
    if let Some(expected) = expected {
        if expected != model {
            return Err(FrameError::WrongModel {
                expected,
                found: model,
            });
        }
    }
    match model {
        Model::Um24c | Model::Um25c => {
            let end = be16(b, 128);
            if end != END_MARKER {
                return Err(FrameError::EndMarker(end));
            }
        }
        Model::Um34c => {
            let computed = um34c_checksum(b);
            if computed != b[129] {
                return Err(FrameError::Checksum {
                    found: b[129],
                    computed,
                });
            }
        }
    }
    let mut groups = [DataGroup::default(); 10];
    for (i, g) in groups.iter_mut().enumerate() {
        *g = group_at(b, 16 + 8 * i);
    }
    Ok(Frame {
        model,
        voltage_volts: f64::from(be16(b, 2)) / model.volt_divisor(),
        current_amperes: f64::from(be16(b, 4)) / model.amp_divisor(),
        power_watts: f64::from(be32(b, 6)) / 1000.0,
        temperature_celsius: f64::from(be16(b, 10)),
        temperature_fahrenheit: f64::from(be16(b, 12)),
        selected_group: be16(b, 14),
        groups,
        data_plus_volts: f64::from(be16(b, 96)) / 100.0,
        data_minus_volts: f64::from(be16(b, 98)) / 100.0,
        charging_mode: be16(b, 100),
        threshold_group: group_at(b, 102),
        threshold_amperes: f64::from(be16(b, 110)) / 100.0,
        threshold_seconds: be32(b, 112),
        recording: be16(b, 116) != 0,
        load_ohms: f64::from(be32(b, 122)) / 10.0,
    })
}

/// Encodes a frame as the meter sends it (values rounded to the model's resolution). Used by
/// the emulator in the tests and by the decoder's round-trip property test.
pub fn encode(f: &Frame) -> [u8; FRAME_LEN] {
    fn raw16(v: f64, scale: f64) -> u16 {
        (v * scale).round().clamp(0.0, f64::from(u16::MAX)) as u16
    }
    fn raw32(v: f64, scale: f64) -> u32 {
        (v * scale).round().clamp(0.0, f64::from(u32::MAX)) as u32
    }
    fn put16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    fn put32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }
    fn put_group(b: &mut [u8], at: usize, g: DataGroup) {
        put32(b, at, g.milliamp_hours);
        put32(b, at + 4, g.milliwatt_hours);
    }
    let m = f.model;
    let mut b = [0u8; FRAME_LEN];
    put16(&mut b, 0, m.id());
    put16(&mut b, 2, raw16(f.voltage_volts, m.volt_divisor()));
    put16(&mut b, 4, raw16(f.current_amperes, m.amp_divisor()));
    put32(&mut b, 6, raw32(f.power_watts, 1000.0));
    put16(&mut b, 10, raw16(f.temperature_celsius, 1.0));
    put16(&mut b, 12, raw16(f.temperature_fahrenheit, 1.0));
    put16(&mut b, 14, f.selected_group);
    for (i, g) in f.groups.iter().enumerate() {
        put_group(&mut b, 16 + 8 * i, *g);
    }
    put16(&mut b, 96, raw16(f.data_plus_volts, 100.0));
    put16(&mut b, 98, raw16(f.data_minus_volts, 100.0));
    put16(&mut b, 100, f.charging_mode);
    put_group(&mut b, 102, f.threshold_group);
    put16(&mut b, 110, raw16(f.threshold_amperes, 100.0));
    put32(&mut b, 112, f.threshold_seconds);
    put16(&mut b, 116, u16::from(f.recording));
    put32(&mut b, 122, raw32(f.load_ohms, 10.0));
    match m {
        Model::Um24c | Model::Um25c => put16(&mut b, 128, END_MARKER),
        Model::Um34c => b[129] = um34c_checksum(&b),
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(model: Model) -> Frame {
        let mut f = Frame::zero(model);
        f.voltage_volts = 5.12;
        f.current_amperes = 0.734;
        f.power_watts = 3.758;
        f.temperature_celsius = 27.0;
        f.temperature_fahrenheit = 80.0;
        f.selected_group = 2;
        f.groups[2] = DataGroup {
            milliamp_hours: 1234,
            milliwatt_hours: 6170,
        };
        f.data_plus_volts = 0.6;
        f.data_minus_volts = 0.58;
        f.charging_mode = 1;
        f.threshold_group = DataGroup {
            milliamp_hours: 5,
            milliwatt_hours: 25,
        };
        f.threshold_amperes = 0.15;
        f.threshold_seconds = 3600;
        f.recording = true;
        f.load_ohms = 6.9;
        f
    }

    #[test]
    fn round_trips_every_model_at_its_resolution() {
        for model in Model::ALL {
            let f = sample(model);
            assert_eq!(decode(&encode(&f), Some(model)).unwrap(), f, "{model:?}");
        }
        // Only the UM25C carries the fourth decimal.
        let mut f = sample(Model::Um25c);
        f.voltage_volts = 5.123;
        f.current_amperes = 0.7345;
        assert_eq!(decode(&encode(&f), None).unwrap(), f);
        let mut f = sample(Model::Um24c);
        f.voltage_volts = 5.123;
        assert_eq!(decode(&encode(&f), None).unwrap().voltage_volts, 5.12);
    }

    /// A frame written byte by byte from the documented offsets, not with [`encode`], so an
    /// offset that both directions got wrong would show here.
    #[test]
    fn decodes_a_frame_laid_out_by_hand() {
        let mut b = [0u8; FRAME_LEN];
        b[0..2].copy_from_slice(&[0x09, 0xc9]); // UM25C
        b[2..4].copy_from_slice(&[0x13, 0xe3]); // 5091 mV
        b[4..6].copy_from_slice(&[0x1a, 0x0b]); // 6667 x 0.1 mA
        b[6..10].copy_from_slice(&[0x00, 0x00, 0x0d, 0x43]); // 3395 mW
        b[10..12].copy_from_slice(&[0x00, 0x1c]); // 28 °C
        b[12..14].copy_from_slice(&[0x00, 0x52]); // 82 °F
        b[14..16].copy_from_slice(&[0x00, 0x03]); // group 3
        b[40..44].copy_from_slice(&[0x00, 0x00, 0x01, 0x00]); // group 3: 256 mAh
        b[44..48].copy_from_slice(&[0x00, 0x00, 0x05, 0x00]); // group 3: 1280 mWh
        b[96..98].copy_from_slice(&[0x00, 0x3c]); // D+ 0.60 V
        b[98..100].copy_from_slice(&[0x00, 0x3a]); // D- 0.58 V
        b[122..126].copy_from_slice(&[0x00, 0x00, 0x01, 0xfc]); // 50.8 Ω
        b[128..130].copy_from_slice(&[0xff, 0xf1]);
        let f = decode(&b, Some(Model::Um25c)).unwrap();
        assert_eq!(f.voltage_volts, 5.091);
        assert_eq!(f.current_amperes, 0.6667);
        assert_eq!(f.power_watts, 3.395);
        assert_eq!(
            (f.temperature_celsius, f.temperature_fahrenheit),
            (28.0, 82.0)
        );
        assert_eq!(f.selected_group, 3);
        assert_eq!(
            f.groups[3],
            DataGroup {
                milliamp_hours: 256,
                milliwatt_hours: 1280
            }
        );
        assert_eq!((f.data_plus_volts, f.data_minus_volts), (0.6, 0.58));
        assert_eq!(f.load_ohms, 50.8);
        assert_eq!(f.reading().energy.unwrap().joules, 1280.0 * 3.6);
    }

    #[test]
    fn model_scaling_differs_on_the_same_raw_bytes() {
        // Raw voltage 5000 and current 7000: UM24C/UM34C read 50.00 V/7 A, UM25C 5.000 V/0.7 A.
        let mut b = encode(&Frame::zero(Model::Um24c));
        b[2..4].copy_from_slice(&5000u16.to_be_bytes());
        b[4..6].copy_from_slice(&7000u16.to_be_bytes());
        let f = decode(&b, None).unwrap();
        assert_eq!((f.voltage_volts, f.current_amperes), (50.0, 7.0));
        b[0..2].copy_from_slice(&Model::Um25c.id().to_be_bytes());
        let f = decode(&b, None).unwrap();
        assert_eq!((f.voltage_volts, f.current_amperes), (5.0, 0.7));
    }

    #[test]
    fn rejects_short_garbage_wrong_model_and_bad_trailer() {
        let good = encode(&sample(Model::Um25c));
        assert_eq!(decode(&good[..64], None), Err(FrameError::Length(64)));
        assert_eq!(
            decode(&[0xAB; FRAME_LEN], None),
            Err(FrameError::UnknownModel(0xABAB))
        );
        let err = decode(&good, Some(Model::Um24c)).unwrap_err();
        assert_eq!(err.reason(), Reason::WrongModel);
        assert!(err.to_string().contains("Um25c"), "{err}");
        let mut bad = good;
        bad[129] ^= 1;
        assert_eq!(decode(&bad, None), Err(FrameError::EndMarker(0xFFF0)));
        let mut um34 = encode(&sample(Model::Um34c));
        assert!(decode(&um34, Some(Model::Um34c)).is_ok());
        um34[3] ^= 0x10; // covered by the checksum
        assert_eq!(
            decode(&um34, None).unwrap_err().reason(),
            Reason::CorruptFrame
        );
    }

    #[test]
    fn reading_uses_the_selected_group_as_energy_counter() {
        let r = sample(Model::Um25c).reading();
        let e = r.energy.unwrap();
        assert_eq!((e.joules, e.epoch), (6170.0 * 3.6, 2));
        assert_eq!(r.power_watts, Some(3.758));
    }

    proptest! {
        /// The fuzz target: no input of any length or content panics the decoder.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes, None);
            let _ = decode(&bytes, Some(Model::Um34c));
        }

        /// Frames that pass the checks decode to finite, non-negative values; and a frame
        /// with a valid header and trailer but any payload never panics either.
        #[test]
        fn valid_trailer_any_payload(mut payload in proptest::collection::vec(any::<u8>(), FRAME_LEN..=FRAME_LEN),
                                     model in proptest::sample::select(Model::ALL.to_vec())) {
            payload[0..2].copy_from_slice(&model.id().to_be_bytes());
            match model {
                Model::Um34c => payload[129] = um34c_checksum(&payload),
                _ => payload[128..130].copy_from_slice(&END_MARKER.to_be_bytes()),
            }
            let f = decode(&payload, Some(model)).unwrap();
            prop_assert!(f.voltage_volts.is_finite() && f.voltage_volts >= 0.0);
            let r = f.reading();
            prop_assert!(r.energy.unwrap().joules >= 0.0);
        }
    }
}
