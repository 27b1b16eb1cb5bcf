//! Misuse detection (feature `checks`): each misuse runs in a child process
//! (this binary re-run with a scenario argument), which must abort with a
//! message naming the pointer and the cache. A correct program must not
//! trip any check.

use std::alloc::{GlobalAlloc, Layout};
use std::process::Command;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const SCENARIOS: &[(&str, &str, &str)] = &[
    ("double-free", "double free", "size-256"),
    ("foreign-pointer", "never handed out", "size-64"),
    ("wrong-class", "layout of another cache", "size-1024"),
    ("interior-pointer", "interior pointer", "size-256"),
    (
        "large-layout-for-slab-object",
        "layout of a direct mapping",
        "size-262144",
    ),
];

fn scenario(name: &str) {
    let allocator = sheafalloc::SheafAlloc::new();
    let layout = Layout::from_size_align(256, 8).unwrap();
    // SAFETY: each scenario misuses the allocator on purpose; the child is
    // expected to abort at the marked call, before anything is corrupted.
    unsafe {
        match name {
            "double-free" => {
                let p = allocator.alloc(layout);
                eprintln!("pointer {p:p}");
                allocator.dealloc(p, layout);
                allocator.dealloc(p, layout); // must abort
            }
            "foreign-pointer" => {
                let mut on_stack = [0u64; 8];
                let p = on_stack.as_mut_ptr().cast::<u8>();
                eprintln!("pointer {p:p}");
                allocator.dealloc(p, Layout::from_size_align(64, 8).unwrap()); // must abort
            }
            "wrong-class" => {
                let p = allocator.alloc(layout);
                eprintln!("pointer {p:p}");
                allocator.dealloc(p, Layout::from_size_align(1000, 8).unwrap());
                // must abort
            }
            "interior-pointer" => {
                let p = allocator.alloc(layout);
                let inner = p.add(16);
                eprintln!("pointer {inner:p}");
                allocator.dealloc(inner, layout); // must abort
            }
            "large-layout-for-slab-object" => {
                let p = allocator.alloc(layout);
                eprintln!("pointer {p:p}");
                allocator.dealloc(p, Layout::from_size_align(1 << 20, 8).unwrap());
                // must abort
            }
            "correct" => {
                let mut kept = Vec::new();
                for i in 0..50_000usize {
                    let v = vec![i as u8; 1 + i % 5000];
                    if i % 3 == 0 {
                        kept.push(v);
                    }
                }
                let big = vec![1u8; 3 << 20];
                assert_eq!(big.len() + kept.len(), (3 << 20) + 16_667);
                std::process::exit(0);
            }
            other => panic!("unknown scenario {other}"),
        }
    }
    eprintln!("scenario {name} was not caught");
    std::process::exit(3);
}

fn main() {
    if let Some(name) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) {
        scenario(&name);
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut passed = 0;
    for (name, message, cache) in SCENARIOS {
        let output = Command::new(&exe).arg(name).output().expect("run child");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let signal = std::os::unix::process::ExitStatusExt::signal(&output.status);
        assert_eq!(
            signal,
            Some(libc::SIGABRT),
            "{name}: expected an abort, got {:?}\n{stderr}",
            output.status
        );
        let pointer = stderr
            .lines()
            .find_map(|l| l.strip_prefix("pointer 0x"))
            .unwrap_or_else(|| panic!("{name}: child printed no pointer\n{stderr}"));
        let report = stderr
            .lines()
            .find(|l| l.starts_with("sheafalloc: "))
            .unwrap_or_else(|| panic!("{name}: no report\n{stderr}"));
        assert!(
            report.contains(message),
            "{name}: report lacks {message:?}: {report}"
        );
        assert!(
            report.contains(&format!("0x{pointer}")),
            "{name}: report lacks the pointer 0x{pointer}: {report}"
        );
        assert!(
            report.contains(&format!("(cache {cache})")),
            "{name}: report lacks the cache {cache}: {report}"
        );
        println!("{name}: caught: {report}");
        passed += 1;
    }
    let output = Command::new(&exe)
        .arg("correct")
        .output()
        .expect("run child");
    assert!(
        output.status.success(),
        "a correct program tripped a check: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    passed += 1;
    println!("test result: ok. {passed} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}
