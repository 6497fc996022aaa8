//! Golden tests of the bundled vendor adapters: each case in
//! `tests/golden/llm/<adapter>/<case>.json` (`{fn, input, expected}`) runs through the
//! real Lua runtime and must produce exactly `expected` (compared as JSON values).

use std::path::PathBuf;

use homeagent_actors::llm::adapter::Adapter;
use homeagent_actors::llm::bundled;
use serde_json::Value;

const ADAPTERS: [&str; 10] = [
    "openai",
    "anthropic",
    "deepseek",
    "gemini",
    "github",
    "groq",
    "kimicode",
    "mistral",
    "ollama",
    "server",
];

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/llm")
}

#[test]
fn every_reference_adapter_is_bundled_and_loads() {
    for name in ADAPTERS {
        let src = bundled::bundled(name).unwrap_or_else(|| panic!("adapter {name} is not bundled"));
        Adapter::load(name, src).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn golden_cases() {
    let mut failures = Vec::new();
    let mut count = 0;
    for name in ADAPTERS {
        let adapter = Adapter::load(name, bundled::bundled(name).unwrap()).unwrap();
        let dir = golden_dir().join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let fns: std::collections::BTreeSet<String> = files
            .iter()
            .map(|f| {
                let case: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
                case["fn"].as_str().unwrap().to_owned()
            })
            .collect();
        for needed in ["transform_request", "transform_response", "transform_stream_chunk"] {
            assert!(fns.contains(needed), "{name}: no golden case for {needed}");
        }
        for file in files {
            count += 1;
            let case: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            let f = case["fn"].as_str().unwrap();
            let input = match &case["input"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let label = format!("{name}/{}", file.file_name().unwrap().to_string_lossy());
            let out = match adapter.call_str(f, &input) {
                Ok(o) => o,
                Err(e) => {
                    failures.push(format!("{label}: {e}"));
                    continue;
                }
            };
            let got = if out.is_empty() {
                Value::String(String::new())
            } else {
                serde_json::from_str(&out).unwrap_or(Value::String(out.clone()))
            };
            if got != case["expected"] {
                failures.push(format!("{label}:\n  expected {}\n  got      {got}", case["expected"]));
            }
        }
    }
    assert!(count >= 40, "only {count} golden cases");
    assert!(
        failures.is_empty(),
        "{} golden failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
