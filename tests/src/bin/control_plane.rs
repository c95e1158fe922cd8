//! `greenpipe-control-plane DIR`: starts the tests' Kubernetes control plane (etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, kwok; built from source on first use
//! and cached in ~/.cache/greenpipe) with its state in DIR, prints the admin kubeconfig's path
//! once the controllers run, and stops everything on SIGTERM or SIGINT (Ctrl-C).

use std::path::PathBuf;

use greenpipe_tests::control_plane::ControlPlane;
use greenpipe_tests::daemon::block_stop_signals;

fn main() {
    if let Err(e) = run() {
        eprintln!("greenpipe-control-plane: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir] = args.as_slice() else {
        anyhow::bail!("usage: greenpipe-control-plane DIR");
    };
    let signals = block_stop_signals()?;
    let cp = ControlPlane::start_in(&PathBuf::from(dir))?;
    println!("{}", cp.kubeconfig.display());
    eprintln!(
        "greenpipe-control-plane: API server at {}; stop with Ctrl-C",
        cp.server
    );
    signals.wait()?;
    drop(cp);
    Ok(())
}
