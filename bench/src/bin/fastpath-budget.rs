//! The fast-path instruction budget check: sheafalloc is this binary's
//! `#[global_allocator]` (release profile, fat LTO, so its fast paths
//! inline into the loop as in a service), and the check counts one
//! alloc+free pair per entry of the budget file under callgrind.
//!
//! ```text
//! fastpath-budget check [BUDGET_FILE]   # default bench/budget.toml; exit 1 if over budget
//! fastpath-budget loop SIZE N           # N pairs of SIZE bytes (what callgrind runs)
//! ```
//!
//! Builds without the peers: `cargo build --release -p sheafalloc-bench
//! --no-default-features --bin fastpath-budget`.

use std::path::PathBuf;

use sheafalloc_bench::budget::{self, Measured, N1, N2};
use sheafalloc_bench::instructions;
use sheafalloc_bench::kernels::{pairs, BinaryAllocator};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const USAGE: &str = "usage: fastpath-budget check [BUDGET_FILE] | fastpath-budget loop SIZE N";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["loop", size, n] => match (size.parse(), n.parse()) {
            (Ok(size), Ok(n)) => {
                pairs::run_one_size(&BinaryAllocator, size, n);
                0
            }
            _ => usage(),
        },
        ["check"] => check(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/budget.toml"
        ))),
        ["check", file] => check(PathBuf::from(file)),
        _ => usage(),
    };
    std::process::exit(code);
}

fn usage() -> i32 {
    eprintln!("{USAGE}");
    2
}

/// Counts every entry of `file`; prints the table; 0 if every count is
/// within budget, 1 if not, 2 if it could not measure.
fn check(file: PathBuf) -> i32 {
    let entries = match std::fs::read_to_string(&file)
        .map_err(|e| e.to_string())
        .and_then(|text| budget::parse(&text))
    {
        Ok(entries) => entries,
        Err(error) => {
            eprintln!("fastpath-budget: {}: {error}", file.display());
            return 2;
        }
    };
    let Some(valgrind) = instructions::valgrind_version() else {
        eprintln!("fastpath-budget: valgrind not found (scripts/setup.sh installs it)");
        return 2;
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("fastpath-budget: current_exe: {e}");
            return 2;
        }
    };
    let dir = std::env::temp_dir();
    let mut measured = Vec::new();
    for entry in entries {
        let total = |n: u64| {
            let out_file = dir.join(format!(
                "fastpath-budget.{}.{}.{n}.out",
                std::process::id(),
                entry.name
            ));
            let args = [
                "loop".to_owned(),
                entry.request_bytes.to_string(),
                n.to_string(),
            ];
            instructions::count(&exe, &args, &out_file).map(|run| run.instructions)
        };
        match (total(N1), total(N2)) {
            (Ok(ir1), Ok(ir2)) => {
                let per_pair = instructions::per_operation((N1, ir1), (N2, ir2));
                measured.push(Measured { entry, per_pair });
            }
            (Err(error), _) | (_, Err(error)) => {
                eprintln!("fastpath-budget: [{}]: {error}", entry.name);
                return 2;
            }
        }
    }
    println!(
        "sheafalloc fast path, instructions per alloc+free pair (loop included), \
         {valgrind}, {N1} and {N2} pairs, budget from {}:\n",
        file.display()
    );
    print!("{}", budget::table(&measured));
    if budget::within_budget(&measured) {
        println!("\nevery count is within its budget");
        0
    } else {
        println!(
            "\na count exceeds its budget: find what the change added to the fast path \
             (callgrind_annotate on a `fastpath-budget loop SIZE N` profile), or, if the \
             cost is deliberate, raise the budget in {} and say why in the commit",
            file.display()
        );
        1
    }
}
