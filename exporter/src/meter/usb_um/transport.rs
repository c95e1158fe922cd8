//! The serial line: 9600 8N1, one request byte, one fixed-length answer before a deadline.

use std::path::Path;
use std::time::{Duration, Instant};

use super::codec::{FRAME_LEN, REQUEST};
use crate::meter::{ReadError, Reason};

/// Opens a serial device at 9600 8N1, no flow control.
pub fn open(path: &Path, timeout: Duration) -> Result<Box<dyn serialport::SerialPort>, ReadError> {
    serialport::new(path.to_string_lossy(), 9600)
        .data_bits(serialport::DataBits::Eight)
        .parity(serialport::Parity::None)
        .stop_bits(serialport::StopBits::One)
        .flow_control(serialport::FlowControl::None)
        .timeout(timeout)
        .open()
        .map_err(|e| {
            let reason = match e.kind() {
                serialport::ErrorKind::NoDevice => Reason::Unplugged,
                serialport::ErrorKind::Io(k) => {
                    ReadError::from_io(path, &std::io::Error::from(k)).reason
                }
                _ => Reason::Io,
            };
            ReadError::new(reason, format!("opening {}: {e}", path.display()))
        })
}

/// Sends one request and reads one frame's worth of bytes before `deadline`.
pub fn poll(
    port: &mut dyn serialport::SerialPort,
    path: &Path,
    deadline: Instant,
) -> Result<Vec<u8>, ReadError> {
    let io = |e: std::io::Error| ReadError::from_io(path, &e);
    // Bytes of an answer that came after the previous timeout would shift this frame.
    port.clear(serialport::ClearBuffer::Input)
        .map_err(|e| ReadError::new(Reason::Unplugged, format!("{}: {e}", path.display())))?;
    port.write_all(&[REQUEST]).map_err(io)?;
    port.flush().map_err(io)?;
    let mut buf = vec![0u8; FRAME_LEN];
    let mut got = 0;
    while got < FRAME_LEN {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        port.set_timeout(left)
            .map_err(|e| ReadError::new(Reason::Io, format!("{}: {e}", path.display())))?;
        match port.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(ReadError::new(
                    Reason::Unplugged,
                    format!("{}: end of file (device gone)", path.display()),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    match got {
        FRAME_LEN => Ok(buf),
        0 => Err(ReadError::new(
            Reason::Timeout,
            format!("{}: no answer to the poll request", path.display()),
        )),
        n => Err(ReadError::new(
            Reason::ShortFrame,
            format!(
                "{}: frame has {n} bytes, expected {FRAME_LEN} (timed out)",
                path.display()
            ),
        )),
    }
}
