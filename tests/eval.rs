//! `homed eval locomo` as a user runs it: a LoCoMo-format file (our own small
//! conversation in tests/fixtures; the real dev subset lives outside the project).

use std::process::Command;

use serde_json::Value;

fn homed() -> Command {
    Command::new(env!("CARGO_BIN_EXE_homed"))
}

#[test]
fn json_report_has_every_retriever_category_and_cutoff() {
    let out = homed()
        .args([
            "eval",
            "locomo",
            "tests/fixtures/locomo-mini.json",
            "--json",
            "--k",
            "1,5",
        ])
        .args(["--retriever", "tfidf,bm25,hybrid"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("mini-1 ingesting 11/11 turns"),
        "progress on stderr: {stderr}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["questions"], 4, "category 5 is left out: {v}");
    for name in ["tfidf", "bm25", "hybrid"] {
        let r = &v["retrievers"][name];
        for k in ["1", "5"] {
            let x = r["recall"][k].as_f64().unwrap_or(-1.0);
            assert!((0.0..=1.0).contains(&x), "{name} R@{k} = {x}");
        }
        for c in ["1", "2", "3", "4"] {
            assert!(r["by_category"][c]["5"].is_number(), "{name} category {c}: {r}");
        }
        assert!(r["latency_ms"]["p50"].is_number() && r["latency_ms"]["p95"].is_number());
        assert!(r["block_tokens"].as_u64().unwrap() > 0);
    }
    assert!(v["retrievers"]["embed"].is_null(), "only the asked retrievers");
    // The questions share distinctive words with their evidence: BM25 finds all of it
    // in the top 5, and the single-hop one at rank 1.
    assert_eq!(v["retrievers"]["bm25"]["recall"]["5"], 1.0, "{v}");
    assert_eq!(v["retrievers"]["bm25"]["by_category"]["4"]["1"], 1.0, "{v}");
}

#[test]
fn table_is_the_default_and_bad_input_says_what_to_do() {
    let out = homed()
        .args([
            "eval",
            "locomo",
            "tests/fixtures/locomo-mini.json",
            "--retriever",
            "bm25",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("R@10") && table.lines().any(|l| l.starts_with("bm25")),
        "{table}"
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let out = homed().args(["eval", "locomo"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not LoCoMo JSON"));
    let out = homed()
        .args(["eval", "locomo", "tests/fixtures/locomo-mini.json", "--k", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--k needs positive numbers"));
}

#[test]
fn the_chinese_fixture_loads_and_is_scored() {
    // Our own Chinese conversations (tests/fixtures/locomo-zh.json): two pairs of
    // friends, five sessions each, questions of every category with evidence ids.
    let out = homed()
        .args(["eval", "locomo", "tests/fixtures/locomo-zh.json", "--json"])
        .args(["--retriever", "tfidf,bm25"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("zh-1 ingesting 118/118 turns"), "{stderr}");
    assert!(stderr.contains("zh-2 ingesting 114/114 turns"), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["questions"], 32, "{v}");
    for name in ["tfidf", "bm25"] {
        for c in ["1", "2", "3", "4"] {
            assert!(
                v["retrievers"][name]["by_category"][c]["10"].is_number(),
                "{name} category {c}: {v}"
            );
        }
        let r10 = v["retrievers"][name]["recall"]["10"].as_f64().unwrap();
        assert!(r10 > 0.0, "{name} finds some Chinese evidence: {v}");
    }
}
