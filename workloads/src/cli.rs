//! Command line: `infer`, `serve`, `client`, `bench`, `peer`, `list`. Flags follow the
//! exporter's style (`--web.listen-address`, `--grpc.listen-address`); every subcommand serves
//! `/metrics` and appends its run windows to `--campaign-log`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};

use greenpipe_workload::bench::kernels::Set;
use greenpipe_workload::model::{
    default_engine, engine_help, Arch, EngineKind, Libraries, ModelError, ModelSpec, Precision,
    DEFAULT_SEED,
};

/// Default `--web.listen-address` (the exporter has 9910, the estimator 9911).
pub const DEFAULT_WEB: &str = ":9912";
/// Default `--grpc.listen-address`: the port Triton and KServe serve gRPC on.
pub const DEFAULT_GRPC: &str = ":8001";

#[derive(Debug, Parser)]
#[command(
    name = "greenpipe-workload",
    version,
    about = "GreenPipe workloads: profiling benchmarks and DNN inference (local or served over the Open Inference Protocol v2)"
)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Common {
    /// Address for /metrics.
    #[arg(long = "web.listen-address", global = true, default_value = DEFAULT_WEB)]
    pub web_listen_address: String,
    /// Append one JSON line per run window to this file (docs/workloads.md).
    #[arg(long = "campaign-log", global = true, env = "GREENPIPE_CAMPAIGN_LOG")]
    pub campaign_log: Option<PathBuf>,
    /// Node name for the campaign log [default: $NODE_NAME, else the host name].
    #[arg(long = "node", global = true, env = "NODE_NAME")]
    pub node: Option<String>,
    /// Log level (error, warn, info, debug).
    #[arg(long = "log.level", global = true, default_value = "info")]
    pub log_level: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Local inference: run the model back to back for --duration.
    Infer(InferArgs),
    /// Serve the model over gRPC (Open Inference Protocol v2).
    Serve(ServeArgs),
    /// Send inference requests to a server, at a fixed concurrency or rate.
    Client(ClientArgs),
    /// Run a benchmark group swept over load levels.
    Bench(BenchArgs),
    /// TCP/UDP echo peer for the network benchmarks (run it on another node).
    Peer(PeerArgs),
    /// Classify one image: its top classes (and optionally every logit) as one JSON line.
    /// Checks that a board's build computes what another machine's does.
    Classify(ClassifyArgs),
    /// List the models and benchmarks.
    List,
}

#[derive(Debug, Args, Clone)]
pub struct ModelArgs {
    /// mobilenet_v2, efficientnet_b0 or resnet50_v2 (`infer`: a comma-separated list sweeps).
    #[arg(long, value_parser = parse_arch, value_delimiter = ',', required = true)]
    pub model: Vec<Arch>,
    /// f32, f16 or int8 (`infer`: a list sweeps).
    #[arg(long, default_value = "f32", value_parser = parse_precision, value_delimiter = ',')]
    pub precision: Vec<Precision>,
    // Help and default come from the engine list: the default is the first engine this build
    // has (tract, else onnxruntime).
    #[arg(long, help = engine_help(), default_value = default_engine().name(), value_parser = parse_engine, value_delimiter = ',')]
    pub engine: Vec<EngineKind>,
    /// Inference threads, 1..=CPUs (`infer`: a list sweeps).
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Images per inference call.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Input side in pixels.
    #[arg(long = "image-size", default_value_t = 224)]
    pub image_size: usize,
    /// Weight seed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Directory of PNG images [default: a generated set].
    #[arg(long)]
    pub images: Option<PathBuf>,
    // `--<engine>.library` for each engine with a C library, generated from the engine list.
    #[command(flatten)]
    pub library: Libraries,
}

impl ModelArgs {
    /// The engine libraries the flags (or their environment variables) name.
    pub fn libraries(&self) -> Libraries {
        self.library.clone()
    }

    /// Every combination of the listed models, precisions and thread counts, validated.
    pub fn specs(&self) -> anyhow::Result<Vec<ModelSpec>> {
        let mut specs = Vec::new();
        for &arch in &self.model {
            for &engine in &self.engine {
                for &precision in &self.precision {
                    for &threads in &self.threads {
                        let spec = ModelSpec {
                            arch,
                            precision,
                            engine,
                            threads,
                            batch: self.batch,
                            image_size: self.image_size,
                            seed: self.seed,
                        };
                        spec.validate()?;
                        specs.push(spec);
                    }
                }
            }
        }
        Ok(specs)
    }

    /// The one configuration of a server.
    pub fn spec(&self) -> anyhow::Result<ModelSpec> {
        let mut specs = self.specs()?;
        if specs.len() != 1 {
            bail!("serve takes one --model, one --engine, one --precision and one --threads");
        }
        Ok(specs.remove(0))
    }
}

#[derive(Debug, Args)]
pub struct InferArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// How long to run each configuration (e.g. 60s, 5m).
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub duration: Duration,
    /// Idle time between configurations of a sweep.
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    pub gap: Duration,
}

#[derive(Debug, Args)]
pub struct ClassifyArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Which image of the set (`--images`, or the generated set) to classify.
    #[arg(long, default_value_t = 0)]
    pub image: usize,
    /// How many of the top classes to print.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Also print every logit (1000 per image).
    #[arg(long)]
    pub logits: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// gRPC address [default: :8001].
    #[arg(long = "grpc.listen-address", default_value = DEFAULT_GRPC)]
    pub grpc_listen_address: String,
    /// Stop after this long (0: serve until SIGTERM).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub duration: Duration,
    /// Inferences computed at once.
    #[arg(long, default_value_t = 1)]
    pub instances: usize,
}

#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Server address, HOST:PORT.
    #[arg(long)]
    pub target: String,
    /// Model name on the server.
    #[arg(long)]
    pub model: String,
    /// Requests in flight (closed loop).
    #[arg(long, conflicts_with = "rate")]
    pub concurrency: Option<usize>,
    /// Requests per second (open loop).
    #[arg(long)]
    pub rate: Option<f64>,
    /// How long to send.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub duration: Duration,
    /// Stop after this many requests.
    #[arg(long)]
    pub requests: Option<u64>,
    /// How long to keep retrying a server that is not listening yet (it listens once its model
    /// is built).
    #[arg(long = "server-wait", value_parser = parse_duration, default_value = "60s")]
    pub server_wait: Duration,
    /// Directory of PNG images [default: a generated set].
    #[arg(long)]
    pub images: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// micro, combined or kernels, or a comma-separated list run in that order.
    pub group: String,
    /// Only these benchmarks (comma-separated names, see `list`).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Load levels in percent.
    #[arg(long, value_delimiter = ',', default_value = "25,50,75,100")]
    pub levels: Vec<u32>,
    /// Length of one step.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub step: Duration,
    /// Idle time between steps.
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    pub gap: Duration,
    /// Worker threads [default: every CPU].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Directory for the page-cache and disk files (must support O_DIRECT).
    #[arg(long, default_value = "/scratch")]
    pub scratch: PathBuf,
    /// Network peer HOST:PORT (`greenpipe-workload peer`) [default: in-process on loopback].
    #[arg(long)]
    pub peer: Option<String>,
    /// Memory working set (bytes, K/M/G suffix).
    #[arg(long = "memory-bytes", value_parser = parse_bytes, default_value = "256M")]
    pub memory_bytes: usize,
    /// Disk benchmark file size (bytes, K/M/G suffix).
    #[arg(long = "disk-bytes", value_parser = parse_bytes, default_value = "256M")]
    pub disk_bytes: usize,
    /// DeepBench table: device or server.
    #[arg(long = "kernels.set", default_value = "device", value_parser = Set::parse)]
    pub kernel_set: Set,
    /// Skip kernel problems whose f32 operands exceed this (bytes, K/M/G suffix).
    #[arg(long = "kernels.max-bytes", value_parser = parse_bytes, default_value = "256M")]
    pub kernel_max_bytes: usize,
}

#[derive(Debug, Args)]
pub struct PeerArgs {
    /// TCP and UDP address.
    #[arg(long = "listen-address", default_value = ":9913")]
    pub listen_address: String,
}

fn parse_arch(s: &str) -> Result<Arch, ModelError> {
    s.parse()
}

fn parse_precision(s: &str) -> Result<Precision, ModelError> {
    s.parse()
}

fn parse_engine(s: &str) -> Result<EngineKind, ModelError> {
    s.parse()
}

fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(s).with_context(|| format!("bad duration {s:?} (e.g. 30s, 5m)"))
}

/// `256M`, `4K`, `1G` or plain bytes.
pub fn parse_bytes(s: &str) -> anyhow::Result<usize> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1usize << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: usize = num
        .parse()
        .with_context(|| format!("bad size {s:?} (e.g. 256M)"))?;
    n.checked_mul(mult)
        .with_context(|| format!("size {s:?} overflows"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_addresses_parse() {
        assert_eq!(parse_bytes("256M").unwrap(), 256 << 20);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn classify_takes_one_configuration_and_an_image() {
        let cli = Cli::try_parse_from([
            "w",
            "classify",
            "--model",
            "resnet50_v2",
            "--precision",
            "int8",
            "--image",
            "3",
            "--logits",
        ])
        .unwrap();
        let Command::Classify(a) = cli.command else {
            panic!("not classify: {:?}", cli.command)
        };
        assert_eq!((a.image, a.top, a.logits), (3, 5, true));
        assert_eq!(a.model.spec().unwrap().precision, Precision::Int8);
        assert!(Cli::try_parse_from(["w", "classify", "--image", "1"]).is_err());
    }

    #[test]
    fn lists_sweep_every_combination() {
        let cli = Cli::try_parse_from([
            "w",
            "infer",
            "--model",
            "mobilenet_v2,resnet50_v2",
            "--precision",
            "f32,int8",
            "--engine",
            "tract,onnxruntime",
        ])
        .unwrap();
        let Command::Infer(a) = cli.command else {
            panic!("infer")
        };
        assert_eq!(a.model.specs().unwrap().len(), 8);
        assert!(a.model.spec().is_err(), "serve takes one configuration");
    }

    #[test]
    fn bad_model_flags_are_refused() {
        let parse = |args: &[&str]| Cli::try_parse_from(args);
        assert!(parse(&["w", "infer", "--model", "vgg16"]).is_err());
        assert!(parse(&[
            "w",
            "infer",
            "--model",
            "mobilenet_v2",
            "--precision",
            "int4"
        ])
        .is_err());
        let cli = parse(&["w", "infer", "--model", "mobilenet_v2", "--threads", "4096"]).unwrap();
        let Command::Infer(a) = cli.command else {
            panic!("infer")
        };
        let err = a.model.specs().unwrap_err();
        assert!(format!("{err}").contains("--threads 4096"), "{err}");
        let cli = parse(&[
            "w",
            "infer",
            "--model",
            "mobilenet_v2",
            "--engine",
            "onnxruntime",
            "--precision",
            "f16",
        ])
        .unwrap();
        let Command::Infer(a) = cli.command else {
            panic!("infer")
        };
        let err = a.model.specs().unwrap_err();
        assert!(format!("{err}").contains("f16 is tract's"), "{err}");
        assert!(parse(&["w", "infer", "--model", "mobilenet_v2", "--engine", "tvm"]).is_err());
    }
}
