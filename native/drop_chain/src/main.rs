//! drop_chain: build a singly linked chain of `Option<Arc<Node>>` and release it.
//!
//! Models the release of tenferro-runtime's checkpoint chain (`CheckpointNode` with
//! `prev: Option<Arc<CheckpointNode>>`). With the default drop, releasing the head drops
//! `prev`, which drops its `prev`, ... : one stack frame per node. A long enough chain
//! overflows the stack and the process aborts (SIGABRT); nothing can catch it.
//! `--iterative` releases the same chain with a `Drop` that takes `prev` in a loop.
//!
//! Usage: drop_chain NODES [--iterative] [--thread-stack-mib N]
//! Prints one line per phase; exit 0 when the chain was released, 2 on bad arguments.

use std::env;
use std::process;
use std::sync::Arc;
use std::time::Instant;

/// A chain node shaped like `CheckpointNode`: a shared graph, some payload, the link.
struct Node {
    #[allow(dead_code)]
    graph: Arc<Vec<u64>>,
    #[allow(dead_code)]
    alias: u64,
    prev: Option<Arc<Node>>,
}

/// The same node with an iterative release.
struct IterNode {
    #[allow(dead_code)]
    graph: Arc<Vec<u64>>,
    #[allow(dead_code)]
    alias: u64,
    prev: Option<Arc<IterNode>>,
}

impl Drop for IterNode {
    fn drop(&mut self) {
        let mut next = self.prev.take();
        while let Some(arc) = next {
            match Arc::try_unwrap(arc) {
                // We held the last reference: unlink its tail before it is dropped here.
                Ok(mut node) => next = node.prev.take(),
                // Someone else still holds the rest of the chain: stop.
                Err(_) => break,
            }
        }
    }
}

fn build(nodes: usize) -> Option<Arc<Node>> {
    let graph = Arc::new(vec![0u64; 4]);
    let mut head: Option<Arc<Node>> = None;
    for i in 0..nodes {
        head = Some(Arc::new(Node { graph: Arc::clone(&graph), alias: i as u64, prev: head }));
    }
    head
}

fn build_iter(nodes: usize) -> Option<Arc<IterNode>> {
    let graph = Arc::new(vec![0u64; 4]);
    let mut head: Option<Arc<IterNode>> = None;
    for i in 0..nodes {
        head = Some(Arc::new(IterNode { graph: Arc::clone(&graph), alias: i as u64, prev: head }));
    }
    head
}

fn run(nodes: usize, iterative: bool) {
    let mode = if iterative { "iterative" } else { "recursive" };
    println!("nodes={} drop={}", nodes, mode);
    let t0 = Instant::now();
    if iterative {
        let head = build_iter(nodes);
        println!("built in {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
        let t1 = Instant::now();
        drop(head);
        println!("released in {:.1} ms", t1.elapsed().as_secs_f64() * 1e3);
    } else {
        let head = build(nodes);
        println!("built in {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
        let t1 = Instant::now();
        drop(head);
        println!("released in {:.1} ms", t1.elapsed().as_secs_f64() * 1e3);
    }
}

fn usage(msg: &str) -> ! {
    eprintln!("error: {}", msg);
    eprintln!("usage: drop_chain NODES [--iterative] [--thread-stack-mib N]");
    process::exit(2);
}

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let mut nodes: Option<usize> = None;
    let mut iterative = false;
    let mut stack_mib: Option<usize> = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--iterative" => iterative = true,
            "--thread-stack-mib" => {
                i += 1;
                let v = args.get(i).unwrap_or_else(|| usage("--thread-stack-mib needs a value"));
                match v.parse::<usize>() {
                    Ok(n) if n >= 1 => stack_mib = Some(n),
                    _ => usage(&format!("--thread-stack-mib must be a positive integer, got {:?}", v)),
                }
            }
            a if nodes.is_none() => match a.parse::<usize>() {
                Ok(n) => nodes = Some(n),
                Err(_) => usage(&format!("NODES must be a non-negative integer, got {:?}", a)),
            },
            a => usage(&format!("unexpected argument {:?}", a)),
        }
        i += 1;
    }
    let nodes = nodes.unwrap_or_else(|| usage("NODES is missing"));
    match stack_mib {
        None => run(nodes, iterative),
        Some(mib) => {
            println!("running on a thread with a {} MiB stack", mib);
            let handle = std::thread::Builder::new()
                .name("chain".into())
                .stack_size(mib << 20)
                .spawn(move || run(nodes, iterative))
                .unwrap_or_else(|e| usage(&format!("cannot spawn thread: {}", e)));
            if handle.join().is_err() {
                process::exit(1);
            }
        }
    }
}
