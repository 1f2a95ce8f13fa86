//! Test support for operating a log (issue 25): `/metrics` read by an
//! independent parser (Python's `prometheus_client`, not the crate that
//! wrote it), pages rendered by a real headless Chromium, and README
//! blocks run as scripts. Each says why and skips when its tool is absent,
//! unless CI requires it (`RCPT_REQUIRE_INDEPENDENT=1` for the Python
//! parser, `RCPT_REQUIRE_CHROMIUM=1` for the browser): then it fails.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::serve::raw;

/// One sample as the Python parser read it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Sample {
    pub family: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed exposition.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub samples: Vec<Sample>,
    pub text: String,
}

impl Scrape {
    /// The value of sample `name` with exactly these labels (others absent), if any.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }

    /// As [`Scrape::get`], 0 when absent (a counter never incremented).
    pub fn count(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or(0.0)
    }

    /// The type of family `family`, if present.
    pub fn kind(&self, family: &str) -> Option<&str> {
        self.samples
            .iter()
            .find(|s| s.family == family)
            .map(|s| s.kind.as_str())
    }

    /// Every label name and value used.
    pub fn labels(&self) -> Vec<(String, String)> {
        self.samples
            .iter()
            .flat_map(|s| s.labels.clone().into_iter())
            .collect()
    }
}

const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as prometheus_text
text = sys.stdin.read()
# The Prometheus text-format parser must read it too (it reads an
# OpenMetrics counter's _total samples as a family of their own).
plain = sum(len(f.samples) for f in prometheus_text(text))
out = []
for f in openmetrics(text):
    for s in f.samples:
        out.append({"family": f.name, "type": f.type, "name": s.name,
                    "labels": s.labels, "value": float(s.value)})
print(json.dumps({"plain_samples": plain, "samples": out}))
"#;

fn required(var: &str) -> bool {
    std::env::var(var).ok().as_deref() == Some("1")
}

/// True when python3 can import `prometheus_client`; else skips (or
/// fails, with `RCPT_REQUIRE_INDEPENDENT=1`).
pub fn parser_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import prometheus_client.openmetrics.parser"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            !required("RCPT_REQUIRE_INDEPENDENT"),
            "RCPT_REQUIRE_INDEPENDENT=1 but python3 cannot import prometheus_client (pip install prometheus_client)"
        );
        crate::support::skip(
            "python3 with prometheus_client is not available: pip install prometheus_client",
        );
    }
    ok
}

/// `text` read by Python's OpenMetrics parser (strict: `# EOF`, units,
/// counter suffixes) and its Prometheus text parser; panics if either refuses it.
pub fn parse(text: &str) -> Scrape {
    let mut child = Command::new("python3")
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::support::write_stdin(&mut child, text.as_bytes());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Python parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["plain_samples"].as_u64().unwrap() > 0, "{text}");
    let samples: Vec<Sample> = serde_json::from_value(v["samples"].clone()).unwrap();
    Scrape {
        samples,
        text: text.to_string(),
    }
}

/// `GET /metrics` of the server at `addr`: 200, the OpenMetrics type, parsed.
pub fn scrape(addr: SocketAddr) -> Scrape {
    let r = raw(addr, "GET", "/metrics", &[], b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    parse(&String::from_utf8(r.body).unwrap())
}

/// The Chromium binary, or `None` after a visible skip (a failure with
/// `RCPT_REQUIRE_CHROMIUM=1`).
pub fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(name))
                .find(|p| p.is_file())
        })
    });
    if found.is_none() {
        assert!(
            !required("RCPT_REQUIRE_CHROMIUM"),
            "RCPT_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install -y chromium)"
        );
        crate::support::skip("no chromium on PATH (apt-get install -y chromium)");
    }
    found
}

/// Longest a browser run may take.
const BROWSER_LIMIT: Duration = Duration::from_secs(90);

/// Chromium's rendered DOM of `url` after load (`--dump-dom`), with a
/// fresh profile; `screenshot`, when given, also gets a PNG of the page
/// at a phone's width. Headless chromium in a container now and then dies
/// of a signal (SIGSEGV in its crash handler) before it loads anything:
/// such a death is tried once more, said on stderr; a page that kills it
/// twice, or any exit with a status, fails the test.
pub fn dump_dom(browser: &Path, url: &str, screenshot: Option<&Path>) -> String {
    match run_browser(browser, url, screenshot) {
        Ok(dom) => dom,
        Err(first) => {
            eprintln!("chromium died of a signal, trying once more:\n{first}");
            run_browser(browser, url, screenshot)
                .unwrap_or_else(|again| panic!("chromium died of a signal twice:\n{again}"))
        }
    }
}

/// One browser run: its DOM, or `Err` when it died of a signal.
fn run_browser(browser: &Path, url: &str, screenshot: Option<&Path>) -> Result<String, String> {
    let profile = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--user-data-dir={}", profile.path().display()));
    match screenshot {
        Some(png) => {
            args.push(format!("--screenshot={}", png.display()));
            args.push("--window-size=390,844".to_string());
        }
        None => args.push("--dump-dom".to_string()),
    }
    args.push(url.to_string());
    let mut child = Command::new(browser)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > BROWSER_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    if std::os::unix::process::ExitStatusExt::signal(&status).is_some() {
        return Err(format!("{status:?}\n{err}"));
    }
    assert!(status.success(), "chromium failed: {status:?}\n{err}");
    Ok(reader.join().unwrap())
}

/// The text between `<tag ... id="ID">` and the next `<`: an element's
/// first text in a serialised DOM.
pub fn text_of(dom: &str, id: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let rest = &dom[at..];
    let start = rest.find('>')? + 1;
    let end = rest[start..].find('<')?;
    Some(rest[start..start + end].to_string())
}

/// One unlabelled sample read straight from `GET /metrics` (no parser
/// run: fast enough to poll while a batch is open).
pub fn quick_value(addr: SocketAddr, name: &str) -> Option<f64> {
    let r = raw(addr, "GET", "/metrics", &[], b"");
    let text = String::from_utf8(r.body).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}
