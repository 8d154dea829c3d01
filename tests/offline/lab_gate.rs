//! Every lab test opens by taking the lab's gate (tests/support/lab/gate.rs):
//! tools/test runs the lab program with two test threads, and a test that
//! took no gate would run beside one that must be alone.

use crate::support::repo_root;

#[test]
fn lab_tests_take_the_gate() {
    let dir = repo_root().join("tests/lab");
    let mut tests = 0;
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/lab") {
        let path = entry.expect("tests/lab entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a lab test file");
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "#[test]" {
                continue;
            }
            tests += 1;
            // Past the attributes, the `fn` line; the body's first line is
            // the gate.
            let fn_at = (i + 1..lines.len())
                .find(|&j| !lines[j].trim_start().starts_with("#["))
                .expect("a #[test] with no fn after it");
            // The first statement, which rustfmt may break over lines:
            // compared without its whitespace.
            let first: String = lines[fn_at + 1..]
                .join(" ")
                .split(';')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let gated = first == "let_gate=crate::lab_support::gate::shared()"
                || (first.starts_with("let_gate=crate::lab_support::gate::alone(")
                    && !first.ends_with("alone()"));
            if !gated {
                missing.push(format!(
                    "{}:{}: {}",
                    path.file_name().unwrap().to_string_lossy(),
                    fn_at + 1,
                    lines[fn_at].trim()
                ));
            }
        }
    }
    assert!(tests > 50, "found only {tests} lab tests under {dir:?}");
    assert!(
        missing.is_empty(),
        "lab tests that do not open with `let _gate = crate::lab_support::gate::shared();` \
         or `...::alone(\"why\");`:\n{}",
        missing.join("\n")
    );
}
