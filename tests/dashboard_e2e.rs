//! The dashboard in a real browser: headless Chromium (Debian's) driven by
//! playwright-core against a real `homed`. `scripts/test` installs both; see
//! `tests/e2e/README.md` to run it by hand.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::Daemon;

#[test]
fn dashboard_renders_the_tree_and_restarts_an_actor() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let deps_ok = Path::new(&chromium).exists() && root.join("tests/e2e/node_modules/playwright-core").exists();
    if !deps_ok {
        // Missing browser deps are a set-up error, not a pass: `scripts/test` installs
        // them. Opt out explicitly (and visibly) on machines that cannot have a browser.
        if std::env::var_os("HOMEAGENT_SKIP_E2E").is_some() {
            eprintln!("SKIPPED: HOMEAGENT_SKIP_E2E is set and Chromium/playwright-core are missing");
            return;
        }
        panic!(
            "Chromium ({chromium}) or tests/e2e/node_modules missing: run `bash scripts/install-e2e-deps.sh` (scripts/test does)"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let shot = root.join("target/e2e-dashboard.png");
    let mut child = Command::new("node")
        .arg(root.join("tests/e2e/dashboard.mjs"))
        .arg(d.url(""))
        .arg(&shot)
        .current_dir(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("node must be installed (Node.js >= 20)");
    // Bounded: the script stops itself after 60 s; this is the backstop.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("dashboard e2e did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "dashboard e2e failed\n{stdout}\n{stderr}\ndaemon log:\n{}",
        d.log_text()
    );
    assert!(stdout.contains("dashboard e2e: PASS"), "{stdout}");
}
