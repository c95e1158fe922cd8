//! Combined benchmarks: mixes that look like inference without being it.
//!
//! - `cpu-memory`: each worker alternates a compute chunk (64×64 f32 products, cache-resident)
//!   with a streaming chunk over its share of `--memory-bytes` — the compute/weight-streaming
//!   mix of a network's layers. Unit: `iterations` (one of each).
//! - `request-loop`: each worker sends a 150 KB payload (a 224×224 RGB image) over TCP to an
//!   in-process server thread that computes a 1000-score answer over it and sends the answer
//!   back — receive, compute, answer, as a served model does. Always on loopback, so that the
//!   computation is on the node being profiled. Unit: `requests`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::{network_error, xorshift, BenchError, Benchmark, Env, Group, Prepared, Work};
use crate::peer;

pub fn benchmarks() -> Vec<Benchmark> {
    vec![
        Benchmark {
            name: "cpu-memory",
            group: Group::Combined,
            unit: "iterations",
            prepare: cpu_memory,
        },
        Benchmark {
            name: "request-loop",
            group: Group::Combined,
            unit: "requests",
            prepare: request_loop,
        },
    ]
}

fn cpu_memory(env: &Env) -> Result<Prepared, BenchError> {
    const N: usize = 64;
    let per = (env.memory_bytes / env.threads / 8).max(1 << 16);
    let workers = (0..env.threads)
        .map(|i| {
            let mut s = 3 + i as u64;
            let a: Vec<f32> = (0..N * N)
                .map(|_| (xorshift(&mut s) % 100) as f32 / 100.0)
                .collect();
            let mut c = vec![0f32; N * N];
            let stream = vec![1.0f64; per];
            let mut at = 0usize;
            Box::new(move || -> Result<u64, BenchError> {
                for row in 0..N {
                    for k in 0..N {
                        let av = a[row * N + k];
                        for col in 0..N {
                            c[row * N + col] += av * a[k * N + col];
                        }
                    }
                }
                c.iter_mut().for_each(|v| *v *= 1e-3);
                let end = (at + (1 << 16)).min(per);
                let sum: f64 = stream[at..end].iter().sum();
                at = if end == per { 0 } else { end };
                std::hint::black_box((&c, sum));
                Ok(1)
            }) as Work
        })
        .collect();
    Ok(Prepared {
        workers,
        params: serde_json::json!({"matrix": N, "stream_bytes": per * 8 * env.threads}),
        guard: None,
    })
}

fn request_loop(env: &Env) -> Result<Prepared, BenchError> {
    const PAYLOAD: usize = 224 * 224 * 3;
    let server = peer::spawn("127.0.0.1:0")?;
    let addr = server.addr.to_string();
    let workers = (0..env.threads)
        .map(|i| {
            let mut conn = TcpStream::connect(&addr).map_err(network_error(
                "connecting to the request-loop server",
                &addr,
            ))?;
            conn.set_nodelay(true)
                .and_then(|()| conn.set_read_timeout(Some(Duration::from_secs(10))))
                .and_then(|()| conn.write_all(&[peer::REQUEST_MAGIC]))
                .map_err(network_error(
                    "setting up the connection to the request-loop server",
                    &addr,
                ))?;
            let mut s = 11 + i as u64;
            let payload: Vec<u8> = (0..PAYLOAD).map(|_| xorshift(&mut s) as u8).collect();
            let mut reply = Vec::new();
            let addr = addr.clone();
            Ok(Box::new(move || -> Result<u64, BenchError> {
                let mut exchange = || -> std::io::Result<()> {
                    conn.write_all(&(PAYLOAD as u32).to_le_bytes())?;
                    conn.write_all(&payload)?;
                    let mut len = [0u8; 4];
                    conn.read_exact(&mut len)?;
                    reply.resize(u32::from_le_bytes(len) as usize, 0);
                    conn.read_exact(&mut reply)
                };
                exchange().map_err(network_error(
                    "sending a request to the request-loop server",
                    &addr,
                ))?;
                Ok(1)
            }) as Work)
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    Ok(Prepared {
        workers,
        params: serde_json::json!({"payload_bytes": PAYLOAD, "answer_bytes": 4000}),
        guard: Some(Box::new(server)),
    })
}
